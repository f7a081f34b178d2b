package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// With Prefetch the client takes blocks: NextID costs no allocation and
// no round trip while a block lasts, and the next block is fetched in the
// background when half of the current one is used. On a clock that does
// not move every block lasts less than MaxAge/8, so each refill asks for
// twice the last: 10,000 IDs take blocks of 1,000, 2,000, 4,000 and 8,000
// (the next is asked for at 11,000), four NEXTBLOCKs and one INFO for the
// layout.
func TestBlocks_ServedInProcess_ZeroAllocs(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 1000, MaxAge: time.Minute, Now: newFakeClock().Now})
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
	if r := st.Daemons[0].Requests; r != 5 || st.BlockSize != 8000 {
		t.Fatalf("%d requests, block size %d, for 10,000 IDs from blocks of 1,000 doubling: want 4 NEXTBLOCK and 1 INFO, 8,000", r, st.BlockSize)
	}
	if issued := d.issued(t) - base; st.Prefetched != 15_000 || issued != 15_000 {
		t.Fatalf("the daemon issued %d IDs, the client received %d: want 15,000 both", issued, st.Prefetched)
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

// A block that arrives already older than MaxAge is not used. The client
// asks again (the round trip or the process may have been slow once); a
// caller gets an error that says what to change once MaxUnusable+1
// blocks in a row came too late.
func TestBlocks_BlockSlowerThanMaxAge(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{
		Addrs:    []string{newDelayProxy(t, d.addr, 200*time.Millisecond, "*")}, // arrays: NEXTBLOCK, not INFO
		Prefetch: 10,
		MaxAge:   50 * time.Millisecond,
	})
	_, err := c.NextID(idtest.Context(t, 10*time.Second))
	tries := client.MaxUnusable + 1
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than MaxAge 50ms, so its IDs were dropped (%d blocks in a row): raise MaxAge", tries)) {
		t.Fatalf("NextID = %v, want the block-too-late error", err)
	}
	if st := c.Stats(); st.Prefetched != uint64(10*tries) || st.Expired != uint64(10*tries) {
		t.Fatalf("prefetched %d, expired %d: want %d blocks of 10 both", st.Prefetched, st.Expired, tries)
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

// The block size follows demand. On a clock that does not move, every
// block lasts less than MaxAge/8 and the next is asked for twice as large;
// when demand stops, each block expires unused and each refill after that
// asks for half, down to Prefetch. Fault: a size that only grows (or only
// resets) under changing demand.
func TestBlocks_SizeFollowsDemand(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	clock := newFakeClock()
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 100, MaxAge: time.Minute, Now: clock.Now})
	ctx := idtest.Context(t, 10*time.Second)
	var ids []uint64
	next := func() {
		t.Helper()
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Blocks of 100, 200, 400, 800 hold the first 1,500 IDs; the next,
	// of 1,600, was asked for at 1,100 and serves the 1,501st.
	for range 1501 {
		next()
	}
	if st := c.Stats(); st.BlockSize != 1600 || st.Prefetched != 3100 || st.Daemons[0].Requests != 6 {
		t.Fatalf("after 1,501 IDs: block size %d, %d IDs prefetched, %d requests: want 1,600, 3,100 and 6 (INFO, 5 NEXTBLOCK)",
			st.BlockSize, st.Prefetched, st.Daemons[0].Requests)
	}
	for _, want := range []int64{800, 400, 200, 100, 100} {
		clock.Advance(2 * time.Minute)
		client.ExpireBlocks(c)
		next()
		if st := c.Stats(); st.BlockSize != want {
			t.Fatalf("after a block expired unused: block size %d, want %d", st.BlockSize, want)
		}
	}
	idtest.Increasing(t, testLayout, "NextID as the block size changes", ids)
}

// NextID from blocks waits for its block as long as its context allows,
// not Options.Wait: here the first block takes two requests, INFO for the
// layout (on a new connection: go-redis's handshake and INFO, two delayed
// replies) and NEXTBLOCK, each within Wait, longer than Wait together.
// Fault: a caller with time left failing while the daemon gives IDs.
func TestBlocks_WaitsPastOptionsWaitWhileRefillsSucceed(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	const wait, delay = 700 * time.Millisecond, 250 * time.Millisecond
	c := newClient(t, client.Options{
		Addrs:    []string{newDelayProxy(t, d.addr, delay, "*$")}, // arrays and bulk strings
		Prefetch: 10,
		Wait:     wait,
	})
	start := time.Now()
	if _, err := c.NextID(context.Background()); err != nil {
		t.Fatalf("NextID: %v", err)
	}
	if took := time.Since(start); took <= wait {
		t.Fatalf("the first NextID took %v: want three delayed replies, longer than Wait %v", took, wait)
	}
}

