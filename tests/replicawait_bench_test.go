package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/node"
)

// What the wait after each grant costs (BENCHMARKS.md, "What the split-brain
// wait costs"): a master with 0, 1 and 2 replicas on loopback, each grant
// timed with the wait on and off in alternating rounds of one run, and the
// IDs a node issues in a fixed time the same way.
//
//	go test -run '^$' -bench ReplicaWait -benchtime 400x ./tests/

// replicated starts a master with n replicas and waits until they are online.
func replicated(b *testing.B, n int) *redis.Client {
	b.Helper()
	redistest.Require(b)
	m := redistest.Start(b, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	for range n {
		redistest.Start(b, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(m.Port())}})
	}
	rdb := m.Client(b)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Online, and acknowledging writes: after a full sync the master
		// holds the stream back until the replica's first periodic ACK
		// (up to 1 s).
		mk, err := coord.SplitBrainCheck(context.Background(), rdb, "")
		if err == nil && mk.Online == n && ackedWrite(rdb, n) {
			return rdb
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d replicas not online: %+v %v", n, mk, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkReplicaWait_Grant: one claim (clock check + claim.lua + WAIT),
// renewal, reservation or counter segment per iteration, alternately with
// the wait on and off; p50 of each and their ratio.
func BenchmarkReplicaWait_Grant(b *testing.B) {
	counter := redis.NewScript(contract.Counter)
	for _, replicas := range []int{0, 1, 2} {
		for _, op := range []string{"claim", "renew", "reserve", "segment"} {
			b.Run(fmt.Sprintf("replicas=%d/%s", replicas, op), func(b *testing.B) {
				rdb := replicated(b, replicas)
				ctx := context.Background()
				reg, err := coord.NewRegistry(rdb, coord.Options{Horizon: time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				// A registry with no loss floor, so the counter is not ahead (a
				// floor would put its first segment a lead + 1 s ahead).
				if err := redistest.InitRegistry(ctx, rdb, coord.DefaultNamespace, reg.Layout().String()); err != nil {
					b.Fatal(err)
				}
				if err := rdb.HSet(ctx, contract.NewKeys(coord.DefaultNamespace).Counter, "tick", 0, "seq", 0).Err(); err != nil {
					b.Fatal(err)
				}
				lease := claimRetry(b, reg)
				l := flake.DefaultLayout()
				args := contract.CounterArgs{Keys: contract.NewKeys(coord.DefaultNamespace), Size: 16, EpochUs: l.StartTime.UnixMicro(),
					TickUs: float64(l.TimeUnit / time.Microsecond), SeqBits: l.BitsSequence, Lead: 1000, Layout: l.String(),
					EventsMaxLen: 1000, CounterID: l.CounterMachineID(), Host: "bench", PID: 1, Generation: "g"}
				keys, argv := args.KeysArgv()
				var segWait replwait.Waiter
				var claimed *coord.Lease
				grant := func() {
					var err error
					switch op {
					case "claim":
						claimed, err = reg.Claim(ctx, coord.ClaimOptions{})
					case "renew":
						err = lease.Renew(ctx)
					case "reserve":
						_, err = lease.Reserve(ctx, l.Tick(time.Now())+200)
					case "segment":
						var v []any
						if v, _, err = segWait.Run(ctx, rdb, counter, keys, argv, 6, replwait.DefaultTimeout); err == nil && v[0] != "OK" {
							err = fmt.Errorf("counter.lua: %v", v)
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				var on, off []time.Duration
				b.ResetTimer()
				for i := range b.N {
					replwait.SetOffForTest(i%2 == 1)
					start := time.Now()
					grant()
					if i%2 == 1 {
						off = append(off, time.Since(start))
					} else {
						on = append(on, time.Since(start))
					}
					if claimed != nil { // outside the timing
						b.StopTimer()
						if err := claimed.Release(ctx, claimed.Floor()); err != nil {
							b.Fatal(err)
						}
						claimed = nil
						b.StartTimer()
					}
				}
				b.StopTimer()
				replwait.SetOffForTest(false)
				if len(off) == 0 {
					return
				}
				slices.Sort(on)
				slices.Sort(off)
				b.ReportMetric(float64(on[len(on)/2].Microseconds()), "p50-µs-wait")
				b.ReportMetric(float64(off[len(off)/2].Microseconds()), "p50-µs-nowait")
				b.ReportMetric(float64(on[len(on)*99/100].Microseconds()), "p99-µs-wait")
				b.ReportMetric(float64(off[len(off)*99/100].Microseconds()), "p99-µs-nowait")
				b.ReportMetric(float64(on[len(on)/2])/float64(off[len(off)/2]), "ratio")
			})
		}
	}
}

// BenchmarkReplicaWait_IDs: a node in flake and in counter mode issues IDs
// for 1 s per round, rounds alternately with the wait on and off; IDs per
// second of each and their ratio. 12 sequence bits (409,600 IDs/s per
// machine ID), so the grants, not the clock, would show.
func BenchmarkReplicaWait_IDs(b *testing.B) {
	l, err := flake.NewLayout(12, 10, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		b.Fatal(err)
	}
	for _, replicas := range []int{0, 1, 2} {
		for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter} {
			b.Run(fmt.Sprintf("replicas=%d/%s", replicas, mode), func(b *testing.B) {
				rdb := replicated(b, replicas)
				// A registry that lost nothing: no floor to wait for before
				// the first ID.
				if err := redistest.InitRegistry(context.Background(), rdb, coord.DefaultNamespace, l.String()); err != nil {
					b.Fatal(err)
				}
				n, err := node.New(context.Background(), node.Options{Redis: rdb, Mode: mode,
					Registry: coord.Options{Layout: l}})
				if err != nil {
					b.Fatal(err)
				}
				defer n.Close(context.Background())
				buf := make([]uint64, 256)
				for end := time.Now().Add(time.Second); time.Now().Before(end); { // warm-up
					if _, err := n.NextIDs(context.Background(), buf); err != nil {
						b.Fatal(err)
					}
				}
				var on, off, onRounds, offRounds float64
				b.ResetTimer()
				for i := range b.N {
					replwait.SetOffForTest(i%2 == 1)
					ids, end := 0, time.Now().Add(time.Second)
					for time.Now().Before(end) {
						got, err := n.NextIDs(context.Background(), buf)
						if err != nil {
							b.Fatal(err)
						}
						ids += got
					}
					if i%2 == 1 {
						off += float64(ids)
						offRounds++
					} else {
						on += float64(ids)
						onRounds++
					}
				}
				b.StopTimer()
				replwait.SetOffForTest(false)
				b.ReportMetric(on/onRounds, "IDs/s-wait")
				if offRounds > 0 {
					b.ReportMetric(off/offRounds, "IDs/s-nowait")
					b.ReportMetric((on/onRounds)/(off/offRounds), "ratio")
				}
			})
		}
	}
}

// claimRetry claims, retrying for up to 10 s: on a busy machine a replica
// just online may not acknowledge the first grant within the wait.
func claimRetry(b *testing.B, reg *coord.Registry) *coord.Lease {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := reg.Claim(context.Background(), coord.ClaimOptions{})
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ackedWrite reports whether a write is acknowledged by n replicas within 1 s.
func ackedWrite(rdb *redis.Client, n int) bool {
	ctx := context.Background()
	conn := rdb.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "probe", 1, 0).Err(); err != nil {
		return false
	}
	return conn.Wait(ctx, n, time.Second).Val() >= int64(n)
}
