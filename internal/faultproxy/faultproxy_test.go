package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// quiet is how long a test waits to see that nothing arrives. Load can
// only make delivery later, so a blackhole that held bytes this long is not
// flaky, however slow the machine.
const quiet = 300 * time.Millisecond

// echo serves lines back prefixed with the server's name, and records them.
type echo struct {
	addr  string
	mu    sync.Mutex
	lines []string
}

func startEcho(t *testing.T, name string) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &echo{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.mu.Lock()
					e.lines = append(e.lines, strings.TrimSuffix(line, "\n"))
					e.mu.Unlock()
					if _, err := c.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echo) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// peer hands the test the server side of each connection to its address.
func peer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	t.Cleanup(func() {
		ln.Close()
		for len(conns) > 0 {
			(<-conns).Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	return ln.Addr().String(), conns
}

// next waits for the target's side of the next connection.
func next(t *testing.T, conns <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection reached the target")
		return nil
	}
}

type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// readLine waits up to d for a line.
func (c *client) readLine(d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	return c.r.ReadString('\n')
}

func (c *client) roundTrip(msg string) (string, error) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return c.readLine(5 * time.Second)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// mustBeClosed fails unless c was closed: an error, not a timeout.
func (c *client) mustBeClosed(t *testing.T, what string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("after\n")) // may fail already (reset), or reach a closed socket
	if got, err := c.readLine(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("%s: read %q, %v; want the connection closed", what, got, err)
	}
}

func TestForwardBothWays(t *testing.T) {
	t.Parallel()
	addr, conns := peer(t)
	p := Start(t, addr)
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("up\n")); err != nil {
		t.Fatal(err)
	}
	s := next(t, conns)
	s.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(s).ReadString('\n'); err != nil || got != "up\n" {
		t.Fatalf("target read %q, %v", got, err)
	}
	if _, err := s.Write([]byte("down!\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := c.readLine(5 * time.Second); err != nil || got != "down!\n" {
		t.Fatalf("client read %q, %v", got, err)
	}
	poll.Until(t, 10*time.Second, "the byte counts", func() bool {
		st := p.Stats()
		return st == Stats{Accepted: 1, ToTarget: 3, FromTarget: 6}
	})
	s.Close()
	c.mustBeClosed(t, "after the target closed")
}

func TestCutHeal(t *testing.T) {
	t.Parallel()
	e := startEcho(t, "a")
	p := Start(t, e.addr)
	c := dial(t, p.Addr())
	if got, err := c.roundTrip("x"); err != nil || got != "a:x\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Cut()
	c.mustBeClosed(t, "an open connection after Cut")
	// The kernel may complete the handshake before the proxy closes it.
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		(&client{c2, bufio.NewReader(c2)}).mustBeClosed(t, "a new connection while cut")
		c2.Close()
	}
	if st := p.Stats(); st.Cut < 1 {
		t.Fatalf("Stats after Cut: %+v", st)
	}
	p.Heal()
	if got, err := dial(t, p.Addr()).roundTrip("h"); err != nil || got != "a:h\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

