package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/testcert"
	"github.com/flaked/flaked/node"
)

// testGen is a node.Generator over the real flake.Generator (node's own
// implementation needs Redis and a lease; the server needs neither).
type testGen struct {
	g        *flake.Generator
	notReady atomic.Bool
	panics   atomic.Bool // the next NextID panics

	refuseEvery, tries atomic.Int64
	given              atomic.Uint64 // IDs the generator handed out, by any method
}

var _ node.TryGenerator = (*testGen)(nil)

func (t *testGen) NextID(ctx context.Context) (uint64, error) {
	if t.panics.CompareAndSwap(true, false) {
		panic("testGen: asked to panic")
	}
	id, err := t.g.NextIDContext(ctx)
	if err == nil {
		t.given.Add(1)
	}
	return id, err
}
func (t *testGen) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	n, err := t.g.NextIDs(ctx, dst)
	t.given.Add(uint64(n))
	return n, err
}

// TryNextIDs is what the event loops call; every refuseEvery-th call says
// no, so the connection is handed to a goroutine that calls NextIDs.
func (t *testGen) TryNextIDs(dst []uint64) bool {
	if t.panics.CompareAndSwap(true, false) {
		panic("testGen: asked to panic")
	}
	if n := t.refuseEvery.Load(); n > 0 && t.tries.Add(1)%n == 0 {
		return false
	}
	ok := t.g.TryNextIDs(dst)
	if ok {
		t.given.Add(uint64(len(dst)))
	}
	return ok
}
func (t *testGen) Mode() node.Mode      { return node.ModeFlake }
func (t *testGen) Layout() flake.Layout { return t.g.Layout() }
func (t *testGen) Ready() bool          { return !t.notReady.Load() }
func (t *testGen) Info() [][2]string {
	return [][2]string{{"machine_ids", "1"}, {"machine_id_list", "1"}}
}
func (t *testGen) Close(context.Context) error { t.g.Close(); return nil }

// testMachine is the machine ID of test generators. Their layout has 16
// sequence bits, so tests never wait for the clock.
const testMachine = 1

func newTestGen(t testing.TB) *testGen {
	g, err := flake.New(flake.Settings{BitsSequence: 16, BitsMachineID: 8, MachineID: testMachine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &testGen{g: g}
}

// testLoops is Options.Loops for tests that leave it 0: from
// FLAKED_TEST_LOOPS, so scripts/test runs the package once with event
// loops (the default) and once with a goroutine per connection (-1).
var testLoops, _ = strconv.Atoi(os.Getenv("FLAKED_TEST_LOOPS"))

// testServer is a server on 127.0.0.1:0.
type testServer struct {
	*Server
	gen   *testGen
	addr  string
	port  string
	serve chan error // Serve's result
}

func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	gen := newTestGen(t)
	if opts.Loops == 0 { // before New, which would take 0 for the default
		opts.Loops = testLoops
	}
	s, err := New(gen, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, gen: gen, addr: ln.Addr().String(), serve: make(chan error, 1)}
	_, ts.port, _ = net.SplitHostPort(ts.addr)
	go func() { ts.serve <- s.Serve(ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	return ts
}

// shutdown stops the server and checks that Serve returned nil. It may be
// called more than once.
func (ts *testServer) shutdown(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case err, ok := <-ts.serve:
		if ok && err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
		if ok {
			close(ts.serve)
		}
	case <-ctx.Done():
		t.Errorf("Serve did not return after Shutdown")
	}
}

func (ts *testServer) client(t testing.TB, opts *redis.Options) *redis.Client {
	t.Helper()
	if opts == nil {
		opts = &redis.Options{}
	}
	opts.Addr = ts.addr
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// rawConn is a client that writes bytes and reads RESP replies, as nc.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func (ts *testServer) dial(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write %.40q: %v", s, err)
	}
}

func (c *rawConn) read() string {
	c.t.Helper()
	r, err := readReply(c.r)
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	return r
}

// do sends one request and returns its reply.
func (c *rawConn) do(req string) string {
	c.t.Helper()
	c.send(req)
	return c.read()
}

// expectEOF checks the server closed the connection with nothing more.
func (c *rawConn) expectEOF() {
	c.t.Helper()
	b, err := io.ReadAll(c.r)
	if len(b) > 0 || err != nil {
		c.t.Fatalf("want EOF, got %q, %v", b, err)
	}
}

// resp encodes a request as a RESP array of bulk strings.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply reads one RESP2 or RESP3 reply and renders it as text: +OK,
// -ERR ..., :42, $bulk, (nil) (RESP2's null), [a, b]; RESP3's _ (null),
// {k: v, ...} (map), ~[a, b] (set), =txt:text (verbatim), ,1.5 (double),
// #t (boolean).
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") || len(line) < 3 {
		return "", fmt.Errorf("malformed reply line %q", line)
	}
	line = line[:len(line)-2]
	switch line[0] {
	case '+', '-', ':', ',', '#':
		return line, nil
	case '_':
		if line != "_" {
			return "", fmt.Errorf("malformed null %q", line)
		}
		return line, nil
	case '$', '=':
		return readBulk(r, line)
	case '*', '~', '%':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad aggregate length %q", line)
		}
		if n < 0 && line[0] == '*' {
			return "(nil)", nil
		}
		if n < 0 {
			return "", fmt.Errorf("bad aggregate length %q", line)
		}
		return readAggregate(r, line[0], n)
	}
	return "", fmt.Errorf("unknown reply type %q", line)
}

