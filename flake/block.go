package flake

import (
	"context"
	"fmt"
	"slices"
)

// Block is a run of consecutive IDs handed out at once, described by a few
// integers instead of listed: the IDs a generator would have issued to
// Count calls of NextID in a row. A daemon sends a Block to a remote
// client, which hands its IDs out in process (NEXTBLOCK).
//
// Under one machine ID the IDs of consecutive (tick, sequence) pairs are
// First + i*Stride, Stride = 2^BitsMachineID, also across ticks: the pair
// sits above the machine ID. With several machine IDs interleaved
// (Settings.MachineIDs) each (tick, sequence) step issues one ID per
// machine ID, ascending; MachineIDs lists them and ID(i) walks the steps.
type Block struct {
	First  uint64 // the first, and smallest, ID
	Count  int64  // IDs in the block, >= 1
	Stride uint64 // 2^BitsMachineID: one (tick, sequence) step
	// MachineIDs is nil under one machine ID; otherwise the interleaved
	// machine IDs, ascending, one of them First's.
	MachineIDs []uint64
}

// ID returns the block's i-th ID, 0 <= i < Count; IDs increase with i.
func (b Block) ID(i int64) uint64 {
	k := uint64(len(b.MachineIDs))
	if k == 0 {
		return b.First + uint64(i)*b.Stride
	}
	m := b.First & (b.Stride - 1)
	j := uint64(slices.Index(b.MachineIDs, m)) + uint64(i)
	return b.First - m + j/k*b.Stride + b.MachineIDs[j%k]
}

// Last returns the block's last, and largest, ID.
func (b Block) Last() uint64 { return b.ID(b.Count - 1) }

// Check verifies that b is a block of layout l: a valid shape, every ID
// within the width. A client checks each block it receives with it.
func (b Block) Check(l Layout) error {
	if b.Count < 1 {
		return fmt.Errorf("block of %d IDs", b.Count)
	}
	if b.Stride != 1<<l.BitsMachineID {
		return fmt.Errorf("block stride %d, the layout's is %d (2^%d)", b.Stride, uint64(1)<<l.BitsMachineID, l.BitsMachineID)
	}
	if len(b.MachineIDs) > 0 {
		for i, m := range b.MachineIDs {
			if m >= b.Stride || i > 0 && m <= b.MachineIDs[i-1] {
				return fmt.Errorf("block machine IDs %v: not ascending below %d", b.MachineIDs, b.Stride)
			}
		}
		if !slices.Contains(b.MachineIDs, b.First&(b.Stride-1)) {
			return fmt.Errorf("block's first ID %d has machine ID %d, not one of %v", b.First, b.First&(b.Stride-1), b.MachineIDs)
		}
	}
	// The last ID within the width, computed without overflow.
	steps := uint64(b.Count-1) / uint64(max(len(b.MachineIDs), 1))
	if b.First > l.MaxID() || steps > (l.MaxID()-b.First)/b.Stride {
		return fmt.Errorf("block of %d IDs from %d reaches past the %d-bit width", b.Count, b.First, l.BitsID())
	}
	if b.Last() > l.MaxID() {
		return fmt.Errorf("block's last ID %d is past the %d-bit width", b.Last(), l.BitsID())
	}
	return nil
}

// TryNextBlock hands out up to n consecutive IDs as one Block if at least
// one can be issued at once: it never waits. It takes them with one
// atomic add of n positions, as NextIDs would, so a block is issued
// exactly like n IDs: strictly above every ID issued before it, below
// every ID issued after, counted by LastTick (and so by a mode switch or a
// clean shutdown), never past the reservation or MaxLead. The block is cut
// at that limit: it holds fewer than n IDs then, never more (what was cut
// off is taken back when no other add came after, otherwise burned: never
// issued, never reused). false issues nothing.
func (g *Generator) TryNextBlock(n int64) (Block, bool) {
	if n < 1 {
		return Block{}, false
	}
	// No block holds more than the layout's ticks: the add cannot wrap.
	n = int64(min(uint64(n), uint64(g.layout.MaxTick()+1)*g.perTick))
	now := g.now.Load()
	st := g.state.Load()
	if g.tickOf(st+1) < now {
		// The clock has moved past the state: jump to the start of the
		// current tick when it is granted, as TryNextIDs does.
		if now > g.limit.Load() {
			return Block{}, false
		}
		g.state.CompareAndSwap(st, uint64(now)*g.perTick-1)
		if g.tickOf(g.state.Load()+1) < now {
			return Block{}, false
		}
	}
	end := g.state.Add(uint64(n))
	start := end - uint64(n) + 1
	// Loaded after the add, as in tryNext: Close lowers limit before it
	// reads the state.
	limit := g.limit.Load()
	if g.tickOf(start) > limit {
		g.undo(end, uint64(n))
		return Block{}, false
	}
	last := end
	if g.tickOf(end) > limit {
		last = uint64(limit+1)*g.perTick - 1 // the last position of the last tick allowed
		g.state.CompareAndSwap(end, last)    // take back the rest, if no add came after
	}
	return g.block(start, int64(last-start+1)), true
}

// NextBlock is TryNextBlock that waits, as NextIDContext does, while the
// generator is MaxLead ahead of the clock or a reservation is on its way.
func (g *Generator) NextBlock(ctx context.Context, n int64) (Block, error) {
	if n < 1 {
		return Block{}, fmt.Errorf("block of %d IDs: want >= 1", n)
	}
	for {
		if b, ok := g.TryNextBlock(n); ok {
			return b, nil
		}
		if err := g.slow(ctx); err != nil {
			return Block{}, err
		}
	}
}

// block describes the positions [start, start+count).
func (g *Generator) block(start uint64, count int64) Block {
	b := Block{First: g.toID(start), Count: count, Stride: 1 << g.machBits}
	if g.k > 1 {
		b.MachineIDs = g.machines // ascending; never modified
	}
	return b
}
