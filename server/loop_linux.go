//go:build linux

package server

import (
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// loop is an epoll event loop that serves plain TCP connections without a
// goroutine each, the way redis-server does: one epoll_wait for many ready
// connections, then one read and one write system call per connection,
// made with RawSyscall so the Go scheduler is not involved. A goroutine
// per connection costs a netpoll wake-up, a goroutine switch and the
// runtime's system-call bookkeeping per request; on loopback that is what
// stands between flaked and redis-server (BENCHMARKS.md has the numbers).
//
// The loop never blocks on anything but epoll_wait. Whatever could block
// is handed off: the connection leaves the loop and goes on in a goroutine
// of its own (the ordinary serveConn path), with its buffered input, its
// pending replies and the request that could not run at once. That is the
// case for:
//   - an ID that cannot be issued at once (the node waits for the clock at
//     max-lead, fetches a counter segment, waits out a mode switch, or
//     Redis is away): TryNextIDs says no and the request runs again in the
//     goroutine, where NextID or NextIDs may wait;
//   - INFO, which takes the node's lock;
//   - a reply the socket cannot take whole (a client that does not read);
//   - the end of a connection that still needs its replies delivered
//     (QUIT, a protocol error, a panic, the idle timeout, Shutdown).
//
// A handed-off connection returns to a loop once it has answered
// calmBatches batches in a row without waiting; until then, or to its end
// if it never calms down, its goroutine serves it (handoff.go).
type loop struct {
	s      *Server
	ep     int // epoll descriptor
	wake   int // eventfd: Shutdown writes it
	mu     sync.Mutex
	conns  map[int32]*conn // guarded by mu: adopt runs on accepting goroutines
	closed bool            // guarded by mu: the descriptors are closed
	events []syscall.EpollEvent
	sweep  time.Time // the next idle-timeout sweep
	busy   bool      // the last wait found events
	spareP bool      // GOMAXPROCS leaves a P to the rest of the program
}

// loopsSupported reports whether this platform has event loops.
const loopsSupported = true

// startLoops creates the server's event loops and starts them.
func (s *Server) startLoops() error {
	for range s.opts.Loops {
		l, err := newLoop(s)
		if err != nil {
			for _, l := range s.loops {
				l.stop()
			}
			s.loops = nil
			return err
		}
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		s.wg.Add(1)
		go l.run()
	}
	return nil
}

func newLoop(s *Server) (*loop, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		syscall.Close(ep)
		return nil, os.NewSyscallError("eventfd2", e)
	}
	l := &loop{s: s, ep: ep, wake: int(wake), conns: map[int32]*conn{}, events: make([]syscall.EpollEvent, 256),
		spareP: runtime.GOMAXPROCS(0) > s.opts.Loops}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, l.wake, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.wake)}); err != nil {
		l.stop()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

// stop closes the loop's descriptors.
func (l *loop) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	syscall.Close(l.wake)
	syscall.Close(l.ep)
}

// wakeUp makes the loop's epoll_wait return (Shutdown calls it).
func (l *loop) wakeUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed { // a descriptor number closed may be someone else's now
		return
	}
	one := uint64(1)
	syscall.Write(l.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// adopt moves nc into a loop, if the server runs loops and nc is a plain
// TCP connection, and reports whether it did. The loop serves a duplicate
// of nc's descriptor; nc itself is closed.
func (s *Server) adopt(c *conn) bool {
	if len(s.loops) == 0 { // none started: see useLoops
		return false
	}
	tc, ok := c.nc.(*net.TCPConn)
	if !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	var derr error
	if err := raw.Control(func(f uintptr) {
		var e syscall.Errno
		var r uintptr
		r, _, e = syscall.Syscall(syscall.SYS_FCNTL, f, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = e
			return
		}
		fd = int(r)
	}); err != nil || derr != nil {
		return false
	}
	// The descriptor is non-blocking already: Go set O_NONBLOCK on the
	// open file both descriptors share.
	// c is set up before the loop can see it: through l.mu, and through
	// epoll, which reports nothing on fd before it is added.
	l := s.loops[int(c.id)%len(s.loops)]
	c.fd, c.nc = fd, nil
	l.mu.Lock()
	l.conns[int32(fd)] = c
	l.mu.Unlock()
	if err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
		l.mu.Lock()
		delete(l.conns, int32(fd))
		l.mu.Unlock()
		syscall.Close(fd)
		c.fd, c.nc = -1, tc
		return false
	}
	tc.Close()
	return true
}

// run is the loop: wait for ready connections, serve each, repeat, until
// Shutdown.
func (l *loop) run() {
	defer l.s.wg.Done()
	defer l.stop()
	runtime.LockOSThread() // the loop is a thread of its own, as in Redis
	defer runtime.UnlockOSThread()
	for {
		n := l.wait()
		if l.s.closing.Load() {
			l.handOffAll()
			return
		}
		for i := range n {
			fd := l.events[i].Fd
			if int(fd) == l.wake {
				var b [8]byte
				syscall.Read(l.wake, b[:])
				continue
			}
			l.mu.Lock()
			c := l.conns[fd]
			l.mu.Unlock()
			if c != nil {
				l.serve(c)
			}
		}
		if l.s.opts.IdleTimeout > 0 {
			l.sweepIdle()
		}
	}
}

