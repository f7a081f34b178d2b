package replwait_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/replwait"
)

// grant writes a key and replies like a granting script: {"OK", need,
// listed}.
var grant = redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]); return {'OK', tonumber(ARGV[1]), 'r1:1 online'}`)

func waits(t *testing.T, rdb *redis.Client) string {
	info := rdb.Info(context.Background(), "commandstats").Val()
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "cmdstat_wait:") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// A grant asking for more replicas than acknowledge it is refused with an
// error naming them and the fix (fail closed); one asking for none sends
// no WAIT; a reply that is not a grant is returned as is.
func TestRun_RefusesUnacknowledged(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := context.Background()
	var w replwait.Waiter
	v, res, err := w.Run(ctx, rdb, grant, []string{"{t}:k"}, []any{0}, 1, 50*time.Millisecond)
	if err != nil || v[0] != "OK" || res.Need != 0 {
		t.Fatalf("need 0: %v %+v %v", v, res, err)
	}
	if w := waits(t, rdb); w != "" {
		t.Fatalf("need 0 sent a WAIT: %s", w)
	}
	start := time.Now()
	_, res, err = w.Run(ctx, rdb, grant, []string{"{t}:k"}, []any{1}, 1, 50*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || res.Need != 1 || res.Acked != 0 ||
		!strings.Contains(err.Error(), "0 of 1 replicas") || !strings.Contains(err.Error(), "r1:1 online") ||
		!strings.Contains(err.Error(), "flaked audit replicas --set") {
		t.Fatalf("need 1 without a replica: %+v %v", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the wait took %v, bounded by 50ms", d)
	}
	was := replwait.SetOffForTest(true)
	_, _, err = w.Run(ctx, rdb, grant, []string{"{t}:k"}, []any{1}, 1, 50*time.Millisecond)
	replwait.SetOffForTest(was)
	if err != nil {
		t.Fatalf("with the wait off: %v", err)
	}
}

// A client that cannot pin a connection (a Ring) is refused, not run
// without the wait.
func TestRun_RingRefused(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	var w replwait.Waiter
	_, _, err := w.Run(context.Background(), ring, grant, []string{"{t}:k"}, []any{1}, 1, 50*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) {
		t.Fatalf("a Ring: %v", err)
	}
}

// A client a Waiter made grants through is not kept alive by the Waiter's
// package once both are dropped: the simulator makes a client per node
// start, thousands per hunt, and a record of the process kept each one
// (and the simulated world its dialer reaches), 9 GB in 1,500 seeds.
func TestRun_ClientsAreNotKept(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	collected := make(chan struct{})
	func() {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		var w replwait.Waiter
		if _, _, err := w.Run(context.Background(), rdb, grant, []string{"{t}:k"}, []any{0}, 1, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(rdb, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the client is still reachable after its Waiter was dropped")
}