func TestBlackholeHolds(t *testing.T) {
	t.Parallel()
	addr, conns := peer(t)
	p := Start(t, addr)
	c := dial(t, p.Addr())
	s := next(t, conns)
	p.Blackhole()
	before := p.Stats()
	if _, err := c.Write([]byte("lost\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("lost too\n")); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(quiet))
	if n, err := s.Read(make([]byte, 64)); !isTimeout(err) {
		t.Fatalf("the target read %d bytes, %v through a blackhole", n, err)
	}
	if got, err := c.readLine(quiet); !isTimeout(err) {
		t.Fatalf("the client read %q, %v through a blackhole", got, err)
	}
	held := dial(t, p.Addr()) // a new connection is held, never dialled
	if got, err := held.readLine(quiet); !isTimeout(err) {
		t.Fatalf("a new connection in a blackhole read %q, %v", got, err)
	}
	if after := p.Stats(); after.ToTarget != before.ToTarget || after.FromTarget != before.FromTarget {
		t.Fatalf("bytes forwarded in a blackhole: %+v, then %+v", before, after)
	}

	p.Heal()
	c.mustBeClosed(t, "a held connection after Heal")
	held.mustBeClosed(t, "a connection made in the blackhole, after Heal")
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := s.Read(make([]byte, 64)); err == nil || isTimeout(err) {
		t.Fatalf("the target read %d bytes, %v; want the held connection closed, its bytes dropped", n, err)
	}
	select {
	case extra := <-conns:
		t.Fatalf("the target got a connection made in the blackhole: %v", extra.RemoteAddr())
	default:
	}
	if _, err := dial(t, p.Addr()).Write([]byte("healed\n")); err != nil {
		t.Fatal(err)
	}
	s = next(t, conns)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(s).ReadString('\n'); err != nil || got != "healed\n" {
		t.Fatalf("a new connection after Heal: the target read %q, %v", got, err)
	}
}

func TestSetDelay(t *testing.T) {
	t.Parallel()
	e := startEcho(t, "a")
	p := Start(t, e.addr)
	c := dial(t, p.Addr())
	const d = 150 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	if got, err := c.roundTrip("slow"); err != nil || got != "a:slow\n" {
		t.Fatalf("delayed: %q, %v", got, err)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip took %v with a delay of %v each way", took, d)
	}

	// Many chunks, each delayed: none may overtake another.
	p.SetDelay(time.Millisecond)
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(' ')
	}
	go c.Write([]byte(b.String() + "\n"))
	if got, err := c.readLine(time.Minute); err != nil || got != "a:"+b.String()+"\n" {
		t.Fatalf("1 MiB with a delay: %d bytes back, %v; reordered or cut", len(got), err)
	}
	p.SetDelay(0)
	if got, err := c.roundTrip("fast"); err != nil || got != "a:fast\n" {
		t.Fatalf("delay off: %q, %v", got, err)
	}
}

func TestRedirect(t *testing.T) {
	t.Parallel()
	a, b := startEcho(t, "a"), startEcho(t, "b")
	p := Start(t, a.addr)
	c := dial(t, p.Addr())
	if got, err := c.roundTrip("x"); err != nil || got != "a:x\n" {
		t.Fatalf("before Redirect: %q, %v", got, err)
	}
	p.Redirect(b.addr)
	c.mustBeClosed(t, "a connection from before Redirect")
	if got, err := dial(t, p.Addr()).roundTrip("r"); err != nil || got != "b:r\n" {
		t.Fatalf("after Redirect: %q, %v; want the new target", got, err)
	}
	if st := p.Stats(); st.Accepted != 2 || st.Cut != 1 {
		t.Fatalf("Stats: %+v; want 2 accepted, 1 cut", st)
	}
	if got := a.seen(); len(got) != 1 || got[0] != "x" {
		t.Fatalf("the old target saw %q", got)
	}
}

// fatalTB records Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"10.0.0.1:6379", "0.0.0.0:6379", "example.com:6379", "[2001:db8::1]:6379", "6379"} {
		if p, err := New(target); err == nil {
			p.Close()
			t.Errorf("New(%q): a proxy off loopback was made", target)
		}
	}
	for _, target := range []string{"127.0.0.1:6379", "[::1]:6379", "localhost:6379"} {
		p, err := New(target)
		if err != nil {
			t.Errorf("New(%q): %v", target, err)
			continue
		}
		p.Close()
	}

	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, "192.168.1.10:6379")
	}()
	<-done
	if !strings.Contains(f.msg, "not a loopback address") {
		t.Fatalf("Start off loopback: Fatal(%q), want a refusal", f.msg)
	}

	p := Start(t, "127.0.0.1:1")
	defer func() {
		if recover() == nil {
			t.Fatal("Redirect off loopback did not panic")
		}
	}()
	p.Redirect("10.0.0.1:6379")
}

// Not parallel: it counts every goroutine in the process.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	e := startEcho(t, "a")
	before := runtime.NumGoroutine()
	p, err := New(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	idle := dial(t, p.Addr())
	if _, err := idle.roundTrip("x"); err != nil {
		t.Fatal(err)
	}
	// A chunk waiting out its delay, a chunk held, a connection held.
	slow := dial(t, p.Addr())
	if _, err := slow.roundTrip("y"); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(time.Hour)
	slow.Write([]byte("slow\n"))
	p.Blackhole()
	idle.Write([]byte("held\n"))
	dial(t, p.Addr())
	time.Sleep(50 * time.Millisecond) // let the proxy read what was written
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	poll.Until(t, 10*time.Second, "goroutines back to "+strconv.Itoa(before), func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestRedis(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	a := redistest.Start(t, redistest.Options{})
	b := redistest.Start(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for s, who := range map[*redistest.Server]string{a: "a", b: "b"} {
		if err := s.Client(t).Set(ctx, "who", who, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	p := Start(t, a.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	get := func() string { return rdb.Get(ctx, "who").Val() }
	if got := get(); got != "a" {
		t.Fatalf("GET through the proxy: %q", got)
	}
	p.Cut()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a cut link succeeded")
	}
	p.Heal()
	poll.Until(t, 10*time.Second, "GET after Heal", func() bool { return get() == "a" })
	p.Redirect(b.Addr())
	poll.Until(t, 10*time.Second, "GET from the new master after Redirect", func() bool { return get() == "b" })
	if st := p.Stats(); st.ToTarget == 0 || st.FromTarget == 0 || st.Cut < 2 {
		t.Fatalf("Stats: %+v", st)
	}
}
