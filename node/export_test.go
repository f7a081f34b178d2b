package node

import (
	"context"
	"time"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/replwait"
)

// Marks are the replicas mark memories of the node's registry, of the
// counter it would start and of its sequences.
func (n *Node) Marks() (reg, counter, seqs *replwait.MarkMemory, err error) {
	s, err := n.Sequences()
	if err != nil {
		return nil, nil, nil, err
	}
	return n.reg.MarkMemory(), n.opts.counterOptions(n.reg).Marks, s.Options().Marks, nil
}

// Crash stops the node the way kill -9 would, as far as the fleet can
// tell: nothing more is issued, nothing is released, the state file lock
// and the embedded store go away.
func (n *Node) Crash() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	if m := n.monitor.Load(); m != nil {
		m.Stop()
	}
	last := n.src.Swap(&source{mode: n.modeLocked(), err: ErrClosed})
	if last.gen != nil {
		last.gen.Close()
	}
	if n.lease != nil {
		n.lease.Abandon()
	}
	if last.ctr != nil {
		last.ctr.Close()
	}
	n.cleanup()
	n.mu.Unlock()
}

// Kick runs a health check now and waits for it.
func (n *Node) Kick() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.closed {
		n.checkLocked(context.Background())
	}
}

// StoreTime is the embedded store's TIME (standalone nodes only).
func (n *Node) StoreTime(ctx context.Context) (time.Time, error) { return n.rdb.Time(ctx).Result() }

// CounterOptions are the options counter mode runs with.
func (n *Node) CounterOptions() fallback.Options { return n.opts.Counter }
