package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// Fault: Redis slow (every reply delayed 1.5 s, longer than IDWait) and
// then paused (nothing delivered), under a node in each mode, with the
// Redis client's default timeouts (redisurl.DefaultTimeout). The promise of
// IDWait (no client waits more than a second): every NextID,
// NextIDs and NextBlock returns within IDWait, with an ID or an error
// naming what the node waits for, never later, whatever Redis does; the
// renewals and segments in flight go on in the background. A duplicate
// shows as an ID seen twice across the slow phase, the pause and the
// recovery.
func TestIDWait_SlowAndPausedRedis_EveryCallWithinBound(t *testing.T) {
	const idWait = time.Second
	// Slack for the scheduler (the race detector, a loaded machine):
	// the bound itself is IDWait, the product's promise.
	const slack = 400 * time.Millisecond
	for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			redistest.Require(t)
			srv := redistest.Start(t, redistest.Options{})
			if err := redistest.ForgetLoss(ctxT(t), client(t, srv), coord.DefaultNamespace); err != nil {
				t.Fatal(err)
			}
			p := faultproxy.Start(t, srv.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: redisurl.DefaultTimeout,
				ReadTimeout: redisurl.DefaultTimeout, WriteTimeout: redisurl.DefaultTimeout, MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			n := newNode(t, node.Options{Redis: rdb, Mode: mode, IDWait: idWait,
				Registry: coord.Options{LeaseTTL: 6 * time.Second},
				Logger:   zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
			seen := map[uint64]bool{}
			add := func(ids ...uint64) {
				for _, id := range ids {
					if seen[id] {
						t.Fatalf("ID %d issued twice", id)
					}
					seen[id] = true
				}
			}
			var ok, failed int
			// call runs one request of each kind in turn and checks its
			// duration against the bound.
			call := func(i int) {
				start := time.Now()
				var err error
				switch i % 3 {
				case 0:
					var id uint64
					if id, err = n.NextID(context.Background()); err == nil {
						add(id)
					}
				case 1:
					dst := make([]uint64, 10)
					var got int
					got, err = n.NextIDs(context.Background(), dst)
					add(dst[:got]...)
				case 2:
					var b flake.Block
					if b, err = n.NextBlock(context.Background(), 10); err == nil {
						for j := range b.Count {
							add(b.ID(j))
						}
					}
				}
				if d := time.Since(start); d > idWait+slack {
					t.Errorf("request %d took %v, more than IDWait %v (+%v slack): %v", i%3, d, idWait, slack, err)
				}
				if err != nil {
					failed++
					if !errors.Is(err, node.ErrUnavailable) {
						t.Errorf("error %v does not wrap ErrUnavailable", err)
					}
				} else {
					ok++
				}
			}
			run := func(what string, d time.Duration) {
				ok, failed = 0, 0
				for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
					call(i)
					time.Sleep(5 * time.Millisecond)
				}
				t.Logf("%s: %d requests answered with IDs, %d with errors", what, ok, failed)
			}
			poll.Until(t, 20*time.Second, "a first ID", func() bool {
				id, err := n.NextID(context.Background())
				if err == nil {
					add(id)
				}
				return err == nil
			})
			run("healthy", 500*time.Millisecond)
			p.SetDelay(1500 * time.Millisecond)
			run("replies delayed 1.5 s", 4*time.Second)
			p.SetDelay(0)
			p.Blackhole()
			run("paused", 3*time.Second)
			p.Heal()
			run("healed", 500*time.Millisecond)
			poll.Until(t, 20*time.Second, "IDs after the faults", func() bool {
				id, err := n.NextID(context.Background())
				if err == nil {
					add(id)
				}
				return err == nil
			})
		})
	}
}
