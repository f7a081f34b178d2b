package simredis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// TestFailoverLosesTail models an asynchronous replica that is promoted
// before it received the master's last writes: the guard of the next
// script sees the new master_replid, and the owner whose claim was in the
// lost tail cannot re-assert its lease.
func TestFailoverLosesTail(t *testing.T) {
	c := newClock()
	master := newServer(c, 1)
	rdb := master.Client()
	ctx := context.Background()
	f := newFleet("fo", c.now)
	if err := redistest.InitRegistry(ctx, rdb, f.ns, f.layout); err != nil {
		t.Fatal(err)
	}
	a, err := f.claimLease(ctx, rdb, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1)
	if err != nil {
		t.Fatal(err)
	}
	replica := master.Snapshot() // the replica is up to date here...
	c.advance(10 * time.Millisecond)
	b, err := f.claimLease(ctx, rdb, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 2) // ...and never gets this
	if err != nil {
		t.Fatal(err)
	}

	run := master.RunID()
	master.Promote(replica) // the endpoint now serves the promoted replica
	if master.RunID() != run {
		t.Error("Promote changed the run_id")
	}
	c.advance(10 * time.Millisecond)
	v, err := f.renew(ctx, rdb, a, f.tick())
	if err != nil || v[0] != "LOST" || v[4] != "loss" {
		t.Errorf("renewal of a lease the replica had: %v %v; want LOST to a possible loss (nothing is extended across one)", v, err)
	}
	v, err = f.renew(ctx, rdb, b, f.tick())
	if err != nil || v[0] != "LOST" {
		t.Errorf("renewal of a lease lost with the tail: %v %v; want LOST", v, err)
	}
	_, events := master.streamEntries(f.key("events"))
	found := false
	for _, e := range events {
		found = found || e["type"] == "dataloss"
	}
	if !found {
		t.Errorf("events %v: want a dataloss event", events)
	}
}

// TestSnapshotShared loads one snapshot into servers on several
// goroutines, all writing: under -race this shows copies share nothing
// writable.
func TestSnapshotShared(t *testing.T) {
	c := newClock()
	s := newServer(c, 1)
	do(t, s, "HSET", "h", "f", "v")
	do(t, s, "SADD", "s", "m")
	do(t, s, "XADD", "x", "*", "f", "v")
	snap := s.Snapshot()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := New(func() time.Time { return time.UnixMilli(1_750_000_000_000) }, nil)
			for range 50 {
				r.Restart(snap)
				r.Do([]string{"HSET", "h", "f", string(rune('a' + i))})
				r.Do([]string{"SADD", "s", "n"})
				r.Do([]string{"XADD", "x", "*", "f", "w"})
				_ = r.Snapshot()
			}
		}()
	}
	do(t, s, "HSET", "h", "f", "master")
	wg.Wait()
	r := newServer(c, 2)
	r.Load(snap)
	want(t, r, "v", "HGET", "h", "f")
	if m, ids := r.members("s"), fmt.Sprint(r.streamEntries("x")); len(m) != 1 || strings.Count(ids, "-") != 1 {
		t.Errorf("after the others' writes: members %v, stream %s", m, ids)
	}
}