// readBulk reads the body of a bulk ($) or verbatim (=) string.
func readBulk(r *bufio.Reader, line string) (string, error) {
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return "", fmt.Errorf("bad bulk length %q", line)
	}
	if n < 0 && line[0] == '$' {
		return "(nil)", nil
	}
	if n < 0 || line[0] == '=' && n < 4 {
		return "", fmt.Errorf("bad length %q", line)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	if string(b[n:]) != "\r\n" {
		return "", fmt.Errorf("bulk without CRLF: %q", b)
	}
	if line[0] == '=' && b[3] != ':' {
		return "", fmt.Errorf("verbatim string without a format: %q", b)
	}
	return line[:1] + string(b[:n]), nil
}

// readAggregate reads n elements of an array (*), set (~) or map (%: n
// pairs).
func readAggregate(r *bufio.Reader, typ byte, n int) (string, error) {
	count := n
	if typ == '%' {
		count = 2 * n
	}
	elems := make([]string, count)
	var err error
	for i := range elems {
		if elems[i], err = readReply(r); err != nil {
			return "", err
		}
	}
	switch typ {
	case '%':
		pairs := make([]string, n)
		for i := range pairs {
			pairs[i] = elems[2*i] + ": " + elems[2*i+1]
		}
		return "{" + strings.Join(pairs, ", ") + "}", nil
	case '~':
		return "~[" + strings.Join(elems, ", ") + "]", nil
	}
	return "[" + strings.Join(elems, ", ") + "]", nil
}

// checkServes checks that a new client is served.
func (ts *testServer) checkServes(t testing.TB) {
	t.Helper()
	c := ts.dial(t)
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Fatalf("PING on a new connection: %q", got)
	}
	if got := c.do(resp("NEXTID")); !strings.HasPrefix(got, ":") {
		t.Fatalf("NEXTID on a new connection: %q", got)
	}
	c.nc.Close()
}

func TestNew_InvalidOptions(t *testing.T) {
	gen := newTestGen(t)
	for _, o := range []Options{
		{MaxConns: -1}, {MaxConns: MaxMaxConns + 1}, {MaxBatch: -5}, {MaxLine: 10},
		{MaxBulk: MaxMaxBulk + 1}, {MaxArgs: 2}, {IdleTimeout: -time.Second}, {Loops: -2}, {Loops: MaxLoops + 1},
	} {
		_, err := New(gen, o)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "valid range") && !strings.Contains(err.Error(), ">= 0") {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions naming the range", o, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(nil) = %v", err)
	}
}

func TestMaxConns_ExtraClientRefused(t *testing.T) {
	ts := startServer(t, Options{MaxConns: 2})
	a, b := ts.dial(t), ts.dial(t)
	for _, c := range []*rawConn{a, b} {
		if got := c.do("PING\r\n"); got != "+PONG" {
			t.Fatal(got)
		}
	}
	c := ts.dial(t)
	c.send("PING\r\n")
	if got := c.read(); got != "-ERR max number of clients reached" {
		t.Fatalf("third client: %q", got)
	}
	c.expectEOF()
	if got := ts.stats.rejected.Load(); got != 1 {
		t.Errorf("rejected = %d", got)
	}
	// The two served clients are unaffected, and a slot that frees up is
	// given to the next client.
	if got := a.do(resp("NEXTID")); !strings.HasPrefix(got, ":") {
		t.Fatal(got)
	}
	b.do(resp("QUIT"))
	b.expectEOF()
	poll.UntilNil(t, 5*time.Second, "a slot after a client left", func() error {
		d := ts.dial(t)
		d.send("PING\r\n")
		if got, err := readReply(d.r); got != "+PONG" {
			return fmt.Errorf("%q, %v", got, err)
		}
		return nil
	})
}

func TestIdleTimeout_ClosesIdleConnections(t *testing.T) {
	ts := startServer(t, Options{IdleTimeout: 200 * time.Millisecond})
	idle, busy := ts.dial(t), ts.dial(t)
	// Before the request: the server's timeout runs from when it read it,
	// which is later.
	start := time.Now()
	idle.do("PING\r\n")
	closed := make(chan error, 1)
	go func() {
		b, err := io.ReadAll(idle.r)
		if err == nil && len(b) > 0 {
			err = fmt.Errorf("got %q before EOF", b)
		}
		closed <- err
	}()
	// busy talks without a pause until idle is closed, and stays open.
	for {
		if got := busy.do("PING\r\n"); got != "+PONG" {
			t.Fatalf("busy client: %q", got)
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("idle client: %v", err)
			}
			if waited := time.Since(start); waited < 200*time.Millisecond {
				t.Errorf("closed after %v, before the idle timeout", waited)
			}
			if got := busy.do("PING\r\n"); got != "+PONG" {
				t.Fatalf("busy client after the idle one closed: %q", got)
			}
			return
		default:
		}
	}
}

