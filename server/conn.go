package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// keepOut and keepIDs bound the buffers a connection keeps between
	// requests, so an occasional large reply does not pin memory.
	keepOut = 256 << 10
	keepIDs = 1024
	// lingerTimeout and lingerBytes bound how long and how much a closing
	// connection still reads, so the client's unread requests do not turn
	// the close into a reset that destroys the last replies in flight. A
	// pipelining client on loopback sends 1 MiB in a few milliseconds, long
	// before it has read our last replies (TestShutdown_Pipelined... lost
	// replies about one run in eight with 1 MiB); reading is cheap, so the
	// time bounds it first.
	lingerTimeout = 500 * time.Millisecond
	lingerBytes   = 256 << 20
)

// conn is one client connection. Everything but the fields marked
// otherwise belongs to its goroutine.
type conn struct {
	s     *Server
	nc    net.Conn
	id    uint64
	addr  string
	laddr string
	born  time.Time
	p     *reqParser

	out     []byte    // replies not yet written
	mark    int       // len(out) before the running command; a panic cuts back to it
	ids     []uint64  // NEXTIDS buffer
	one     [1]uint64 // NEXTID's
	authed  bool
	quit    bool            // close once out is flushed
	resp3   bool            // HELLO 3 switched the connection to RESP3 (reply.go)
	tx      *transaction    // between MULTI and EXEC/DISCARD (cmd_multi.go)
	execCtx context.Context // while EXEC runs with Options.ExecWait: the bound of its waits
	// caching is set by CLIENT CACHING until the next command
	// (cmd_client_tracking.go).
	caching bool

	// fd is the descriptor an event loop serves (loop_linux.go), -1
	// otherwise; handoff is where the connection stands between a loop and
	// a goroutine (handoff.go).
	fd int
	handoff

	// Read by CLIENT LIST on other connections.
	active                atomic.Int64 // unix nanoseconds of the last request batch
	last                  atomic.Pointer[command]
	lastSub               atomic.Pointer[string] // CLIENT's last subcommand, "client|info"
	sock                  int                    // the socket's descriptor when accepted, -1 if unknown
	mu                    sync.Mutex             // guards the fields below
	name, libName, libVer string
	proto                 int      // 2 or 3, c.resp3 as others see it
	queued                int      // requests queued since MULTI, -1 outside
	queuedMem             int64    // their bytes
	trk                   tracking // CLIENT TRACKING's state (cmd_client_tracking.go)
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:      s,
		nc:     nc,
		id:     s.nextCID.Add(1),
		addr:   nc.RemoteAddr().String(),
		laddr:  nc.LocalAddr().String(),
		born:   time.Now(),
		p:      newReqParser(s.opts),
		fd:     -1,
		authed: s.opts.RequirePass == "",
		sock:   socketFD(nc),
		proto:  2,
		queued: -1,
	}
	c.active.Store(c.born.UnixNano())
	return c
}

