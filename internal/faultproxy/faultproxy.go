// Package faultproxy is a TCP proxy for fault tests: it stands between a
// node and redis-server (or a replica and its master) on loopback, and
// cuts, holds or redirects what passes through, so a test can lose a
// replication link for real (a paused replica still reads what the kernel
// buffered) or make nodes find a new master at different moments. It
// listens on 127.0.0.1 only, refuses targets off loopback, and closes
// with the test.
package faultproxy

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Proxy forwards every connection accepted on Addr to its target.
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	cut    bool                  // refuse new connections until Heal
	conns  map[net.Conn]net.Conn // client side -> server side, open pairs
	closed bool
	wg     sync.WaitGroup
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
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}}
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
	tb.Cleanup(func() { p.Close() })
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

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// Cut closes every open connection, both sides, and closes each new one at
// once until Heal: a link cut for real.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.dropAll()
}

// Heal lets new connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Redirect sends new connections to target and cuts the open ones, so
// clients reconnect there: a failover behind a proxy or a DNS name.
func (p *Proxy) Redirect(target string) {
	if err := loopback(target); err != nil {
		panic(err) // a test bug, not a fault to inject
	}
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.dropAll()
}

func (p *Proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, s := range p.conns {
		c.Close()
		s.Close()
		delete(p.conns, c)
	}
}

// Close stops the proxy and every connection through it, and waits for
// its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.dropAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		target, refuse := p.target, p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed || p.cut || p.target != target {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c] = s
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, s, c)
		go p.pipe(s, c, c)
	}
}

// pipe copies src to dst until either side closes or fails, then closes
// both, so the peer sees the cut.
func (p *Proxy) pipe(dst, src net.Conn, key net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.conns[key]; ok {
		key.Close()
		s.Close()
		delete(p.conns, key)
	}
}
