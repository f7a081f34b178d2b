package client

import (
	"errors"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

// After a failover the next block may come from a daemon behind the last
// one. Fault: handing out its IDs at or below the last block's, which
// breaks the order NextID promises (and, were the two daemons' IDs to
// meet, would look like a repeat). The part at or below is skipped; a
// block wholly below is refused with how long to wait.
func TestBlocker_Accept_SkipsBelowTheLastBlock(t *testing.T) {
	c, err := New(Options{Addrs: []string{"127.0.0.1:1"}, Prefetch: 100, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := flake.NewLayout(8, 8, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	p, d := c.bf, c.daemons[0]
	now := time.Now()
	tick := l.Tick(now)
	id := func(seq, machine int) uint64 { v, _ := l.Compose(tick, seq, machine); return v }
	stride := uint64(1) << l.BitsMachineID

	first, err := p.accept(flake.Block{First: id(10, 5), Count: 20, Stride: stride}, d, now, l)
	if err != nil || first.next.Load() != 0 || p.last != id(29, 5) {
		t.Fatalf("first block: %v, next %d, last %d", err, first.next.Load(), p.last)
	}
	// Another daemon (machine ID 3) at sequences 25..44: 25..29 are below
	// machine 5's 29 and are skipped; 30 is the first above.
	nb, err := p.accept(flake.Block{First: id(25, 3), Count: 20, Stride: stride}, d, now, l)
	if err != nil {
		t.Fatal(err)
	}
	if skip := nb.next.Load(); skip != 5 || nb.id(skip) != id(30, 3) {
		t.Fatalf("straddling block: starts at index %d (%d), want 5 (%d)", skip, nb.id(skip), id(30, 3))
	}
	if p.expired.Load() != 5 || p.last != id(44, 3) {
		t.Fatalf("expired %d, last %d: want 5 and %d", p.expired.Load(), p.last, id(44, 3))
	}
	// Interleaved machine IDs 2 and 7, from sequence 44 on machine 7:
	// (44, 7) is above (44, 3), the whole block is kept.
	mb, err := p.accept(flake.Block{First: id(44, 7), Count: 5, Stride: stride, MachineIDs: []uint64{2, 7}}, d, now, l)
	if err != nil || mb.next.Load() != 0 || mb.id(1) != id(45, 2) || p.last != id(46, 7) {
		t.Fatalf("interleaved block: %v, next %d, id(1) %d, last %d", err, mb.next.Load(), mb.id(1), p.last)
	}
	// Wholly below: refused, counted, with a wait of at most a second.
	for round := 1; round <= 2; round++ {
		_, err = p.accept(flake.Block{First: id(0, 1), Count: 40, Stride: stride}, d, now, l)
		var behind *unusableError
		if !errors.As(err, &behind) || behind.rounds != round || behind.wait <= 0 || behind.wait > time.Second {
			t.Fatalf("block wholly below, round %d: %v", round, err)
		}
	}
	if _, err := p.accept(flake.Block{First: id(50, 1), Count: 1, Stride: stride}, d, now, l); err != nil || p.unusable != 0 {
		t.Fatalf("block above again: %v, behind %d", err, p.unusable)
	}
}

// The next block's size from the last one's: doubled when demand outran
// the refill or the block went in under MaxAge/8 (only if it came whole),
// capped at MaxBlock; halved past MaxAge/2 unless outrun, down to
// Prefetch; kept in between.
func TestBlockSize(t *testing.T) {
	const maxAge = 800 * time.Millisecond // MaxAge/8 = 100ms, MaxAge/2 = 400ms
	for _, tc := range []struct {
		name         string
		size         int64
		full, outran bool
		lasted       time.Duration
		want         int64
	}{
		{"fast", 1000, true, false, 99 * time.Millisecond, 2000},
		{"fast, cut by the daemon", 1000, false, false, time.Millisecond, 1000},
		{"outran", 1000, true, true, 300 * time.Millisecond, 2000},
		{"outran, waited long", 1000, true, true, time.Second, 2000},
		{"outran, cut by the daemon", 1000, false, true, time.Second, 1000},
		{"fast at the cap", MaxBlock, true, true, 0, MaxBlock},
		{"fast near the cap", MaxBlock/2 + 1, true, false, 0, MaxBlock},
		{"in the band, low", 1000, true, false, 100 * time.Millisecond, 1000},
		{"in the band, high", 1000, true, false, 400 * time.Millisecond, 1000},
		{"slow", 1000, true, false, 401 * time.Millisecond, 500},
		{"slow, cut", 1000, false, false, time.Hour, 500},
		{"slow at Prefetch", 100, true, false, time.Hour, 100},
		{"slow near Prefetch", 150, true, false, time.Hour, 100},
	} {
		if got := blockSize(tc.size, 100, tc.full, tc.outran, tc.lasted, maxAge); got != tc.want {
			t.Errorf("%s: blockSize(%d, full %v, outran %v, lasted %v) = %d, want %d", tc.name, tc.size, tc.full, tc.outran, tc.lasted, got, tc.want)
		}
	}
}
