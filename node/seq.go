package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flaked/flaked/seq"
)

// ErrSeqStandalone is returned by NextSeq on a standalone node: its
// embedded store starts empty at every start, so a tag would start over.
var ErrSeqStandalone = errors.New("named sequences need Redis: a standalone node's embedded store does not keep them across restarts; start with --redis")

// seqState holds the node's named sequences, made at the first use.
type seqState struct {
	once sync.Once
	s    atomic.Pointer[seq.Sequences] // nil until made; read by TryNextSeq
	err  error
}

// Sequences returns the node's named sequences (package seq), sharing its
// Redis, namespace and owner; made at the first call.
func (n *Node) Sequences() (*seq.Sequences, error) {
	if n.mini != nil {
		return nil, ErrSeqStandalone
	}
	n.seqs.once.Do(func() {
		ro := n.reg.Options()
		var s *seq.Sequences
		s, n.seqs.err = seq.New(n.rdb, seq.Options{
			Namespace: ro.Namespace, Clock: n.opts.Clock, Rand: ro.Rand,
			EventsMaxLen: n.opts.Counter.EventsMaxLen, Host: ro.Owner.Host, PID: ro.Owner.PID,
			RedisIdentity: ro.RedisIdentity, MinReplicas: ro.MinReplicas, Sentinels: ro.Sentinels, Marks: n.reg.MarkMemory(),
			// Only when the node's registry ran under it: a node started in
			// counter mode while Redis was away has seen no registry, and
			// a {ns}:meta it made would keep flaked init from making one.
			Known: n.reg.Known(),
		})
		n.seqs.s.Store(s)
	})
	if s := n.seqs.s.Load(); s != nil || n.seqs.err != nil {
		return s, n.seqs.err
	}
	return nil, ErrClosed // Close came first
}

// NextSeq fills dst with strictly increasing values of the named sequence
// tag and returns how many it filled (len(dst) unless err is set). The
// daemon's NEXTSEQ and the HTTP API call it.
func (n *Node) NextSeq(ctx context.Context, tag string, dst []int64) (int, error) {
	s, err := n.Sequences()
	if err != nil {
		return 0, err
	}
	ctx, cancel := n.waitContext(ctx) // a segment in flight is waited for up to IDWait
	defer cancel()
	return s.NextN(ctx, tag, dst)
}

// TryNextSeq fills dst from the tag's segment in use if it holds all of
// dst, without waiting, and reports whether it did (false takes nothing).
func (n *Node) TryNextSeq(tag []byte, dst []int64) bool {
	if n.mini != nil {
		return false
	}
	s := n.seqs.s.Load()
	if s == nil {
		return false
	}
	return s.TryNext(tag, dst)
}

// closeSeqs gives back the sequences' unused values (Close).
func (n *Node) closeSeqs(ctx context.Context) error {
	if n.mini != nil {
		return nil
	}
	n.seqs.once.Do(func() {}) // none made from now on
	s := n.seqs.s.Load()
	if s == nil {
		return nil
	}
	if err := s.Close(ctx); err != nil {
		return fmt.Errorf("giving back sequence values: %w", err)
	}
	return nil
}
