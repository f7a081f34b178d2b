package sim

import (
	"context"
	"fmt"
	"time"
)

// issueBlock asks p's node for a block of up to n IDs, as a NEXTBLOCK
// client with a 2 s timeout would, and checks every ID of it as issued at
// once: a client holding a block may use any part of it, or die and leave
// the rest a gap, so a duplicate of any ID of the block (with another
// block, a batch, another node's) is a failure, as is a block longer than
// asked for.
func (r *run) issueBlock(p *proc, n int) {
	r.w.deadline = r.w.now + 2*time.Second
	b, err := p.node.NextBlock(context.Background(), int64(n))
	r.w.deadline = 0
	if err != nil {
		return
	}
	r.batches = append(r.batches, batch{p: p, at: r.w.now, mode: p.node.Mode().String() + " block"})
	bi := uint32(len(r.batches) - 1)
	if b.Count < 1 || b.Count > int64(n) {
		r.fail(&Failure{Kind: "bad block", ID: b.First, Parts: r.layout.Decompose(b.First), Second: r.batches[bi].issue(b.First),
			Detail: fmt.Sprintf("a block of %d IDs for %d asked", b.Count, n)})
		return
	}
	for i := range b.Count {
		if r.res.Failure != nil {
			return
		}
		r.check(b.ID(i), bi)
	}
}