// socketFD is nc's descriptor, for CLIENT LIST's fd field, or -1.
func socketFD(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// setProto switches the connection's replies to RESP2 or RESP3.
func (c *conn) setProto(v int) {
	c.resp3 = v == 3
	c.mu.Lock()
	c.proto = v
	c.mu.Unlock()
}

// serveConn runs c to its end and closes it, or until it moves (back)
// into an event loop. A panic anywhere in it is logged and answered with
// an error on this connection only.
func (s *Server) serveConn(c *conn) {
	gone, moved := false, false
	defer func() {
		if r := recover(); r != nil {
			c.panicked(r)
			c.flush()
			gone, moved = false, false
		}
		if moved { // an event loop serves it now, and owns its wg slot
			return
		}
		s.forget(c) // the slot frees up while the client reads its last replies
		if gone {
			c.nc.Close()
		} else {
			lingerClose(c.nc, lingerTimeout)
		}
		s.log.Debug().Str("addr", c.addr).Uint64("client_id", c.id).Msg("connection closed")
		s.wg.Done()
	}()
	gone, moved = c.serve()
}

// panicked answers a panic recovered while serving c, in place of the
// reply the running command had begun, and logs it. The connection closes
// once its replies are out; nothing it had read runs any more.
func (c *conn) panicked(r any) {
	c.s.log.Error().Str("panic", fmt.Sprint(r)).Str("addr", c.addr).Uint64("client_id", c.id).
		Bytes("stack", debug.Stack()).Msg("recovered a panic; closing the connection")
	c.out = appendError(c.out[:c.mark], "ERR internal server error; closing the connection")
	c.quit = true
	c.handoff = handoff{}
}

// serve reads request batches and answers them until the client leaves,
// sends QUIT, breaks the protocol, idles out or the server shuts down. It
// reports whether the client is already gone (no reply can reach it). A
// connection an event loop handed over goes back to a loop (moved) once
// it is calm again (handoff.go).
func (c *conn) serve() (gone, moved bool) {
	s := c.s
	if !c.handshake() {
		return true, false
	}
	var err error // the last read's
	for {
		// First what is buffered: nothing on a new connection; on one an
		// event loop handed over, the request it set aside, if that is
		// why, and the rest of what it had read (also when a full socket
		// was why: the client may have sent them all).
		if !c.runRequests() {
			return true, false
		}
		if err != nil && !c.quit {
			return c.readFailed(err), false
		}
		// The replies of the batch leave before waiting for more.
		if c.flush() != nil {
			return true, false
		}
		if c.quit {
			return false, false
		}
		if c.backToLoop() {
			return false, true
		}
		// The idle timeout runs from the end of the last complete request:
		// a partial one does not extend it. Without an idle timeout the
		// deadline is never touched: setting one costs a runtime timer
		// update per batch, and Shutdown's past deadline then stays in
		// force by itself.
		if s.opts.IdleTimeout > 0 && !c.p.buffered() {
			c.nc.SetReadDeadline(time.Now().Add(s.opts.IdleTimeout))
		}
		// Shutdown sets closing, then a past read deadline. Checked after
		// our own deadline is set: either Shutdown's deadline came later
		// and wins, or closing is already visible here.
		if s.closing.Load() {
			return false, false
		}
		var n int
		n, err = c.nc.Read(c.p.space())
		c.p.wrote(n)
	}
}

// handshake runs a TLS connection's handshake, bounded by the idle timeout
// (10 s without one), and reports whether it succeeded. Other connections
// have none.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	s := c.s
	timeout := s.opts.IdleTimeout
	if timeout == 0 {
		timeout = defaultHandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.warn.Warn().Err(err).Str("addr", c.addr).Msg("TLS handshake failed")
		return false
	}
	return true
}

// readFailed takes a read error and reports whether the client is gone:
// not after an idle timeout or Shutdown's deadline.
func (c *conn) readFailed(err error) (gone bool) {
	s := c.s
	if !errors.Is(err, os.ErrDeadlineExceeded) { // EOF, reset
		return true
	}
	if !s.closing.Load() {
		s.log.Debug().Str("addr", c.addr).Uint64("client_id", c.id).Dur("idle_timeout", s.opts.IdleTimeout).Msg("idle timeout")
	}
	return false
}

// flush writes the pending replies.
func (c *conn) flush() error {
	var err error
	if len(c.out) > 0 {
		if t := c.s.opts.IdleTimeout; t > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(t))
		}
		_, err = c.nc.Write(c.out)
	}
	c.sent()
	return err
}

// sent empties the reply buffer once its replies are written. The same
// buffer is used again from its start (no allocation next time), unless
// an occasional large reply grew it past keepOut.
func (c *conn) sent() {
	c.mark = 0
	if cap(c.out) > keepOut {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
}

// lingerClose closes nc after the client has seen our end of the stream:
// closing a socket that still holds unread input sends a reset, which can
// destroy replies the client has not read yet. So it half-closes, reads
// what the client still sends for a little while, then closes.
func lingerClose(nc net.Conn, timeout time.Duration) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		nc.SetReadDeadline(time.Now().Add(timeout))
		io.CopyN(io.Discard, nc, lingerBytes)
	}
	nc.Close()
}

// protoVersion is the connection's RESP version, 2 or 3.
func (c *conn) protoVersion() int {
	if c.resp3 {
		return 3
	}
	return 2
}

// waitCtx is what a request's wait for IDs is bounded by: the server's
// context, or inside EXEC the transaction's (Options.ExecWait).
func (c *conn) waitCtx() context.Context {
	if c.execCtx != nil {
		return c.execCtx
	}
	return c.s.ctx
}