func TestIdleTimeout_ZeroKeepsConnections(t *testing.T) {
	ts := startServer(t, Options{})
	c, other := ts.dial(t), ts.dial(t)
	id := strings.TrimPrefix(c.do(resp("CLIENT", "ID")), ":")
	// Until the server itself reports c idle for a second (CLIENT LIST
	// idle=1), longer than any timeout a sweep would apply.
	poll.UntilNil(t, 10*time.Second, "c idle for a second", func() error {
		list := other.do(resp("CLIENT", "LIST", "ID", id))
		if !strings.Contains(list, " idle=1 ") && !strings.Contains(list, " idle=2 ") {
			return fmt.Errorf("CLIENT LIST: %q", list)
		}
		return nil
	})
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Fatal(got)
	}
}

func TestShutdown_ServeReturnsNilAndIdleClientsClose(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, nil)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	idle := ts.dial(t)
	idle.do("PING\r\n")
	start := time.Now()
	ts.shutdown(t)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v with idle clients", d)
	}
	idle.expectEOF()
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

// A client streams pipelined NEXTIDs while the server shuts down: every
// reply it receives is whole, the IDs increase, and then the stream ends.
func TestShutdown_PipelinedClientGetsCompleteReplies(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer: batches of 100 requests until the server goes
		defer wg.Done()
		batch := strings.Repeat(resp("NEXTID"), 100)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := io.WriteString(c.nc, batch); err != nil {
				return
			}
		}
	}()
	var replies int
	var last uint64
	shut := make(chan struct{})
	for {
		line, err := c.r.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil {
			t.Fatalf("after %d replies: %v (partial %q)", replies, err, line)
		}
		if !strings.HasPrefix(line, ":") || !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("reply %d: %q", replies, line)
		}
		id, err := strconv.ParseUint(line[1:len(line)-2], 10, 64)
		if err != nil || id <= last {
			t.Fatalf("reply %d: %q after %d", replies, line, last)
		}
		last = id
		if replies++; replies == 20000 {
			go func() {
				defer close(shut)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := ts.Shutdown(ctx); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			}()
		}
	}
	close(stop)
	wg.Wait()
	<-shut
	if replies < 20000 {
		t.Fatalf("only %d replies", replies)
	}
	t.Logf("%d whole replies, then the connection closed", replies)
}

func TestShutdown_ContextEndsFirst(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	c.do("PING\r\n")
	// A client that never reads sends, in one write, requests whose
	// replies (about 20 MB) are more than the loopback's socket buffers
	// hold (tcp_rmem and tcp_wmem at most 6 and 4 MB). Requests read before
	// Shutdown still run, so once the first has, the connection cannot
	// finish: Shutdown gives up when ctx ends and closes it.
	before := ts.commandsProcessed()
	c.send(strings.Repeat(resp("NEXTIDS", "10000"), 100))
	poll.UntilNil(t, 10*time.Second, "the first NEXTIDS run", func() error {
		if ts.commandsProcessed() == before {
			return errors.New("none run yet")
		}
		return nil
	})
	// Longer than the linger a client that reads nothing costs anyway
	// (lingerClose): with small replies Shutdown returns nil within it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*lingerTimeout)
	defer cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
}

func TestPanic_RecoveredOnItsConnection(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Fatal(got)
	}
	ts.gen.panics.Store(true)
	// The reply of the request before the panic still arrives.
	c.send("PING\r\nNEXTID\r\nPING\r\n")
	if got := c.read(); got != "+PONG" {
		t.Fatalf("before the panic: %q", got)
	}
	if got := c.read(); !strings.HasPrefix(got, "-ERR internal server error") {
		t.Fatalf("the panicking request: %q", got)
	}
	c.expectEOF()
	ts.checkServes(t)
}

func TestTLS(t *testing.T) {
	cert := testcert.SelfSigned(t)
	ts := startServer(t, Options{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}})
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	rdb := ts.client(t, &redis.Options{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	id, err := rdb.Do(context.Background(), "NEXTID").Int64()
	if err != nil || id <= 0 {
		t.Fatalf("NEXTID over TLS: %d, %v", id, err)
	}
	// A client that does not speak TLS is dropped, and the server goes on.
	c := ts.dial(t)
	c.send("PING\r\n")
	if b, _ := io.ReadAll(c.r); strings.Contains(string(b), "PONG") {
		t.Fatalf("plain-text client answered: %q", b)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}
