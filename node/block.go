package node

import (
	"context"

	"github.com/flaked/flaked/flake"
)

// BlockGenerator is a TryGenerator that also hands out blocks of IDs
// (flake.Block): the daemon's NEXTBLOCK. A block is issued exactly like
// its IDs one by one: the same reservation, the same bound recorded at a
// mode switch, a takeover or a shutdown.
type BlockGenerator interface {
	TryGenerator
	// TryNextBlock returns up to n IDs as one block if at least one can be
	// issued at once, without waiting; false issues nothing.
	TryNextBlock(n int64) (flake.Block, bool)
	// NextBlock returns up to n IDs as one block (fewer when the block is
	// cut at a reservation, MaxLead or a counter segment), waiting as
	// NextID does, or an error when none can be issued safely.
	NextBlock(ctx context.Context, n int64) (flake.Block, error)
}

var _ BlockGenerator = (*Node)(nil)

// TryNextBlock returns up to n IDs as one block from the current source
// if it can issue at once (see BlockGenerator).
func (n *Node) TryNextBlock(count int64) (flake.Block, bool) {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		return s.gen.TryNextBlock(count)
	case s.ctr != nil:
		return s.ctr.TryNextBlock(count)
	}
	return flake.Block{}, false
}

// NextBlock returns up to n IDs as one block from the current mode's
// source, waiting out mode switches and, up to IDWait, a source that
// cannot issue, as NextID does.
func (n *Node) NextBlock(ctx context.Context, count int64) (flake.Block, error) {
	parent := ctx
	ctx, cancel := n.waitContext(ctx)
	defer cancel()
	waited := false
	for {
		s := n.src.Load()
		var b flake.Block
		var err error
		switch {
		case s.gen != nil:
			b, err = s.gen.NextBlock(ctx, count)
		case s.ctr != nil:
			b, err = s.ctr.NextBlock(ctx, count)
		default:
			err = s.err
		}
		if err == nil {
			return b, nil
		}
		if !n.againOrWait(ctx, s, err, &waited) {
			return flake.Block{}, n.waitError(parent, err)
		}
	}
}
