package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/server"
)

func newClient(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(opts)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// hammer calls next from g goroutines, each until it has n IDs or fails,
// and returns every ID. The first error fails the test.
func hammer(t *testing.T, g, n int, next func() ([]uint64, error)) []uint64 {
	t.Helper()
	var wg sync.WaitGroup
	per := make([][]uint64, g)
	errs := make(chan error, g)
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 0, n)
			for len(ids) < n {
				got, err := next()
				if err != nil {
					errs <- err
					return
				}
				ids = append(ids, got...)
			}
			per[i] = ids
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("goroutine failed: %v", err)
	}
	return slices.Concat(per...)
}

func one(c *client.Client, ctx context.Context) func() ([]uint64, error) {
	return func() ([]uint64, error) {
		id, err := c.NextID(ctx)
		return []uint64{id}, err
	}
}

// 32 goroutines × 50,000 IDs through one client on a fleet of three
// daemons, through the prefetch buffer and with NextIDs(100); and 32 ×
// 5,000 with a NEXTID round trip each (1.6M round trips take about a
// minute under -race on two cores).
func TestNextID_32Goroutines_NoDuplicates(t *testing.T) {
	f := newFleet(t)
	ds := []*testDaemon{f.start(t, server.Options{}), f.start(t, server.Options{}), f.start(t, server.Options{})}
	addrs := []string{ds[0].addr, ds[1].addr, ds[2].addr}
	const goroutines = 32
	for _, tc := range []struct {
		name string
		perG int
		opts client.Options
		next func(c *client.Client, ctx context.Context) func() ([]uint64, error)
	}{
		{"prefetch", 50_000, client.WithNEXTIDSPrefetch(client.Options{Addrs: addrs, Prefetch: 1000, MaxAge: time.Minute}), one},
		// Blocks: a client takes its blocks from one daemon while it
		// answers (its IDs then increase), so the spread is not checked.
		{"blocks", 50_000, client.Options{Addrs: addrs, Prefetch: 1000, MaxAge: time.Minute}, one},
		{"NextIDs", 50_000, client.Options{Addrs: addrs}, func(c *client.Client, ctx context.Context) func() ([]uint64, error) {
			return func() ([]uint64, error) { return c.NextIDs(ctx, 100) }
		}},
		{"direct", 5_000, client.Options{Addrs: addrs}, one},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.opts)
			ids := hammer(t, goroutines, tc.perG, tc.next(c, idtest.Context(t, 2*time.Minute)))
			if len(ids) != goroutines*tc.perG {
				t.Fatalf("%d IDs, want %d", len(ids), goroutines*tc.perG)
			}
			idtest.Unique(t, testLayout, ids)
			// Load was spread: every daemon served requests.
			for _, d := range c.Stats().Daemons {
				if tc.name == "blocks" {
					break
				}
				if d.Requests == 0 || d.Failures != 0 {
					t.Errorf("daemon %s: %d requests, %d failures: want > 0 and 0", d.Addr, d.Requests, d.Failures)
				}
			}
		})
	}
}

// One of three daemons is killed while 16 goroutines draw IDs: nobody
// sees an error, and no ID repeats.
func TestFailover_DaemonKilledMidRun(t *testing.T) {
	f := newFleet(t)
	for _, tc := range []struct {
		name string
		opts client.Options
		next func(c *client.Client, ctx context.Context) func() ([]uint64, error)
	}{
		{"NextID", client.Options{}, one},
		{"NextIDs", client.Options{}, func(c *client.Client, ctx context.Context) func() ([]uint64, error) {
			return func() ([]uint64, error) { return c.NextIDs(ctx, 50) }
		}},
		{"prefetch", client.WithNEXTIDSPrefetch(client.Options{Prefetch: 200}), one},
		// Blocks come from one daemon while it answers: the victim is the
		// daemon that served the most requests when the kill comes.
		{"blocks", client.Options{Prefetch: 200}, one},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := []*testDaemon{f.start(t, server.Options{}), f.start(t, server.Options{}), f.start(t, server.Options{})}
			opts := tc.opts
			opts.Addrs = []string{ds[0].addr, ds[1].addr, ds[2].addr}
			c := newClient(t, opts)
			next := tc.next(c, idtest.Context(t, time.Minute))
			const goroutines, perG = 16, 6000
			var drawn atomic.Int64
			var killed atomic.Bool
			victim := ds[1]
			victimMachine := victim.machineIDs()[0]
			done := make(chan struct{})
			ids := hammer(t, goroutines, perG, func() ([]uint64, error) {
				got, err := next()
				// Kill when a third of the run is done, with requests in flight.
				if drawn.Add(int64(len(got))) > goroutines*perG/3 && killed.CompareAndSwap(false, true) {
					if tc.name == "blocks" {
						most := uint64(0)
						for i, st := range c.Stats().Daemons {
							if st.Requests > most {
								most, victim = st.Requests, ds[i]
							}
						}
						victimMachine = victim.machineIDs()[0]
					}
					go func() { victim.kill(); close(done) }()
				}
				return got, err
			})
			<-done
			if !killed.Load() {
				t.Fatal("the daemon was not killed")
			}
			if tc.name == "blocks" {
				// Blocks grow with demand: the two the client held from
				// the victim at the kill may cover the rest of the run.
				// Draw on through them, to the others' IDs.
				ctx := idtest.Context(t, 10*time.Second)
				for limit := 2*c.Stats().BlockSize + 1; limit > 0; limit-- {
					id, err := c.NextID(ctx)
					if err != nil {
						t.Fatalf("NextID after the kill: %v", err)
					}
					ids = append(ids, id)
					if testLayout.Decompose(id).MachineID != victimMachine {
						break
					}
				}
			}
			idtest.Unique(t, testLayout, ids)
			var fromVictim, fromOthers int
			for _, id := range ids {
				if testLayout.Decompose(id).MachineID == victimMachine {
					fromVictim++
				} else {
					fromOthers++
				}
			}
			if fromVictim == 0 || fromOthers == 0 || (tc.name != "blocks" && fromOthers < len(ids)/2) {
				t.Errorf("%d IDs from the killed daemon, %d from the others: want some before the kill, most after (blocks: some)", fromVictim, fromOthers)
			}
			// The client still answers, without the dead daemon.
			if _, err := c.NextID(idtest.Context(t, 10*time.Second)); err != nil {
				t.Fatalf("NextID after the kill: %v", err)
			}
			t.Logf("stats: %+v", c.Stats())
		})
	}
}

