// Package faultproxy is a TCP proxy for fault tests: it stands between a
// node and redis-server (or a replica and its master) on loopback, and
// cuts, holds, delays or redirects what passes through, so a test can lose
// a replication link for real (a paused replica still reads what the
// kernel buffered) or make nodes find a new master at different moments.
//
// It listens on 127.0.0.1 only and refuses targets off loopback, so a
// fault test can never reach past the machine it runs on; Start closes it
// with the test, so no fault outlives the test that injected it.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// closeTimeout bounds Close: every goroutine returns once its
	// connections are closed, so waiting longer would only hide a leak.
	closeTimeout = 10 * time.Second
	dialTimeout  = 5 * time.Second
	// queued chunks per direction: beyond them the reader stops, the
	// kernel buffers fill and the sender blocks, as over a slow link.
	queueLen  = 64
	chunkSize = 32 << 10
)

// Proxy forwards every connection accepted on Addr to its target.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // cancelled by Close, so no dial outlives it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	delay  atomic.Int64 // time.Duration

	mu         sync.Mutex
	target     string
	cut        bool // refuse new connections until Heal
	blackholed bool // hold new connections until Heal
	closed     bool
	links      map[*link]struct{}

	accepted, dropped, toTarget, fromTarget atomic.Int64
}

// Stats counts what went through a Proxy.
type Stats struct {
	Accepted int64 // connections accepted on Addr
	// Cut counts connections closed as a fault: open ones dropped by Cut,
	// Redirect or the Heal after a Blackhole, and new ones refused while
	// cut. Close and connections that end by themselves do not count.
	Cut        int64
	ToTarget   int64 // bytes delivered to the target
	FromTarget int64 // bytes delivered back to clients
}

// link is one client connection and, once dialled, its target connection.
type link struct {
	client, server net.Conn    // server: nil until dialled, for good if accepted in a blackhole
	held           atomic.Bool // blackholed: deliver nothing until closed
	done           chan struct{}
}

type chunk struct {
	b   []byte
	due time.Time
}

// New starts a proxy to target, which must be a loopback address.
func New(target string) (*Proxy, error) {
	if err := loopback(target); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New, failing tb, closed when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
	})
	return p
}

func loopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("faultproxy: target %q: %w", hostport, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("faultproxy: target %q is not a loopback address", hostport)
	}
	return nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Cut: p.dropped.Load(),
		ToTarget: p.toTarget.Load(), FromTarget: p.fromTarget.Load()}
}

// Cut closes every open connection, both sides, and closes each new one at
// once until Heal: a link cut for real.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.dropAll(func(*link) bool { return true }, true)
}

// Blackhole delivers nothing more, either way, on open or new connections,
// and closes none of them: packets vanish and both ends wait, as in a
// partition. Until Heal, what arrives is held; new connections never
// reach the target.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = true
	for l := range p.links {
		l.held.Store(true)
	}
}

// Heal lets new connections through again. Connections held by Blackhole
// are closed and what they held is dropped: a TCP connection does not
// survive a long partition, and delivering stale bytes would be a fault
// no network makes.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.blackholed = false, false
	p.dropAll(func(l *link) bool { return l.held.Load() }, true)
}

// SetDelay delivers every chunk read from either side d after it was read,
// in order; 0 turns the delay off.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// Redirect sends new connections to target and cuts the open ones, so
// clients reconnect there: a failover behind a proxy or a DNS name. A
// target off loopback panics: it is a bug in the test, not a fault.
func (p *Proxy) Redirect(target string) {
	if err := loopback(target); err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	p.dropAll(func(*link) bool { return true }, true)
}

// Close stops the proxy and every connection through it, and waits for
// its goroutines. Calling it again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.dropAll(func(*link) bool { return true }, false)
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		return fmt.Errorf("faultproxy: goroutines still running %v after Close", closeTimeout)
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// dropAll closes the links that match; p.mu must be held.
func (p *Proxy) dropAll(match func(*link) bool, fault bool) {
	for l := range p.links {
		if match(l) {
			p.dropLocked(l, fault)
		}
	}
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(l, false)
}

// dropLocked closes both sides of l once; p.mu must be held, which also
// orders it with the dial that sets l.server.
func (p *Proxy) dropLocked(l *link, fault bool) {
	if _, ok := p.links[l]; !ok {
		return
	}
	delete(p.links, l)
	if fault {
		p.dropped.Add(1)
	}
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
	close(l.done)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.mu.Lock()
		switch {
		case p.closed:
			c.Close()
		case p.cut:
			p.dropped.Add(1)
			c.Close()
		default:
			// Registered before the dial, so a Cut or Redirect meanwhile
			// closes it too.
			l := &link{client: c, done: make(chan struct{})}
			p.links[l] = struct{}{}
			if p.blackholed {
				l.held.Store(true) // the kernel holds its bytes; Heal closes it
				break
			}
			p.wg.Add(1)
			go p.serve(l, p.target)
		}
		p.mu.Unlock()
	}
}

func (p *Proxy) serve(l *link, target string) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	s, err := d.DialContext(p.ctx, "tcp", target)
	if err != nil {
		p.drop(l) // the client sees the target down, as without a proxy
		return
	}
	p.mu.Lock()
	if _, ok := p.links[l]; !ok {
		p.mu.Unlock()
		s.Close() // cut while dialling
		return
	}
	l.server = s
	p.wg.Add(2)
	p.mu.Unlock()
	go p.forward(l, s, l.client, &p.toTarget)
	go p.forward(l, l.client, s, &p.fromTarget)
}

// forward copies src to dst through a queue, so a delay holds bytes in
// flight without slowing the reads behind them. When either side ends,
// both are closed, so the peer sees it.
func (p *Proxy) forward(l *link, dst, src net.Conn, count *atomic.Int64) {
	defer p.wg.Done()
	q := make(chan chunk, queueLen)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(q)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{b: append([]byte(nil), buf[:n]...),
					due: time.Now().Add(time.Duration(p.delay.Load()))}
				select {
				case q <- c:
				case <-l.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer p.drop(l)
	for c := range q {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if l.held.Load() {
			<-l.done // Heal, Cut, Redirect or Close drops what is held
			return
		}
		n, err := dst.Write(c.b)
		count.Add(int64(n))
		if err != nil {
			return
		}
	}
}
