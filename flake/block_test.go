package flake_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// expand lists a block's IDs.
func expand(b flake.Block) []uint64 {
	ids := make([]uint64, b.Count)
	for i := range ids {
		ids[i] = b.ID(int64(i))
	}
	return ids
}

// A block holds exactly the IDs NextID would have issued in its place:
// the same generator settings, one issuing by blocks and one by NextID,
// give the same IDs, under one machine ID and interleaved ones, at the
// narrowest and widest widths and in a region. A block whose shape
// (stride, machine walk) were wrong would list IDs another call issues.
func TestNextBlock_SameIDsAsNextID(t *testing.T) {
	for _, s := range []flake.Settings{
		{MachineID: 5, BitsSequence: 4},
		{MachineIDs: []int{1, 2, 9}, BitsSequence: 3},
		{BitsID: 53, BitsSequence: 5, BitsMachineID: 7, MachineID: 126},
		{BitsID: 63, BitsSequence: 20, BitsMachineID: 8, MachineIDs: []int{3, 200}},
		{BitsRegion: 2, Region: 3, BitsMachineID: 6, MachineIDs: []int{49, 50, 60}, BitsSequence: 2},
	} {
		t.Run(fmt.Sprintf("%d-bits-%v-%d", s.BitsID, s.MachineIDs, s.MachineID), func(t *testing.T) {
			s.MaxLead = time.Hour
			byBlock, _ := newGen(t, s)
			byOne, _ := newGen(t, s)
			l := byBlock.Layout()
			var blocks, ones []uint64
			for _, n := range []int64{1, 2, 3, 7, 16, 100, 1000, 1, 5} {
				b, err := byBlock.NextBlock(context.Background(), n)
				if err != nil {
					t.Fatal(err)
				}
				if b.Count != n { // an hour of lead: nothing cuts it
					t.Fatalf("block of %d IDs, asked for %d", b.Count, n)
				}
				if err := b.Check(l); err != nil {
					t.Fatalf("block %+v: %v", b, err)
				}
				if b.Last() != b.ID(b.Count-1) || b.First != b.ID(0) {
					t.Fatalf("block %+v: First/Last disagree with ID", b)
				}
				blocks = append(blocks, expand(b)...)
				for range n {
					ones = append(ones, next(t, byOne))
				}
			}
			idtest.Increasing(t, l, "blocks", blocks)
			for i := range ones {
				if blocks[i] != ones[i] {
					t.Fatalf("ID %d: block gave %+v, NextID %+v", i, l.Decompose(blocks[i]), l.Decompose(ones[i]))
				}
			}
		})
	}
}

// Fault: a block reaching past the reservation. The generator's grant
// ends 3 ticks ahead; a block of far more is cut at the grant's last
// position, never past it, and NextID after it goes on right above it
// once more is granted.
func TestNextBlock_CutAtReservation_NeverPast(t *testing.T) {
	l := flake.DefaultLayout()
	now := l.Tick(t0)
	r := &reserver{limit: now + 3}
	g, _ := newGen(t, flake.Settings{MachineID: 2, Reserve: r.reserve, MaxLead: time.Hour})
	var all []uint64
	for {
		b, err := g.NextBlock(context.Background(), 1000)
		if err != nil {
			if !errors.Is(err, flake.ErrReserve) {
				t.Fatalf("NextBlock = %v, want ErrReserve past the grant", err)
			}
			break
		}
		if tick := l.Decompose(b.Last()).Tick; tick > now+3 {
			t.Fatalf("block %+v reaches tick %d past the grant %d", b, tick, now+3)
		}
		all = append(all, expand(b)...)
		if len(all) > 256*10 {
			t.Fatal("issued far past a grant of 4 ticks")
		}
	}
	if len(all) != 4*256 {
		t.Fatalf("%d IDs in blocks, want the 4 granted ticks x 256", len(all))
	}
	if b, ok := g.TryNextBlock(10); ok {
		t.Fatalf("block %+v past the grant", b)
	}
	r.mu.Lock()
	r.limit = -1
	r.mu.Unlock()
	id := next(t, g)
	idtest.Increasing(t, l, "blocks, then NextID", append(all, id))
	if want := all[len(all)-1] + 1<<l.BitsMachineID; id != want {
		t.Fatalf("NextID after the cut block: %+v, want the next position %+v (what was cut off is taken back)", l.Decompose(id), l.Decompose(want))
	}
}

// A block is cut at MaxLead (fewer IDs, never more) and never issued at
// all while the generator is at its lead.
func TestTryNextBlock_CutAtMaxLead(t *testing.T) {
	g, clk := newGen(t, flake.Settings{MachineID: 3, BitsSequence: 4, MaxLead: 20 * time.Millisecond})
	l := g.Layout()
	now := l.Tick(t0)
	b, ok := g.TryNextBlock(1000)
	if !ok || b.Count != 16*3 {
		t.Fatalf("block %+v, %v: want the current tick and 2 of lead, 48 IDs", b, ok)
	}
	if tick := l.Decompose(b.Last()).Tick; tick != now+2 {
		t.Fatalf("block ends at tick %d, want %d", tick, now+2)
	}
	if b2, ok := g.TryNextBlock(1); ok {
		t.Fatalf("block %+v issued past max-lead", b2)
	}
	clk.Advance(10 * time.Millisecond)
	g.Stats() // the generator sees the new tick
	// As many as may be issued: one tick.
	b2, ok := g.TryNextBlock(math.MaxInt64)
	if !ok || b2.Count != 16 || b2.First != b.Last()+1<<l.BitsMachineID {
		t.Fatalf("after a tick: block %+v, %v: want the 16 IDs of one tick right after %d", b2, ok, b.Last())
	}
}