// A daemon slower than ReadTimeout: the request goes to the other daemon,
// and the IDs the slow one issued for it never reach the caller.
func TestFailover_Timeout_LateReplyDiscarded(t *testing.T) {
	f := newFleet(t)
	slow, fast := f.start(t, server.Options{}), f.start(t, server.Options{})
	clock := newFakeClock()
	c := newClient(t, client.Options{
		Addrs:       []string{newDelayProxy(t, slow.addr, 300*time.Millisecond, ":"), fast.addr},
		ReadTimeout: 100 * time.Millisecond,
		Now:         clock.Now,
	})
	var ids []uint64
	for range 10 {
		clock.Advance(time.Hour) // the slow daemon is never down when picked
		id, err := c.NextID(idtest.Context(t, 10*time.Second))
		if err != nil {
			t.Fatalf("NextID: %v", err)
		}
		ids = append(ids, id)
	}
	idtest.Unique(t, testLayout, ids)
	for _, id := range ids {
		if m := testLayout.Decompose(id).MachineID; m != fast.machineIDs()[0] {
			t.Fatalf("ID %d from machine %d, the slow daemon's: a late reply was used", id, m)
		}
	}
	st := c.Stats().Daemons[0]
	if st.Requests != 5 || st.Failures != st.Requests {
		t.Fatalf("slow daemon: %d requests, %d failures: want every request to time out", st.Requests, st.Failures)
	}
	// The slow daemon did issue an ID for every timed-out request: those
	// are the IDs discarded with their connections.
	deadline := time.Now().Add(5 * time.Second)
	for slow.issued(t) < int(st.Requests) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := slow.issued(t); got != int(st.Requests) {
		t.Fatalf("slow daemon issued %d IDs for %d requests", got, st.Requests)
	}
}

// An error reply (here NEXTIDS above one daemon's max-batch) is failed
// over too: another daemon answers.
func TestFailover_ErrorReply(t *testing.T) {
	f := newFleet(t)
	small, big := f.start(t, server.Options{MaxBatch: 10}), f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{small.addr, big.addr}, DownFor: time.Millisecond})
	for range 6 {
		ids, err := c.NextIDs(idtest.Context(t, 10*time.Second), 50)
		if err != nil {
			t.Fatalf("NextIDs: %v", err)
		}
		if len(ids) != 50 || testLayout.Decompose(ids[0]).MachineID != big.machineIDs()[0] {
			t.Fatalf("NextIDs(50) = %d IDs from machine %d, want 50 from %d", len(ids), testLayout.Decompose(ids[0]).MachineID, big.machineIDs()[0])
		}
	}
	if st := c.Stats().Daemons[0]; st.Failures == 0 {
		t.Fatalf("the small daemon was never tried: %+v", st)
	}
}

func TestNextIDs(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, MaxBatch: 1000})
	ctx := idtest.Context(t, 30*time.Second)
	for _, n := range []int{1, 999, 1000, 1001, 25_000} {
		ids, err := c.NextIDs(ctx, n)
		if err != nil {
			t.Fatalf("NextIDs(%d): %v", n, err)
		}
		if len(ids) != n {
			t.Fatalf("NextIDs(%d) gave %d IDs", n, len(ids))
		}
		for i := 1; i < n; i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("NextIDs(%d): ID %d at %d after %d: not increasing", n, ids[i], i, ids[i-1])
			}
		}
	}
	// 25,000 IDs at 1,000 a command: one pipelined request.
	if got := c.Stats().Daemons[0].Requests; got != 5 {
		t.Fatalf("%d requests for 5 NextIDs calls", got)
	}
	for _, n := range []int{0, -1, client.MaxNextIDs + 1} {
		if _, err := c.NextIDs(ctx, n); !errors.Is(err, client.ErrInvalidCount) {
			t.Errorf("NextIDs(%d) = %v, want ErrInvalidCount", n, err)
		}
	}
}

func TestClose(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	for _, prefetch := range []int{0, 10} {
		c, err := client.New(client.Options{Addrs: []string{d.addr}, Prefetch: prefetch})
		if err != nil {
			t.Fatal(err)
		}
		ctx := idtest.Context(t, 10*time.Second)
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := c.NextID(ctx); !errors.Is(err, client.ErrClosed) {
			t.Errorf("prefetch %d: NextID after Close = %v, want ErrClosed", prefetch, err)
		}
		if _, err := c.NextIDs(ctx, 3); !errors.Is(err, client.ErrClosed) {
			t.Errorf("prefetch %d: NextIDs after Close = %v, want ErrClosed", prefetch, err)
		}
	}
}
