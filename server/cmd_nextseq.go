package server

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/flaked/flaked/node"
)

// Sequencer is a generator that also hands out named sequences
// (node.Node). NEXTSEQ answers an error when the generator is not one.
type Sequencer interface {
	// NextSeq fills dst with strictly increasing values of tag, waiting
	// on Redis when needed.
	NextSeq(ctx context.Context, tag string, dst []int64) (int, error)
	// TryNextSeq fills dst without waiting and reports whether it did;
	// false takes nothing.
	TryNextSeq(tag []byte, dst []int64) bool
}

// NEXTSEQ tag [n]: the next value of the named sequence tag, an integer;
// with n (1..MaxBatch) an array of n strictly increasing values. Values
// are below 2^53, so every client reads them exactly. All or nothing:
// when the sequence fails part way, the reply is an error (the values
// taken are skipped, never handed out again).
func cmdNextSeq(c *conn, args [][]byte) {
	s := c.s
	sq, ok := s.gen.(Sequencer)
	if !ok {
		c.writeError("ERR NEXTSEQ: this generator has no named sequences")
		return
	}
	n := int64(1)
	if len(args) > 3 {
		c.writeError(wrongArgs("nextseq"))
		return
	}
	if len(args) == 3 {
		if n, ok = parseInt(args[2]); !ok || n < 1 || n > int64(s.opts.MaxBatch) {
			c.writeError(fmt.Sprintf("ERR NEXTSEQ count must be an integer in 1..%d", s.opts.MaxBatch))
			return
		}
	}
	// The values go into the connection's ID buffers: int64 and uint64
	// have the same layout, and NEXTSEQ then allocates nothing.
	var buf []uint64
	if n == 1 {
		buf = c.one[:]
	} else {
		if int64(cap(c.ids)) < n {
			ids := make([]uint64, n)
			if n <= keepIDs {
				c.ids = ids
			}
			buf = ids
		} else {
			buf = c.ids[:n]
		}
	}
	vals := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf))
	if !sq.TryNextSeq(args[1], vals) {
		if !c.wait() { // in an event loop: a goroutine asks again
			return
		}
		if _, err := sq.NextSeq(c.waitCtx(), string(args[1]), vals); err != nil {
			s.stats.nextIDErrors.Add(1)
			s.warn.Warn().Err(err).Str("tag", string(args[1])).Msg("no sequence value handed out")
			c.writeError("ERR no sequence value: " + err.Error())
			return
		}
	}
	if len(args) == 2 {
		c.writeInt(vals[0])
		return
	}
	c.writeArray(int(n))
	for _, v := range vals {
		c.writeInt(v)
	}
}

var _ Sequencer = (*node.Node)(nil)
