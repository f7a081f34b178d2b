package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/flaked/flaked/seq"
)

// Named sequences in the simulator (Options.Sequences): a client asks a
// random live node for 1-4 values of one tag every 100 ms on average, on a
// random stream of its own, and every value is checked: handed out once,
// strictly increasing per process. The tag has a small step and rate, so
// segments run out, give-backs and loss jumps happen often. When the tag
// is refused because Redis lost it (or it was never created), an operator
// restores it above the highest value handed out so far, as
// `flaked seq restore --above N` with N from the business's records.

const simTag = "sim"

type seqWork struct {
	rng     *rand.Rand
	seen    map[int64]Issue
	last    map[*proc]int64
	highest int64
	created bool
	dst     [4]int64
}

// startSeq schedules the sequence client, when Options.Sequences asks.
func (r *run) startSeq() {
	r.seq = &seqWork{rng: rand.New(rand.NewPCG(r.s.Seed, 0x5e9)), seen: map[int64]Issue{}, last: map[*proc]int64{}}
	r.nextSeqWork()
}

func (r *run) nextSeqWork() {
	sw := r.seq
	gap := time.Duration(sw.rng.ExpFloat64() * float64(100*time.Millisecond))
	i, n := sw.rng.IntN(len(r.slots)), 1+sw.rng.IntN(len(sw.dst))
	r.w.at(r.w.now+gap, nil, func() {
		if p := r.slots[i].cur; p != nil && p.node != nil && !p.dead && p.pausedUntil <= r.w.now {
			r.issueSeq(p, n)
		}
		if r.res.Failure == nil {
			r.nextSeqWork()
		}
	})
}

// issueSeq asks p's node for n values, as a client with a 2 s timeout
// would, and checks them.
func (r *run) issueSeq(p *proc, n int) {
	sw := r.seq
	s, err := p.node.Sequences()
	if err != nil {
		return
	}
	r.w.deadline = r.w.now + 2*time.Second
	defer func() { r.w.deadline = 0 }()
	if !sw.created {
		err := s.Create(context.Background(), simTag, seq.TagOptions{Step: 1 + sw.rng.Int64N(20), Rate: 200, Burst: 400})
		if err != nil && !errors.Is(err, seq.ErrExists) {
			return
		}
		sw.created = true
	}
	dst := sw.dst[:n]
	got, err := p.node.NextSeq(context.Background(), simTag, dst)
	// The values come before the error in the client's records, which the
	// operator's restore reads.
	for _, v := range dst[:got] {
		r.checkSeq(p, v)
	}
	if errors.Is(err, seq.ErrUnknownTag) || errors.Is(err, seq.ErrBlocked) {
		if _, err := s.Restore(context.Background(), simTag, sw.highest, seq.TagOptions{Step: 10, Rate: 200, Burst: 400}); err == nil {
			r.res.SeqRestores++
		}
	}
}

func (r *run) checkSeq(p *proc, v int64) {
	sw := r.seq
	r.res.SeqValues++
	is := Issue{ID: uint64(v), Node: p.slot.i, Run: p.run, At: r.w.now, Mode: "sequence " + simTag}
	if prev, ok := sw.seen[v]; ok {
		r.fail(&Failure{Kind: "sequence duplicate", ID: uint64(v), First: prev, Second: is,
			Detail: fmt.Sprintf("value %d of tag %s handed out twice: first by %v", v, simTag, prev)})
		return
	}
	sw.seen[v] = is
	if last := sw.last[p]; v <= last {
		r.fail(&Failure{Kind: "sequence not increasing", ID: uint64(v), Second: is,
			Detail: fmt.Sprintf("value %d of tag %s after %d in one process", v, simTag, last)})
		return
	}
	sw.last[p] = v
	sw.highest = max(sw.highest, v)
}
