package server

import (
	"fmt"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// MaxBlock is the largest count NEXTBLOCK takes. A block costs the same
// few integers whatever its size; the generator cuts it at its
// reservation, its lead or its counter segment anyway.
const MaxBlock = 1 << 24

// NEXTBLOCK n [STRING]: up to n consecutive IDs as one block, described
// instead of listed: an array of integers
//
//	first, count, stride [, machine IDs ...]
//
// with 1 <= count <= n (the generator cuts a block at its reservation, its
// lead or a counter segment: fewer, never more), stride = 2^machine bits,
// and the IDs first + i*stride for i < count. A node that interleaves
// several machine IDs adds them, ascending; its IDs walk the (tick,
// sequence) steps, one ID per machine ID each (flake.Block.ID; the
// decoder of docs/protocol.md). With STRING every element is a bulk
// string of its decimal digits, as NEXTID's. The block is issued like count NEXTIDs: a
// client that drops it leaves a gap; no ID of it is issued again.
func cmdNextBlock(c *conn, args [][]byte) {
	s := c.s
	n, ok := parseInt(args[1])
	if !ok || n < 1 || n > MaxBlock {
		c.writeError(fmt.Sprintf("ERR NEXTBLOCK count must be an integer in 1..%d", MaxBlock))
		return
	}
	asString := len(args) > 2
	if asString && !stringOption(c, "NEXTBLOCK", args[2:]) {
		return
	}
	bg, ok := s.gen.(node.BlockGenerator)
	if !ok {
		c.writeError("ERR NEXTBLOCK is not supported by this generator: use NEXTIDS")
		return
	}
	b, ok := bg.TryNextBlock(n)
	if !ok { // nothing was issued
		if !c.wait() { // in an event loop: a goroutine asks again
			return
		}
		var err error
		if b, err = bg.NextBlock(c.waitCtx(), n); err != nil {
			c.generatorError(err)
			return
		}
	}
	s.stats.issued(s.isCounter(b.First), uint64(b.Count))
	c.writeBlock(b, asString)
}

// writeBlock writes a block as NEXTBLOCK answers it.
func (c *conn) writeBlock(b flake.Block, asString bool) {
	c.writeArray(3 + len(b.MachineIDs))
	put := c.writeUint
	if asString {
		put = c.writeUintString
	}
	put(b.First)
	put(uint64(b.Count))
	put(b.Stride)
	for _, m := range b.MachineIDs {
		put(m)
	}
}
