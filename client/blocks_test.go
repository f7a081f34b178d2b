package client_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// With Prefetch the client takes blocks: NextID costs no allocation and
// no round trip while a block lasts, and the next block is fetched in the
// background, so 10,000 IDs in blocks of 1,000 take 10 or 11 NEXTBLOCKs
// (and one INFO for the layout).
func TestBlocks_ServedInProcess_ZeroAllocs(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 1000, MaxAge: time.Minute})
	ctx := idtest.Context(t, 10*time.Second)
	base := d.issued(t)
	ids := make([]uint64, 0, 10_000)
	for range 10_000 {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	idtest.Increasing(t, testLayout, "NextID from blocks", ids)
	st := c.Stats()
	if r := st.Daemons[0].Requests; r < 11 || r > 13 {
		t.Fatalf("%d requests for 10,000 IDs in blocks of 1,000: want 10-11 NEXTBLOCK and 1 INFO", r)
	}
	// A refill may be on its way: issued, not yet received.
	if issued := d.issued(t) - base; st.Prefetched < 10_000 || st.Prefetched > 11_000 || issued < int(st.Prefetched) || issued > 11_000 {
		t.Fatalf("the daemon issued %d IDs, the client received %d, for 10,000 NextIDs: want 10,000..11,000 both", issued, st.Prefetched)
	}
	var last uint64
	allocs := testing.AllocsPerRun(20_000, func() {
		id, err := c.NextID(ctx)
		if err != nil || id <= last {
			panic(fmt.Sprintf("NextID = %d, %v after %d", id, err, last))
		}
		last = id
	})
	// A refill allocates (go-redis's reply, the block), once per 500
	// IDs at least; AllocsPerRun rounds the average down.
	if allocs != 0 {
		t.Fatalf("%v allocations per NextID, want 0", allocs)
	}
}

// Goroutines share the client's blocks: each one's IDs strictly
// increase, and no ID is handed out twice.
func TestBlocks_Goroutines_IncreasingEachUnique(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 500, MaxAge: time.Minute})
	ctx := idtest.Context(t, time.Minute)
	const goroutines, each = 16, 20_000
	per := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 0, each)
			for range each {
				id, err := c.NextID(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, id)
			}
			per[g] = ids
		}()
	}
	wg.Wait()
	for g, ids := range per {
		idtest.Increasing(t, testLayout, fmt.Sprintf("goroutine %d", g), ids)
	}
	idtest.Unique(t, testLayout, slices.Concat(per...))
}

// A block's IDs expire MaxAge after it was asked for (the expiry timer
// spends it; the test runs what the timer runs, on its own clock): the
// rest is dropped and counted, and the next NextID comes from a new block,
// above the old one.
func TestBlocks_MaxAge(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	clock := newFakeClock()
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 100, MaxAge: time.Second, Now: clock.Now})
	ctx := idtest.Context(t, 10*time.Second)
	first, err := c.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	client.ExpireBlocks(c)
	id, err := c.NextID(ctx)
	if err != nil || id != first+1<<testLayout.BitsMachineID {
		t.Fatalf("at MaxAge: NextID = %d, %v: want the block's next ID %d", id, err, first+1<<testLayout.BitsMachineID)
	}
	clock.Advance(time.Nanosecond)
	client.ExpireBlocks(c)
	if st := c.Stats(); st.Expired != 98 {
		t.Fatalf("past MaxAge: %d IDs expired, want the 98 left", st.Expired)
	}
	after, err := c.NextID(ctx)
	if err != nil || after <= id {
		t.Fatalf("past MaxAge: NextID = %d, %v: want an ID of a new block above %d", after, err, id)
	}
	if st := c.Stats(); st.Prefetched != 200 {
		t.Fatalf("%d IDs prefetched, want two blocks of 100", st.Prefetched)
	}
}

