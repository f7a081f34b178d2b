package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// Fault: Redis killed under a flake node for longer than its reservation
// lasts, then restarted (AOF: nothing lost, but Redis cannot tell: the
// lease is claimed again at the loss floor, seconds ahead of the clock).
// Guard (wait.go): with IDWait a caller waits instead of failing while the
// node has nothing to issue from, and past IDWait gets an error saying what
// the node waits for; nothing is guessed meanwhile. Part one: a short
// IDWait, so the errors come, naming the reservation and then the clock
// and when IDs resume. Part two: an IDWait longer than the outage, so a
// caller never sees an error. A duplicate shows as IDs that are not
// strictly increasing across the outage and the claim after it.
func TestFlake_IDWait_WaitsThenErrorNamesWhat(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{AOF: true})
	// The registry looks as if this server had always held it: the first
	// claim has no loss floor to wait for.
	if err := redistest.ForgetLoss(ctxT(t), client(t, srv), coord.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	newWaiting := func(wait time.Duration) *node.Node {
		return newNode(t, fast(node.Options{Redis: client(t, srv), IDWait: wait, ReserveAhead: time.Second,
			Registry: coord.Options{LeaseTTL: 3 * time.Second, MaxWait: time.Minute},
			Logger:   zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)}))
	}
	t.Run("past the wait", func(t *testing.T) {
		n := newWaiting(300 * time.Millisecond)
		var ids []uint64
		next := func() error {
			id, err := n.NextID(context.Background())
			if err == nil {
				ids = append(ids, id)
			}
			return err
		}
		for range 100 {
			if err := next(); err != nil {
				t.Fatal(err)
			}
		}
		srv.Kill()
		var err error
		for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); {
			err = next()
		}
		if err == nil || !strings.Contains(err.Error(), "no ID within 300ms") || !strings.Contains(err.Error(), "Redis to extend the reservation") {
			t.Fatalf("with Redis down past the reservation: %v; want an error past the ID wait naming the reservation", err)
		}
		srv.Restart(t)
		sawClock := false
		for deadline := time.Now().Add(20 * time.Second); ; {
			err := next()
			if err == nil && len(ids) > 200 {
				break
			}
			if err != nil && strings.Contains(err.Error(), "waiting for the clock to reach the machine IDs' next tick (IDs resume at ") {
				sawClock = true
			}
			if time.Now().After(deadline) {
				t.Fatalf("no IDs after Redis came back: %v", err)
			}
		}
		if !sawClock {
			t.Error("no error named the clock and when IDs resume while the new lease's floor was ahead")
		}
		idtest.Increasing(t, n.Layout(), "node", ids)
		n.Close(context.Background())
	})
	t.Run("within the wait", func(t *testing.T) {
		n := newWaiting(10 * time.Second)
		var ids []uint64
		done := make(chan error, 1)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				id, err := n.NextID(context.Background())
				if err != nil {
					done <- err
					return
				}
				ids = append(ids, id)
			}
		}()
		time.Sleep(300 * time.Millisecond)
		srv.Kill()
		time.Sleep(2500 * time.Millisecond) // past the reservation (1 s ahead + 1 s lead)
		srv.Restart(t)
		time.Sleep(6 * time.Second) // the claim at the loss floor, and issuing again
		close(stop)
		if err := <-done; err != nil {
			t.Fatalf("a caller got an error through an outage shorter than its ID wait: %v", err)
		}
		idtest.Increasing(t, n.Layout(), "node", ids)
		n.Close(context.Background())
	})
}
