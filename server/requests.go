package server

import "time"

// flushAt is how much reply a pipeline may pile up before it is written
// out mid-batch.
const flushAt = 64 << 10

// runRequests runs the complete requests in the input buffer, in order: it
// is the per-request work of both ways a connection is served, a
// goroutine's (conn.serve) and an event loop's (loop.serve, through
// runInLoop). A request a loop set aside runs first. It stops when no
// complete request is left, when the connection is to close (QUIT, a
// protocol error: c.quit), when a request is set aside for a goroutine, or
// when the replies piling up cannot be written: then it returns false. The
// replies still pending are the caller's to write.
func (c *conn) runRequests() (written bool) {
	if args := c.resumed(); args != nil {
		c.exec(args)
	}
	ran := false
	for !c.quit {
		args, err := c.p.next()
		if err != nil {
			c.protocolError(err)
			break
		}
		if args == nil {
			break
		}
		if !ran { // the first request of a batch marks the connection active
			ran = true
			c.active.Store(time.Now().UnixNano())
		}
		c.exec(args)
		if c.setAside(args) {
			break
		}
		if len(c.out) >= flushAt && !c.send() {
			return false
		}
	}
	c.batchDone(ran)
	return true
}

// send writes the replies piled up mid-batch and reports whether all of
// them left: a goroutine waits for the socket; a loop does not, and hands
// what is left to a goroutine.
func (c *conn) send() bool {
	if c.inLoop {
		return c.writeNoWait()
	}
	return c.flush() == nil
}

// exec runs one request, checking what Redis checks, in Redis's order:
// the command exists, its arity, then authentication. Inside MULTI it
// queues the request instead (cmd_multi.go).
func (c *conn) exec(args [][]byte) {
	s := c.s
	c.mark = len(c.out)
	if len(args) > s.opts.MaxArgs { // inline requests; RESP ones were checked as they arrived
		c.protocolError(protocolErrorf("too many arguments in inline request (%d, max %d)", len(args), s.opts.MaxArgs))
		return
	}
	cmd := s.lookup(args[0])
	if cmd == nil {
		s.stats.unknown.Add(1)
		c.reject(unknownCommand(args))
		return
	}
	c.last.Store(cmd)
	if cmd.arity > 0 && len(args) != cmd.arity || cmd.arity < 0 && len(args) < -cmd.arity {
		c.reject(wrongArgs(cmd.name))
		return
	}
	if !c.authed && !cmd.noAuth {
		c.reject("NOAUTH Authentication required.")
		return
	}
	if c.tx != nil && !cmd.txControl {
		c.queue(cmd, args)
		return
	}
	if cmd.mayBlock && c.leaveLoop() {
		return
	}
	cmd.calls.Add(1)
	cmd.run(c, args)
	if c.blocked { // it runs again, in the goroutine the connection goes to
		cmd.calls.Add(^uint64(0))
	}
	if c.caching {
		c.cachingDone(cmd)
	}
}

// reject answers a request that cannot run; inside MULTI it also dooms
// the transaction, as Redis does: EXEC then answers EXECABORT.
func (c *conn) reject(msg string) {
	if c.tx != nil {
		c.tx.dirty = true
	}
	c.writeError(msg)
}
