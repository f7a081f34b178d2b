package server

import (
	"context"
	"fmt"
)

// Transactions: MULTI, then requests that are queued (+QUEUED), then EXEC
// runs them in order and answers an array of their replies, or DISCARD
// drops them. As in Redis, a queued request that is unknown, has the wrong
// arity or is not authenticated is answered with its error and dooms the
// transaction: EXEC then answers EXECABORT and runs nothing. Errors of the
// commands themselves (NEXTIDS 0) are their replies inside EXEC's array.
//
// IDs are issued only at EXEC: a discarded or aborted transaction issues
// none.
//
// A transaction is bounded like one request: it may ask for at most
// MaxBatch IDs in all (NEXTIDS's limit: EXEC's reply holds no more IDs
// than one NEXTIDS's), and hold at most MaxArgs × MaxBulk bytes of requests.
// Beyond either, the request is refused and the transaction doomed.

// transaction is a connection's state between MULTI and EXEC or DISCARD.
type transaction struct {
	cmds  []queuedCmd // the requests to run; none added once doomed, all dropped by a limit
	n     int         // requests queued, doomed or not (CLIENT LIST's multi)
	dirty bool        // a request was refused: EXEC answers EXECABORT
	wait  bool        // a queued command may wait: EXEC runs in a goroutine
	size  int64       // bytes held, roughly
	ids   int64       // IDs the queued commands ask for
}

type queuedCmd struct {
	cmd  *command
	args [][]byte // a copy: the request's own bytes are the parser's
}

// MULTI: start a transaction.
func cmdMulti(c *conn, _ [][]byte) {
	if c.tx != nil {
		c.writeError("ERR MULTI calls can not be nested")
		return
	}
	c.tx = &transaction{}
	c.showQueued(0, 0)
	c.writeOK()
}

// queue adds a request to the transaction and answers +QUEUED.
func (c *conn) queue(cmd *command, args [][]byte) {
	t := c.tx
	t.n++
	if !t.dirty {
		size := int64(24)
		for _, a := range args {
			size += int64(len(a)) + 24
		}
		t.size += size
		t.ids += idsAsked(c.s, cmd, args)
		switch max := c.s.opts.MaxBatch; {
		case t.ids > int64(max):
			c.doom(fmt.Sprintf("ERR transaction too large: it may ask for %d IDs at most in all (NEXTIDS's limit)", max))
			return
		case t.size > int64(c.s.opts.MaxArgs)*int64(c.s.opts.MaxBulk):
			c.doom(fmt.Sprintf("ERR transaction too large: it may hold %d bytes at most", int64(c.s.opts.MaxArgs)*int64(c.s.opts.MaxBulk)))
			return
		}
		t.cmds = append(t.cmds, queuedCmd{cmd, copyArgs(args)})
		t.wait = t.wait || cmd.mayWait || cmd.mayBlock
	}
	c.showQueued(t.n, t.size)
	c.writeStatus("QUEUED")
}

// doom refuses a request and drops what the transaction holds.
func (c *conn) doom(msg string) {
	c.tx.cmds, c.tx.size = nil, 0
	c.reject(msg)
	c.showQueued(c.tx.n, 0)
}

// idsAsked is how many IDs a request asks for; a NEXTIDS count out of
// range asks for none (it is an error at EXEC).
func idsAsked(s *Server, cmd *command, args [][]byte) int64 {
	switch cmd.name {
	case "nextid":
		return 1
	case "nextids":
		if n, ok := parseInt(args[1]); ok && n >= 1 && n <= int64(s.opts.MaxBatch) {
			return n
		}
	case "nextseq": // values of a sequence count as IDs
		if len(args) < 3 {
			return 1
		}
		if n, ok := parseInt(args[2]); ok && n >= 1 && n <= int64(s.opts.MaxBatch) {
			return n
		}
	}
	return 0
}

func copyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}

// EXEC: run the queued requests and answer an array of their replies.
func cmdExec(c *conn, _ [][]byte) {
	t := c.tx
	if t == nil {
		c.writeError("ERR EXEC without MULTI")
		return
	}
	// An event loop must not wait, and a transaction must not stop half
	// way (its first IDs issued, the rest to run again elsewhere): one that
	// may wait runs whole in a goroutine. The queue stays until then.
	if t.wait && c.leaveLoop() {
		return
	}
	if t.dirty {
		c.endTx()
		c.writeError("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	if c.s.opts.ExecWait > 0 && t.wait {
		ctx, cancel := context.WithTimeout(c.s.ctx, c.s.opts.ExecWait)
		c.execCtx = ctx
		defer func() {
			cancel()
			c.execCtx = nil
		}()
	}
	// Still in MULTI while they run, as in Redis (CLIENT INFO shows it).
	c.writeArray(len(t.cmds))
	for _, q := range t.cmds {
		q.cmd.calls.Add(1)
		q.cmd.run(c, q.args)
		if c.blocked { // cannot happen (t.wait); should it, EXEC runs again whole, its reply not begun
			c.out = c.out[:c.mark]
			return
		}
	}
	c.endTx()
}

// DISCARD: drop the queued requests.
func cmdDiscard(c *conn, _ [][]byte) {
	if c.tx == nil {
		c.writeError("ERR DISCARD without MULTI")
		return
	}
	c.endTx()
	c.writeOK()
}

// endTx leaves MULTI.
func (c *conn) endTx() {
	c.tx = nil
	c.showQueued(-1, 0)
}

// showQueued publishes the transaction's size to CLIENT LIST.
func (c *conn) showQueued(n int, size int64) {
	c.mu.Lock()
	c.queued, c.queuedMem = n, size
	c.mu.Unlock()
}

// WATCH key [key ...] and UNWATCH are accepted and do nothing: flaked has
// no keys that another client could change, so a watched transaction is
// never aborted by a write. WATCH inside MULTI is refused, as in Redis.
func cmdWatch(c *conn, _ [][]byte) {
	if c.tx != nil {
		c.writeError("ERR WATCH inside MULTI is not allowed")
		return
	}
	c.writeOK()
}

func cmdUnwatch(c *conn, _ [][]byte) { c.writeOK() }