// A block that arrives already older than MaxAge is not used: the caller
// gets an error that says what to change.
func TestBlocks_BlockSlowerThanMaxAge(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{
		Addrs:    []string{newDelayProxy(t, d.addr, 200*time.Millisecond, "*")}, // arrays: NEXTBLOCK, not INFO
		Prefetch: 10,
		MaxAge:   50 * time.Millisecond,
	})
	_, err := c.NextID(idtest.Context(t, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "more than MaxAge 50ms, so its IDs were dropped: raise MaxAge") {
		t.Fatalf("NextID = %v, want the block-too-late error", err)
	}
	if st := c.Stats(); st.Prefetched != 10 || st.Expired != 10 {
		t.Fatalf("prefetched %d, expired %d: want 10 and 10", st.Prefetched, st.Expired)
	}
}

// A daemon without blocks: the client finds out from NEXTBLOCK's error
// and prefetches with NEXTIDS from then on, without failing a NextID.
func TestBlocks_DaemonWithoutBlocks_FallsBackToNEXTIDS(t *testing.T) {
	f := newFleet(t)
	n := f.start(t, server.Options{}).node
	d := serveGenerator(t, struct{ node.TryGenerator }{n}) // no NEXTBLOCK
	c := newClient(t, client.Options{Addrs: []string{d}, Prefetch: 100, MaxAge: time.Minute})
	ctx := idtest.Context(t, 10*time.Second)
	var ids []uint64
	for range 1000 {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	idtest.Increasing(t, testLayout, "NEXTIDS prefetch after NEXTBLOCK was refused", ids)
	// INFO, NEXTBLOCK (refused), 10-12 NEXTIDS 100.
	if st := c.Stats(); st.Daemons[0].Requests < 12 || st.Daemons[0].Requests > 14 || st.Daemons[0].Failures != 0 {
		t.Fatalf("stats %+v: want INFO, one NEXTBLOCK, 10-12 NEXTIDS, no failure", st)
	}
}

// A node leasing three machine IDs hands out blocks that walk them: the
// client serves their IDs in order, all three machine IDs in each step.
func TestBlocks_InterleavedMachineIDs(t *testing.T) {
	f := newFleet(t)
	f.init(t, testLayout)
	n, err := node.New(idtest.Context(t, 30*time.Second), node.Options{
		Redis: f.rdb, MachineIDs: 3, Registry: coord.Options{Layout: testLayout},
		StateFile: filepath.Join(t.TempDir(), "node.state"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.NextID(idtest.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	d := serveNode(t, n, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 250, MaxAge: time.Minute})
	ctx := idtest.Context(t, 10*time.Second)
	var ids []uint64
	seen := map[int]int{}
	for range 3000 {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		seen[testLayout.Decompose(id).MachineID]++
	}
	idtest.Increasing(t, testLayout, "blocks over 3 machine IDs", ids)
	if len(seen) != 3 {
		t.Fatalf("machine IDs of the IDs: %v, want the node's 3 %v", seen, n.MachineIDs())
	}
}

// serveGenerator serves gen on a loopback port until the test ends.
func serveGenerator(t *testing.T, gen node.Generator) string {
	t.Helper()
	srv, err := server.New(gen, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// A daemon in counter mode hands out blocks of its counter segments
// (under the counter machine ID); the client serves them like any other.
func TestBlocks_CounterMode(t *testing.T) {
	f := newFleet(t)
	d := f.startMode(t, node.ModeCounter, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 300, MaxAge: time.Minute})
	ctx := idtest.Context(t, 20*time.Second)
	var ids []uint64
	for range 3000 {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m := testLayout.Decompose(id).MachineID; m != testLayout.CounterMachineID() {
			t.Fatalf("ID %d has machine ID %d, want the counter's %d", id, m, testLayout.CounterMachineID())
		}
		ids = append(ids, id)
	}
	idtest.Increasing(t, testLayout, "counter-mode blocks", ids)
	if st := c.Stats(); st.Prefetched < 3000 {
		t.Fatalf("stats %+v: want the IDs from blocks", st)
	}
}
