package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// Server serves a node.Generator over the Redis protocol. Create it with
// New, run Serve on one or more listeners, stop it with Shutdown.
type Server struct {
	gen     node.Generator
	tgen    node.TryGenerator // gen, when it can issue without waiting; event loops need it
	opts    Options
	log     zerolog.Logger
	warn    zerolog.Logger // sampled: for what a client can repeat at will
	cmds    map[string]*command
	nextID  *command // cmds["nextid"], looked up first
	stats   stats
	info    infoState // INFO's (cmd_info.go)
	started time.Time

	// An ID's mode is in its machine bits: the counter's machine ID is
	// reserved. Read from the layout once; the layout is fleet-wide.
	machMask, counterMachine uint64

	// ctx bounds the generator calls of commands; it ends when Shutdown
	// gives up waiting.
	ctx    context.Context
	cancel context.CancelFunc

	closing atomic.Bool
	port    atomic.Int64
	nextCID atomic.Uint64

	mu         sync.Mutex // guards listeners, conns, loops, conn.nc, and wg.Add against Shutdown's Wait
	listeners  map[net.Listener]struct{}
	conns      map[*conn]struct{}
	loops      []*loop // started with the first connection that can use one
	loopsTried bool
	wg         sync.WaitGroup
}

// New returns a server for gen. It checks opts and fills in the defaults.
func New(gen node.Generator, opts Options) (*Server, error) {
	if gen == nil {
		return nil, fmt.Errorf("%w: nil generator", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	layout := gen.Layout()
	s := &Server{
		gen:            gen,
		opts:           opts,
		log:            opts.Logger,
		warn:           opts.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: time.Second}),
		cmds:           commandTable(),
		started:        time.Now(),
		machMask:       1<<layout.BitsMachineID - 1,
		counterMachine: uint64(layout.CounterMachineID()),
		listeners:      map[net.Listener]struct{}{},
		conns:          map[*conn]struct{}{},
	}
	s.tgen, _ = gen.(node.TryGenerator)
	s.nextID = s.cmds["nextid"]
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// layout is the generator's layout (fixed for the life of the fleet).
func (s *Server) layout() flake.Layout { return s.gen.Layout() }

// Serve accepts connections on ln and serves each in its own goroutine,
// until Shutdown (then it returns nil) or a permanent accept error. When
// Options.TLSConfig is set, connections speak TLS. Serve closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port.Store(int64(a.Port))
	}
	if s.opts.TLSConfig != nil {
		ln = tls.NewListener(ln, s.opts.TLSConfig)
	}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	s.log.Info().Str("addr", ln.Addr().String()).Bool("tls", s.opts.TLSConfig != nil).Msg("serving the Redis protocol")

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			if !temporary(err) {
				return fmt.Errorf("server: accept on %s: %w", ln.Addr(), err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.warn.Warn().Err(err).Dur("retry_in", backoff).Msg("accept failed")
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.admit(nc)
	}
}

// temporary reports whether an accept error may go away by itself (a
// timeout, out of file descriptors or buffers, a connection aborted
// before it was accepted).
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// admit starts serving nc, or turns it away when the server is full or
// shutting down.
func (s *Server) admit(nc net.Conn) {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.wg.Add(1)
	if len(s.conns) >= s.opts.MaxConns {
		s.mu.Unlock()
		s.stats.rejected.Add(1)
		s.warn.Warn().Str("addr", nc.RemoteAddr().String()).Int("max_conns", s.opts.MaxConns).Msg("max number of clients reached; connection refused")
		go s.reject(nc)
		return
	}
	c := newConn(s, nc)
	s.log.Debug().Str("addr", c.addr).Uint64("client_id", c.id).Msg("connection accepted")
	s.conns[c] = struct{}{}
	s.stats.conns.Add(1)
	s.stats.connsTotal.Add(1)
	if !s.loopsTried && s.useLoops() {
		s.loopsTried = true
		if err := s.startLoops(); err != nil {
			s.log.Warn().Err(err).Msg("cannot start event loops; serving a goroutine per connection")
		}
	}
	// Adopted under mu, so Shutdown finds the connection in its loop.
	adopted := s.adopt(c)
	s.mu.Unlock()
	if !adopted {
		go s.serveConn(c)
	}
}

// reject tells a client over MaxConns why it is turned away, as Redis does.
func (s *Server) reject(nc net.Conn) {
	defer s.wg.Done()
	nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := nc.Write([]byte("-ERR max number of clients reached\r\n")); err != nil {
		nc.Close()
		return
	}
	lingerClose(nc, 250*time.Millisecond)
}

// useLoops reports whether connections go to event loops: on Linux, with
// Options.Loops > 0, without TLS, and with a generator that can issue
// without waiting.
func (s *Server) useLoops() bool {
	return loopsSupported && s.opts.Loops > 0 && s.opts.TLSConfig == nil && s.tgen != nil
}

// numLoops is the number of event loops running.
func (s *Server) numLoops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loops)
}

// forget removes a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.stats.conns.Add(-1)
}

// Shutdown stops the server: it closes the listeners (Serve returns nil),
// lets every connection finish the requests it has read and flush their
// replies, closes the connections, and returns when all are done. When ctx
// ends first it closes what is left at once, cancels the commands still
// waiting on the generator, and returns ctx's error. It does not close the
// generator.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing.Swap(true) {
		s.log.Info().Int("connections", len(s.conns)).Msg("shutting down")
	}
	for ln := range s.listeners {
		ln.Close()
	}
	// Wake connections blocked reading; see conn.serve for why this cannot
	// be missed.
	for c := range s.conns {
		if c.nc != nil { // nil: in an event loop, which hands it off now
			c.nc.SetReadDeadline(time.Unix(1, 0))
		}
	}
	for _, l := range s.loops {
		l.wakeUp()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		if c.nc != nil {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	return fmt.Errorf("server: shutdown: %w", ctx.Err())
}
