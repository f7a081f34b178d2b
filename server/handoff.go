package server

// calmBatches is how many request batches in a row a handed-off
// connection answers without waiting before it goes back to a loop.
const calmBatches = 64

// handoff is where a connection stands between an event loop and a
// goroutine of its own. A loop never waits (loop_linux.go): a request that
// would is not run there but handed, with its connection, to a goroutine,
// which runs it again and returns the connection to a loop once it has
// been calm for calmBatches batches. Commands see none of this: one that
// may wait calls wait first, or is marked mayBlock in the command table.
type handoff struct {
	// inLoop is true while an event loop runs the connection's requests;
	// blocked is set by a request that cannot run there without waiting,
	// and resume is that request, run first by the goroutine the
	// connection is handed to.
	inLoop  bool
	blocked bool
	resume  [][]byte
	// In a goroutine: waited is set by a request that could not be
	// answered at once; calm counts the batches since one was.
	waited bool
	calm   int
}

// wait is what a command calls before it waits (for the generator, the
// clock, Redis). When it returns false the command returns at once,
// writing nothing: it runs in an event loop, and the request runs again in
// the goroutine the connection goes to. When it returns true the command
// goes on and waits: it runs in a goroutine, where the connection then
// stays for calmBatches more batches.
func (c *conn) wait() bool {
	if c.leaveLoop() {
		return false
	}
	c.waited = true
	return true
}

// leaveLoop, in an event loop, sets the running request aside to run
// again in a goroutine, and reports whether it did. exec calls it for
// mayBlock commands, which are never run in a loop.
func (c *conn) leaveLoop() bool {
	if !c.inLoop {
		return false
	}
	c.blocked = true
	return true
}

// runInLoop runs the buffered requests for an event loop, where a request
// that would wait is set aside instead, and reports whether the
// connection can stay in the loop: not when a request was set aside, the
// connection is to close, or the replies could not be written mid-batch.
func (c *conn) runInLoop() (stay bool) {
	c.inLoop = true
	written := c.runRequests()
	c.inLoop = false
	return written && c.resume == nil && !c.quit
}

// setAside keeps the request that just ran for the goroutine the
// connection goes to, if it left the loop (leaveLoop), and reports whether
// it did; the goroutine runs it first (resumed).
func (c *conn) setAside(args [][]byte) bool {
	if !c.blocked {
		return false
	}
	c.blocked, c.resume = false, args
	return true
}

// resumed returns the request a loop set aside, once, or nil.
func (c *conn) resumed() [][]byte {
	args := c.resume
	c.resume = nil
	return args
}

// batchDone counts a batch of requests that ran (ran false: none did)
// toward the connection's return to a loop.
func (c *conn) batchDone(ran bool) {
	if c.inLoop { // a loop's own batches never wait: they do not count
		return
	}
	switch {
	case c.waited:
		c.waited, c.calm = false, 0
	case ran:
		c.calm++
	}
}

// backToLoop moves a goroutine's connection back into an event loop once
// it has been calm for calmBatches batches, and reports whether it did.
func (c *conn) backToLoop() bool {
	if c.calm < calmBatches {
		return false
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// Either way the count starts over: after a failure, not again before
	// the next calm spell; in the loop, for the next hand-off (set before
	// adopt: from then on the loop may hand c to another goroutine).
	c.calm = 0
	if s.closing.Load() || !s.adopt(c) {
		return false
	}
	s.stats.readopts.Add(1)
	return true
}
