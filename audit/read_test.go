package audit

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
)

// handRegistry writes n released machine IDs and events events (claims of
// them in turn) into namespace ns, as the scripts would leave them.
func handRegistry(t *testing.T, rdb *redis.Client, ns string, n, events int) {
	t.Helper()
	ctx := idtest.Context(t, time.Minute)
	k := contract.NewKeys(ns)
	now := time.Now()
	p := rdb.Pipeline()
	p.Set(ctx, k.Layout, flake.DefaultLayout().String(), 0)
	p.HSet(ctx, k.Meta, contract.MetaGeneration, "g", contract.MetaCreatedMs, now.UnixMilli(), contract.MetaCreatedTick, flake.DefaultLayout().Tick(now), contract.MetaHorizon, 100)
	for i := range n {
		id := strconv.Itoa(i)
		p.SAdd(ctx, k.Machines, id)
		p.HSet(ctx, k.Reserved, id, flake.DefaultLayout().Tick(now))
		p.HSet(ctx, k.Owner(id), contract.OwnerHost, "h", contract.OwnerPID, id, contract.OwnerToken, "t"+id, contract.OwnerState, contract.StateReleased)
	}
	for i := range events {
		p.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, Values: []any{contract.FieldType, contract.EventClaim, contract.FieldMachineID, strconv.Itoa(i % n),
			contract.FieldToken, "t", contract.FieldFloor, "1"}})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRead_RegisteredDuringListing_KeysReadWithItsClaim: a machine ID
// claimed after the listing began, before the first transaction, has its
// claim event in the snapshot, so its keys must be read too (the read
// notices it from the events written since the listing began).
func TestRead_RegisteredDuringListing_KeysReadWithItsClaim(t *testing.T) {
	redistest.Require(t)
	rdb := redistest.Start(t, redistest.Options{}).Client(t)
	ctx := idtest.Context(t, time.Minute)
	handRegistry(t, rdb, "late", 3000, 10)
	k := contract.NewKeys("late")
	afterList = func() {
		p := rdb.TxPipeline() // what claim.lua writes, in one step
		p.SAdd(ctx, k.Machines, "4000")
		p.Set(ctx, k.Lease("4000"), "tnew", time.Minute)
		p.HSet(ctx, k.Owner("4000"), contract.OwnerHost, "late", contract.OwnerToken, "tnew", contract.OwnerState, contract.StateLive)
		p.HSet(ctx, k.Reserved, "4000", 5)
		p.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, Values: []any{contract.FieldType, contract.EventClaim, contract.FieldMachineID, "4000",
			contract.FieldToken, "tnew", contract.FieldFloor, "1"}})
		if _, err := p.Exec(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterList = func() {} })
	s, err := Read(ctx, rdb, "late")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.eventsOf(4000)) != 1 {
		t.Fatalf("events of 4000: %v", s.eventsOf(4000))
	}
	r := s.Records[4000]
	if r == nil || !r.Registered || r.Lease != "tnew" || r.Owner[contract.OwnerHost] != "late" || !r.HasReserved {
		t.Fatalf("record of machine ID 4000, claimed during the listing: %+v", r)
	}
	if len(s.Records) != 3001 {
		t.Fatalf("%d records, want 3001", len(s.Records))
	}
	if rep := Build(s); !rep.Consistent() {
		t.Fatalf("findings: %v", rep.Findings)
	}
}

// steppingClock advances by step at every reading.
type steppingClock struct {
	t    time.Time
	step time.Duration
}

func (c *steppingClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

// TestRead_Progress_AfterThreshold: a read that runs past ProgressAfter
// (an injected clock moving 400 ms per reading) says how far it got, at
// most one line per ProgressAfter; a fast one says nothing.
func TestRead_Progress_AfterThreshold(t *testing.T) {
	redistest.Require(t)
	rdb := redistest.Start(t, redistest.Options{}).Client(t)
	ctx := idtest.Context(t, time.Minute)
	handRegistry(t, rdb, "big", 6500, 3500)

	var out bytes.Buffer
	clk := &steppingClock{t: time.Unix(0, 0), step: 400 * time.Millisecond}
	s, err := ReadWith(ctx, rdb, "big", ReadOptions{Progress: &out, ProgressAfter: time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 6500 || len(s.Events) != 3500 {
		t.Fatalf("%d records, %d events", len(s.Records), len(s.Events))
	}
	got := out.String()
	for _, want := range []string{`(?m)^listed [0-9,]+ machine IDs\.\.\.$`,
		`(?m)^read [0-9,]+/6,500 machine IDs, [0-9,]+/3,500 events\.\.\.$`} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("progress lacks a line like %s:\n%s", want, got)
		}
	}
	// 400 ms a reading, a line at most every second: every third reading.
	lines := strings.Count(got, "\n")
	if readings := int(clk.t.Sub(time.Unix(0, 0)) / clk.step); lines == 0 || lines > readings/2 {
		t.Errorf("%d lines over %d clock readings:\n%s", lines, readings, got)
	}

	out.Reset()
	if _, err := ReadWith(ctx, rdb, "big", ReadOptions{Progress: &out, ProgressAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 0 {
		t.Errorf("a read within ProgressAfter wrote %q", out.String())
	}
}