// When the daemon cannot give IDs, NextID from blocks fails once the
// blocks it holds are used up, with a context that never ends, and the
// error says why (what the daemon tried answered). Fault: a caller that
// waits forever on a refill that cannot come, or an error without cause.
func TestBlocks_DaemonGone_ErrorSaysWhy(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 100, MaxAge: time.Minute})
	var ids []uint64
	for range 150 {
		id, err := c.NextID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	d.kill()
	var err error
	for limit := 2*c.Stats().BlockSize + 1; limit > 0 && err == nil; limit-- {
		var id uint64
		if id, err = c.NextID(context.Background()); err == nil {
			ids = append(ids, id)
		}
	}
	idtest.Increasing(t, testLayout, "NextID up to the daemon's kill", ids)
	var ce *client.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), d.addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("NextID after the daemon is gone and its blocks are used up = %v, want a *client.Error naming %s and why", err, d.addr)
	}
}

// A refill storm: 256 goroutines on one client and one daemon, from
// blocks of one ID, so that at first each refill serves fewer callers
// than wait for it, blocks are installed while callers race for the one
// before, and the size changes under them. Fault: an index handed out
// twice across a block switch (a duplicate), a caller's IDs out of order,
// or a call failed while the daemon gives IDs. Not timed.
func TestBlocks_RefillStorm_256Goroutines(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Prefetch: 1})
	ctx := idtest.Context(t, 5*time.Minute)
	const goroutines, each = 256, 2000
	per := make([][]uint64, goroutines)
	var failed atomic.Int64
	var firstErr atomic.Value
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 0, each)
			<-start
			for len(ids) < each {
				id, err := c.NextID(ctx)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					if ctx.Err() != nil {
						break
					}
					continue
				}
				ids = append(ids, id)
			}
			per[g] = ids
		}()
	}
	close(start)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d NextID calls failed, the first: %v", n, firstErr.Load())
	}
	for g, ids := range per {
		idtest.Increasing(t, testLayout, fmt.Sprintf("goroutine %d", g), ids)
	}
	all := slices.Concat(per...)
	if len(all) != goroutines*each {
		t.Fatalf("%d IDs, want %d", len(all), goroutines*each)
	}
	idtest.Unique(t, testLayout, all)
	// A block at most doubles the one before: 512,000 IDs from blocks of
	// 1, 2, 4, ... take 19 NEXTBLOCKs or more (and one INFO).
	st := c.Stats()
	if r := st.Daemons[0].Requests; r < 20 {
		t.Errorf("%d requests for %d IDs from blocks of 1 up: want 20 or more", r, len(all))
	}
	t.Logf("stats: %+v", st)
}

// The largest block the client asks for is the largest a daemon gives:
// NEXTBLOCK MaxBlock is answered with a block, one more is refused.
func TestBlocks_MaxBlockIsTheDaemons(t *testing.T) {
	if client.MaxBlock != server.MaxBlock {
		t.Fatalf("client.MaxBlock %d, server.MaxBlock %d: want the same", client.MaxBlock, server.MaxBlock)
	}
	f := newFleet(t)
	d := f.start(t, server.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: d.addr, Protocol: 2})
	defer rdb.Close()
	ctx := idtest.Context(t, 10*time.Second)
	if v, err := rdb.Do(ctx, "nextblock", client.MaxBlock).Int64Slice(); err != nil || len(v) < 3 || v[1] < 1 || v[1] > client.MaxBlock {
		t.Fatalf("NEXTBLOCK %d = %v, %v: want a block", client.MaxBlock, v, err)
	}
	if err := rdb.Do(ctx, "nextblock", client.MaxBlock+1).Err(); err == nil || !strings.Contains(err.Error(), "count must be an integer in 1..") {
		t.Fatalf("NEXTBLOCK %d = %v: want the range error", client.MaxBlock+1, err)
	}
}