// wait returns the number of ready events. It first waits by a raw system
// call, which the Go scheduler does not see: under load (the last wait
// found events) for up to 1 ms when GOMAXPROCS leaves other Ps to the rest
// of the program, else without blocking. Only when that finds nothing does
// it block in epoll_wait through the scheduler, which then runs other
// goroutines on this P. Waking from a raw wait costs no scheduler work,
// which is most of what a request costs beyond the kernel's; the price is
// that this P is held for up to 1 ms while the loop is busy, so a
// stop-the-world pause may wait that long for it.
func (l *loop) wait() int {
	ev := uintptr(unsafe.Pointer(&l.events[0]))
	busyWait := 0
	if l.busy && l.spareP {
		busyWait = 1 // ms
	}
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.ep), ev, uintptr(len(l.events)), uintptr(busyWait), 0, 0)
	if e == 0 && r > 0 {
		l.busy = true
		return int(r)
	}
	l.busy = false
	timeout := -1
	if t := l.s.opts.IdleTimeout; t > 0 {
		timeout = int(min(t/2, time.Second) / time.Millisecond)
	}
	for {
		r, _, e = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.ep), ev, uintptr(len(l.events)), uintptr(timeout), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 { // not expected on a valid epoll descriptor; do not spin on it
			l.s.warn.Error().Err(e).Msg("epoll_wait failed; retrying in 10ms")
			time.Sleep(10 * time.Millisecond)
			return 0
		}
		return int(r)
	}
}

// serve answers what a ready connection sent: one read, the complete
// requests in it, one write.
func (l *loop) serve(c *conn) {
	defer func() {
		if r := recover(); r != nil {
			c.panicked(r)
			l.handOff(c)
		}
	}()
	buf := c.p.space()
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	switch {
	case e == syscall.EAGAIN || e == syscall.EINTR:
		return
	case e != 0 || n == 0: // reset, or the client closed: no reply can reach it
		l.drop(c)
		return
	}
	c.p.wrote(int(n))
	if c.runInLoop() && c.writeNoWait() {
		return
	}
	l.handOff(c)
}

// writeNoWait sends the pending replies without blocking and reports
// whether all of them left; what is left stays in c.out.
func (c *conn) writeNoWait() bool {
	out := c.out
	for len(out) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)))
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0: // EAGAIN, or an error the goroutine will meet again
			c.out = out
			return false
		}
		out = out[n:]
	}
	c.sent()
	return true
}

// detach takes c out of the loop.
func (l *loop) detach(c *conn) {
	syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, c.fd, nil)
	l.mu.Lock()
	delete(l.conns, int32(c.fd))
	l.mu.Unlock()
}

// drop closes a connection whose client is gone.
func (l *loop) drop(c *conn) {
	l.detach(c)
	syscall.Close(c.fd)
	c.fd = -1
	l.s.forget(c)
	l.s.log.Debug().Str("addr", c.addr).Uint64("client_id", c.id).Msg("connection closed")
	l.s.wg.Done()
}

// handOff moves c out of the loop into a goroutine of its own, which runs
// c.resume (the request that could not run at once), the rest of the
// buffered requests, and serves the connection from then on.
func (l *loop) handOff(c *conn) {
	l.detach(c)
	f := os.NewFile(uintptr(c.fd), "")
	nc, err := net.FileConn(f) // a duplicate, in the Go poller
	f.Close()
	c.fd = -1
	if err != nil {
		l.s.warn.Warn().Err(err).Str("addr", c.addr).Msg("cannot hand a connection to a goroutine; closing it")
		l.s.forget(c)
		l.s.wg.Done()
		return
	}
	l.s.mu.Lock()
	c.nc = nc
	l.s.mu.Unlock()
	l.s.stats.handOffs.Add(1)
	go l.s.serveConn(c)
}

// handOffAll runs at Shutdown: every connection goes to a goroutine, which
// sees the server closing and closes it gracefully.
func (l *loop) handOffAll() {
	l.mu.Lock()
	cs := make([]*conn, 0, len(l.conns))
	for _, c := range l.conns {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		l.handOff(c)
	}
}

// sweepIdle closes connections that sent no complete request for
// IdleTimeout, at most once a second.
func (l *loop) sweepIdle() {
	now := time.Now()
	if now.Before(l.sweep) {
		return
	}
	t := l.s.opts.IdleTimeout
	l.sweep = now.Add(min(t/2, time.Second))
	l.mu.Lock()
	var idle []*conn
	for _, c := range l.conns {
		if now.UnixNano()-c.active.Load() > int64(t) {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		l.s.log.Debug().Str("addr", c.addr).Uint64("client_id", c.id).Dur("idle_timeout", t).Msg("idle timeout")
		c.quit = true
		l.handOff(c)
	}
}
