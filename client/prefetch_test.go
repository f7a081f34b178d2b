package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/server"
)

// Prefetched IDs are served while no older than MaxAge, then dropped and
// replaced by fresh batches. The clock is the test's.
func TestPrefetch_MaxAge(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	clock := newFakeClock()
	c := newClient(t, client.WithNEXTIDSPrefetch(client.Options{Addrs: []string{d.addr}, Prefetch: 100, MaxAge: time.Second, Now: clock.Now}))
	ctx := idtest.Context(t, 10*time.Second)
	base := d.issued(t)

	var last uint64
	// next takes an ID, then waits until the background refill it may
	// have started has landed, and checks what was fetched and dropped.
	next := func(step string, wantFetched, wantExpired int) {
		t.Helper()
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatalf("%s: NextID: %v", step, err)
		}
		if id <= last {
			t.Fatalf("%s: ID %d after %d", step, id, last)
		}
		last = id
		deadline := time.Now().Add(5 * time.Second)
		for c.Stats().Prefetched < uint64(wantFetched) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		st := c.Stats()
		if st.Prefetched != uint64(wantFetched) || st.Expired != uint64(wantExpired) {
			t.Fatalf("%s: %d IDs prefetched, %d expired: want %d and %d", step, st.Prefetched, st.Expired, wantFetched, wantExpired)
		}
		if got := d.issued(t) - base; got != wantFetched {
			t.Fatalf("%s: the daemon issued %d IDs, want %d", step, got, wantFetched)
		}
	}
	// Two batches: the first for the caller, the second at once in the
	// background (one batch or less left).
	next("first ID", 200, 0)
	clock.Advance(999 * time.Millisecond)
	next("at 999ms: from the buffer", 200, 0)
	clock.Advance(time.Millisecond)
	next("at MaxAge: still from the buffer", 200, 0)
	clock.Advance(time.Nanosecond)
	// 197 left (97 + 100) are older than MaxAge: dropped; two new batches.
	next("past MaxAge", 400, 197)
	next("from the new batch", 400, 197)
}

// The buffer is refilled in the background when one batch is left, so a
// steady stream of NextID costs one NEXTIDS per batch.
func TestPrefetch_RefillsInBackground(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.WithNEXTIDSPrefetch(client.Options{Addrs: []string{d.addr}, Prefetch: 100, MaxAge: time.Minute}))
	ctx := idtest.Context(t, 10*time.Second)
	base := d.issued(t)
	ids := make([]uint64, 0, 1000)
	for range 1000 {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	idtest.Unique(t, testLayout, ids)
	// 1,000 handed out, at most two batches waiting (a refill may still
	// be on its way: issued, not yet received).
	st := c.Stats()
	issued := d.issued(t) - base
	if st.Prefetched < 1000 || st.Prefetched > 1200 || issued < int(st.Prefetched) || issued > 1200 {
		t.Fatalf("the daemon issued %d IDs and the client prefetched %d for 1000 NextID calls, want 1000..1200 both", issued, st.Prefetched)
	}
	if r := st.Daemons[0].Requests; r < 10 || r > 12 {
		t.Fatalf("%d NEXTIDS requests for 1000 IDs in batches of 100", r)
	}
}

// A batch that arrives already older than MaxAge is not used: the caller
// gets an error that says what to change.
func TestPrefetch_BatchSlowerThanMaxAge(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{})
	c := newClient(t, client.WithNEXTIDSPrefetch(client.Options{
		Addrs:    []string{newDelayProxy(t, d.addr, 200*time.Millisecond, "*")},
		Prefetch: 10,
		MaxAge:   50 * time.Millisecond,
	}))
	_, err := c.NextID(idtest.Context(t, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "more than MaxAge 50ms, so its IDs were dropped: raise MaxAge") {
		t.Fatalf("NextID = %v, want the batch-too-late error", err)
	}
	if st := c.Stats(); st.Prefetched != 10 || st.Expired != 10 {
		t.Fatalf("prefetched %d, expired %d: want 10 and 10", st.Prefetched, st.Expired)
	}
}

// A NextID waiting for a batch (or a block) gives up at its context's end.
func TestPrefetch_WaitEndsWithContext(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{blackHole(t)}, Prefetch: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.NextID(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a prefetch") {
		t.Fatalf("NextID = %v, want the context's end while waiting for a batch", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("NextID returned %v after its 50ms deadline", took)
	}
	// Close ends the refill still waiting on the hung daemon at once.
	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v with a refill waiting", took)
	}
}
