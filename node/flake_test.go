package node_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

// In flake mode, Redis away until the reservation is spent gives a clear
// error (never a guessed ID); when Redis is back the node goes on above
// everything it issued.
func TestFlake_RedisAway_ReservationSpent_ClearError(t *testing.T) {
	srv := realRedis(t)
	n := newNode(t, node.Options{Redis: client(t, srv), MaxLead: 20 * time.Millisecond,
		ReserveAhead: 50 * time.Millisecond, Registry: coord.Options{LeaseTTL: 3 * time.Second}})
	ids := issue(t, n, 1000)
	srv.Pause()
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		var id uint64
		id, err = n.NextID(ctx)
		cancel()
		if err == nil {
			ids = append(ids, id)
		}
	}
	// Readiness follows within a Redis timeout (a reservation in flight
	// has not failed yet).
	poll.Wait(3*time.Second, func() error { // the test's assertion follows
		if n.Ready() {
			return errors.New("ready")
		}
		return nil
	})
	ready := n.Ready()
	srv.Resume()
	if !errors.Is(err, flake.ErrReserve) {
		t.Fatalf("NextID with Redis away: err = %v, want ErrReserve", err)
	}
	if ready {
		t.Fatal("node is ready with its reservation spent")
	}
	ids = append(ids, issue(t, n, 1000)...)
	idtest.Increasing(t, n.Layout(), "node", ids)
}

// In flake mode a lost lease (another owner's claim moved the reservation)
// is replaced by a fresh claim; IDs go on strictly increasing.
func TestFlake_LeaseLost_Reclaims(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	n := newNode(t, fast(node.Options{Redis: rdb, Registry: coord.Options{LeaseTTL: time.Second}}))
	ids := issue(t, n, 2000)
	old := n.MachineIDs()[0]
	// What a takeover looks like to the old owner: its lease key gone and
	// the reservation moved past its grant.
	ctx := ctxT(t)
	mid := strconv.Itoa(old)
	if err := rdb.Del(ctx, "{flaked}:lease:"+mid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HIncrBy(ctx, "{flaked}:reserved", mid, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a new lease", func() bool {
		m := n.MachineIDs()
		return len(m) == 1 && m[0] != old
	})
	ids = append(ids, issue(t, n, 2000)...)
	idtest.Increasing(t, n.Layout(), "node", ids)
	for _, id := range ids[2000:] {
		if p := n.Layout().Decompose(id); p.MachineID == old && p.Tick > n.Layout().Tick(time.Now())-500 {
			// IDs under the old ID after the loss must be within its grant,
			// which the test moved the reservation past.
			res, _ := rdb.HGet(ctx, "{flaked}:reserved", mid).Int64()
			if p.Tick > res {
				t.Fatalf("ID %d under the lost machine ID %d at tick %d, above its reservation %d", id, old, p.Tick, res)
			}
		}
	}
}