// Fault: a block not counted as issued at a mode switch or a takeover.
// LastTick (what Close returns, what a node records as the next owner's
// floor) covers every block; a generator started above it (the node's
// next source, the machine ID's next owner) issues above every block.
func TestNextBlock_CountedByLastTick(t *testing.T) {
	for _, mids := range [][]int{{7}, {1, 4}} {
		g, clk := newGen(t, flake.Settings{MachineIDs: mids, BitsSequence: 6, MaxLead: time.Second})
		l := g.Layout()
		var all []uint64
		for range 10 { // 5,000 IDs: 78 ticks ahead of the clock, within the lead
			b, err := g.NextBlock(context.Background(), 500)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, expand(b)...)
		}
		last := g.Close()
		if _, ok := g.TryNextBlock(1); ok {
			t.Fatal("block issued after Close")
		}
		for _, id := range all {
			if tick := l.Decompose(id).Tick; tick > last {
				t.Fatalf("block ID at tick %d above Close's last tick %d", tick, last)
			}
		}
		s := flake.Settings{MachineIDs: mids, BitsSequence: 6, Floor: last, Clock: clk}
		g2, _ := newGen(t, s)
		idtest.Increasing(t, l, "blocks, then the next generator", append(all, next(t, g2)))
	}
}

// Blocks, batches and single IDs from many goroutines on one generator
// whose clock moves and whose lead is short (blocks cut, refused, waited
// for): every ID is issued once, and each goroutine's IDs increase.
func TestNextBlock_Concurrent_NoOverlap(t *testing.T) {
	for _, mids := range [][]int{{7}, {1, 2, 8}} {
		t.Run(fmt.Sprint(mids), func(t *testing.T) {
			r := &reserver{limit: -1}
			g, clk := newGen(t, flake.Settings{MachineIDs: mids, BitsSequence: 8, MaxLead: 50 * time.Millisecond,
				Reserve: r.reserve, ReserveAhead: 30 * time.Millisecond})
			stop := make(chan struct{})
			driven := drive(clk, 10*time.Millisecond, stop)
			const workers, per = 6, 30_000
			results := make([][]uint64, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids := make([]uint64, 0, per+4096)
					buf := make([]uint64, 3)
					for len(ids) < per {
						switch w % 3 {
						case 0:
							b, err := g.NextBlock(context.Background(), int64(1+w*300))
							if err != nil {
								t.Error(err)
								return
							}
							ids = append(ids, expand(b)...)
						case 1:
							if b, ok := g.TryNextBlock(700); ok {
								ids = append(ids, expand(b)...)
							} else {
								ids = append(ids, next(t, g))
							}
						case 2:
							n, err := g.NextIDs(context.Background(), buf)
							if err != nil {
								t.Error(err)
								return
							}
							ids = append(ids, buf[:n]...)
						}
					}
					results[w] = ids
				}()
			}
			wg.Wait()
			close(stop)
			<-driven
			l := g.Layout()
			granted, _ := r.get()
			var all []uint64
			for _, ids := range results {
				idtest.Increasing(t, l, "", ids)
				all = append(all, ids...)
			}
			idtest.Unique(t, l, all)
			for _, id := range all {
				if tick := l.Decompose(id).Tick; tick > granted {
					t.Fatalf("ID at tick %d past the grant %d", tick, granted)
				}
			}
		})
	}
}

// Check refuses blocks a client must not use.
func TestBlock_Check(t *testing.T) {
	l, err := flake.NewLayout(8, 16, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	ok := flake.Block{First: 5 << 16, Count: 10, Stride: 1 << 16}
	if err := ok.Check(l); err != nil {
		t.Fatal(err)
	}
	for _, b := range []flake.Block{
		{First: 5 << 16, Count: 0, Stride: 1 << 16},
		{First: 5 << 16, Count: 10, Stride: 1 << 8},
		{First: l.MaxID() - 3<<16, Count: 5, Stride: 1 << 16},
		{First: 1 << 63, Count: 1, Stride: 1 << 16},
		{First: 5<<16 | 3, Count: 10, Stride: 1 << 16, MachineIDs: []uint64{1, 2}},
		{First: 5<<16 | 2, Count: 10, Stride: 1 << 16, MachineIDs: []uint64{2, 1}},
		{First: 5<<16 | 2, Count: 10, Stride: 1 << 16, MachineIDs: []uint64{2, 1 << 16}},
	} {
		if err := b.Check(l); err == nil {
			t.Errorf("block %+v passed Check", b)
		}
	}
	// The last ID of a walk over machine IDs, past a step boundary.
	b := flake.Block{First: 5<<16 | 9, Count: 4, Stride: 1 << 16, MachineIDs: []uint64{2, 9}}
	if got, want := expand(b), []uint64{5<<16 | 9, 6<<16 | 2, 6<<16 | 9, 7<<16 | 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("IDs %v, want %v", got, want)
	}
}
