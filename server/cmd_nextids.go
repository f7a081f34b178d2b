package server

import "fmt"

// NEXTIDS n [STRING]: an array of n IDs, strictly increasing,
// 1 <= n <= MaxBatch; integers, or with STRING bulk strings of their
// decimal digits (see NEXTID). All or nothing: when the generator fails
// part way, the reply is an error.
func cmdNextIDs(c *conn, args [][]byte) {
	s := c.s
	n, ok := parseInt(args[1])
	if !ok || n < 1 || n > int64(s.opts.MaxBatch) {
		c.writeError(fmt.Sprintf("ERR NEXTIDS count must be an integer in 1..%d", s.opts.MaxBatch))
		return
	}
	asString := len(args) > 2
	if asString && !stringOption(c, "NEXTIDS", args[2:]) {
		return
	}
	ids := c.ids
	if int64(cap(ids)) < n {
		ids = make([]uint64, n)
		if n <= keepIDs {
			c.ids = ids
		}
	}
	ids = ids[:n]
	if s.tgen == nil || !s.tgen.TryNextIDs(ids) { // false issued nothing
		if !c.wait() { // in an event loop: a goroutine asks again
			return
		}
		if _, err := s.gen.NextIDs(c.waitCtx(), ids); err != nil {
			c.generatorError(err)
			return
		}
	}
	var counter uint64
	for _, id := range ids {
		if s.isCounter(id) {
			counter++
		}
	}
	s.stats.issued(true, counter)
	s.stats.issued(false, uint64(n)-counter)
	c.writeArray(int(n))
	for _, id := range ids {
		if asString {
			c.writeUintString(id)
		} else {
			c.writeUint(id)
		}
	}
}
