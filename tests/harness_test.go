// Package tests is the fleet fault suite: real redis-server processes and
// built flaked binaries on loopback addresses, load from many connections,
// faults injected, and every ID issued checked.
package tests

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// binary is the flaked binary built once for the suite.
var binary string

// long is set by scripts/fleet-test --long: 10x the IDs, every fault
// repeated.
var long = os.Getenv("FLAKED_FLEET_LONG") == "1"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("-short: the fleet suite needs built flaked binaries and redis-server (the full suite runs it: scripts/test)")
		os.Exit(0)
	}
	// go-redis's log lines about failed dials to daemons and servers the
	// tests stopped on purpose are dropped.
	redis.SetLogger(idtest.QuietRedis{})
	dir, err := os.MkdirTemp("", "flaked-fleet-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Daemons started without state flags keep their default state file
	// here, not in the machine's /var/lib/flaked or $HOME.
	os.Setenv("STATE_DIRECTORY", filepath.Join(dir, "state"))
	if binary, err = daemontest.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := daemontest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// scale is how many IDs a test collects, times 10 in the long run.
func scale(n int) int {
	if long {
		return 10 * n
	}
	return n
}

// Daemon is one flaked process (restartable: same name, listen port,
// state file).
type Daemon struct {
	Name      string
	Port      int
	Metrics   int
	StateFile string
	Args      []string // extra serve flags
	Bin       string   // the flaked binary; "" for the one built for the suite

	// DefaultStateFile, with StateFile "", gives no state flag: serve's
	// default state file (in the suite's $STATE_DIRECTORY). Otherwise an
	// empty StateFile is --no-state-file.
	DefaultStateFile bool

	t    testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *idtest.LogBuffer
	exit chan error
	inc  atomic.Int64 // incarnation: bumped at every start
	down atomic.Bool
}

// NewDaemon describes a daemon; Start runs it.
func NewDaemon(t testing.TB, name, redisURL string, extra ...string) *Daemon {
	t.Helper()
	d := &Daemon{Name: name, Port: redistest.FreePort(t), Metrics: redistest.FreePort(t),
		StateFile: filepath.Join(t.TempDir(), name+".state"), t: t}
	d.Args = append([]string{"--redis", redisURL}, extra...)
	d.down.Store(true)
	t.Cleanup(func() { d.Kill() })
	return d
}

func (d *Daemon) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)) }

// args are the full command line of serve.
func (d *Daemon) args() []string {
	a := []string{"serve", "--listen", d.Addr(), "--metrics-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Metrics)),
		"--log-format", "json"}
	switch {
	case d.StateFile != "":
		a = append(a, "--state-file", d.StateFile)
	case !d.DefaultStateFile:
		a = append(a, "--no-state-file")
	}
	if !slices.Contains(d.Args, "--mode") {
		// The suite's faults aim at leases and reservations: a daemon runs
		// flake mode unless its test names a mode (the daemon's own default
		// with Redis is auto, which would hide a flake gap behind counter IDs).
		a = append(a, "--mode", "flake")
	}
	return append(a, d.Args...)
}

// Start runs the daemon and waits until it answers PING (not until it is
// ready: a node in counter mode with Redis away still answers).
func (d *Daemon) Start() error {
	if err := d.startNoWait(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-d.exit:
			d.cmd = nil
			return fmt.Errorf("%s exited at start: %v\n%s", d.Name, err, d.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", d.Addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			d.down.Store(false)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen within 20s\n%s", d.Name, d.log.String())
}

// startNoWait launches the process.
func (d *Daemon) startNoWait() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return fmt.Errorf("%s already running", d.Name)
	}
	d.inc.Add(1)
	cmd := exec.Command(cmp.Or(d.Bin, binary), d.args()...)
	d.log = &idtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = d.log, d.log
	cmd.Env = append(os.Environ(), "FLAKED_LOG_LEVEL=info")
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd = cmd
	d.exit = make(chan error, 1)
	go func() { d.exit <- cmd.Wait() }()
	return nil
}

// goRedisTB is a go-redis client for d, closed at the end.
func goRedisTB(tb testing.TB, d *Daemon) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second, DisableIdentity: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

// ctxT bounds a test's calls to a daemon or Redis: 10 s.
func ctxT(tb testing.TB) context.Context { return idtest.Context(tb, 10*time.Second) }

// MustStart is Start failing the test.
func (d *Daemon) MustStart() {
	d.t.Helper()
	if err := d.Start(); err != nil {
		d.t.Fatal(err)
	}
}

// Signal sends sig to the process.
func (d *Daemon) Signal(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		_ = d.cmd.Process.Signal(sig)
	}
}

// stop sends sig and waits for the exit (up to wait), then SIGKILL.
func (d *Daemon) stop(sig syscall.Signal, wait time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	d.down.Store(true)
	_ = d.cmd.Process.Signal(syscall.SIGCONT)
	_ = d.cmd.Process.Signal(sig)
	var err error
	select {
	case err = <-d.exit:
	case <-time.After(wait):
		_ = d.cmd.Process.Kill()
		err = fmt.Errorf("%s did not exit within %v of %v; killed", d.Name, wait, sig)
		<-d.exit
	}
	d.cmd = nil
	return err
}

// Kill is kill -9.
func (d *Daemon) Kill() { _ = d.stop(syscall.SIGKILL, 5*time.Second) }

// Term is a graceful stop; it returns the exit error (nil for status 0).
func (d *Daemon) Term() error { return d.stop(syscall.SIGTERM, 15*time.Second) }

// SetArgs replaces the extra serve flags for the next start; load
// goroutines read them concurrently.
func (d *Daemon) SetArgs(args []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Args = args
}

// mayCounter reports whether the daemon's flags allow counter mode.
func (d *Daemon) mayCounter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, a := range d.Args {
		if a == "--mode" && i+1 < len(d.Args) && d.Args[i+1] != "flake" {
			return true
		}
	}
	return false
}

// Log returns the process output so far.
func (d *Daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.log == nil {
		return ""
	}
	return d.log.String()
}

// Info reads INFO into a map.
func (d *Daemon) Info(ctx context.Context) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), Protocol: 2, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, DisableIdentity: true})
	defer c.Close()
	s, err := c.Info(ctx).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// Ready reports whether /readyz answers 200.
func (d *Daemon) Ready() bool {
	c := http.Client{Timeout: time.Second}
	r, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", d.Metrics))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return r.StatusCode == http.StatusOK
}

// WaitReady waits until the daemon says it can issue IDs.
func (d *Daemon) WaitReady(t testing.TB, within time.Duration) {
	t.Helper()
	poll.UntilNil(t, within, d.Name+" ready", func() error {
		if !d.Ready() {
			return fmt.Errorf("not ready\n%s", d.Log())
		}
		return nil
	})
}

// record is one reply: the IDs, in issue order, from one daemon
// incarnation over one connection.
type record struct {
	daemon     string
	mayCounter bool  // the daemon runs in auto or counter mode
	inc        int64 // incarnation; 0 when a restart raced the request
	conn       int
	ids        []uint64
}

// Load drives one kind of request (a Request: NEXTIDS, NEXTBLOCK,
// NEXTSEQ) from many connections and keeps every value the replies hold.
type Load struct {
	mu      sync.Mutex
	recs    []record
	total   atomic.Int64
	errs    atomic.Int64
	lastErr atomic.Pointer[string]
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Request is what each connection of a Load sends, again and again.
type Request struct {
	// Send sends one request on c and returns the values its reply holds,
	// in issue order. An error wrapping errMalformed ends the connection
	// (the daemon broke the protocol); any other is counted and retried.
	// r is the connection's own random source.
	Send func(ctx context.Context, c *redis.Client, r *rand.Rand) ([]uint64, error)
	// ReadTimeout is the client's; a request gets one second more.
	ReadTimeout time.Duration
	// AlternateRESP speaks RESP3 on every other connection, RESP2 on the
	// rest.
	AlternateRESP bool
}

// errMalformed marks a reply no client could read.
var errMalformed = errors.New("malformed reply")

// StartLoad opens perDaemon connections to each daemon, each asking for
// batch IDs per request (NEXTIDS) until Stop.
func StartLoad(daemons []*Daemon, perDaemon, batch int) *Load {
	return startLoad(daemons, perDaemon, 0, nextIDs(batch))
}

// nextIDs is NEXTIDS batch.
func nextIDs(batch int) Request {
	return Request{ReadTimeout: 2 * time.Second, Send: func(ctx context.Context, c *redis.Client, _ *rand.Rand) ([]uint64, error) {
		v, err := c.Do(ctx, "NEXTIDS", batch).Slice()
		if err != nil {
			return nil, err
		}
		ids := make([]uint64, len(v))
		for i, x := range v {
			n, ok := x.(int64)
			if !ok || n < 0 {
				return nil, fmt.Errorf("%w: NEXTIDS reply element %v is not a non-negative integer", errMalformed, x)
			}
			ids[i] = uint64(n)
		}
		return ids, nil
	}}
}

// startLoad opens perDaemon connections to each daemon, numbered from
// firstConn+1, each sending req until Stop.
func startLoad(daemons []*Daemon, perDaemon, firstConn int, req Request) *Load {
	l := &Load{stop: make(chan struct{})}
	conn := firstConn
	for _, d := range daemons {
		for range perDaemon {
			conn++
			l.wg.Add(1)
			go l.run(d, conn, req)
		}
	}
	return l
}

func (l *Load) run(d *Daemon, conn int, req Request) {
	defer l.wg.Done()
	proto := 2
	if req.AlternateRESP {
		proto += conn % 2
	}
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), Protocol: proto, PoolSize: 1, MaxRetries: -1,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: req.ReadTimeout, WriteTimeout: time.Second,
		DisableIdentity: true})
	defer c.Close()
	r := rand.New(rand.NewPCG(uint64(conn), 7))
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if d.down.Load() {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		inc := d.inc.Load()
		ctx, cancel := context.WithTimeout(context.Background(), req.ReadTimeout+time.Second)
		vals, err := req.Send(ctx, c, r)
		cancel()
		if err != nil {
			l.errs.Add(1)
			s := fmt.Sprintf("%s: %v", d.Name, err)
			l.lastErr.Store(&s)
			if errors.Is(err, errMalformed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if d.inc.Load() != inc {
			inc = 0 // the process may have changed under the request
		}
		l.add(record{daemon: d.Name, mayCounter: d.mayCounter(), inc: inc, conn: conn, ids: vals})
	}
}

func (l *Load) add(r record) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
	l.total.Add(int64(len(r.ids)))
}

// Stop ends the load and waits for the connections.
func (l *Load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// WaitFor waits until n more IDs than at the call were collected, printing
// progress every second. It fails the test after within.
func (l *Load) WaitFor(t testing.TB, n int64, within time.Duration, what string) {
	t.Helper()
	start := l.total.Load()
	deadline := time.Now().Add(within)
	next := time.Now().Add(time.Second)
	for l.total.Load()-start < n {
		if time.Now().After(deadline) {
			msg := ""
			if p := l.lastErr.Load(); p != nil {
				msg = "; last error: " + *p
			}
			t.Fatalf("%s: %d of %d IDs within %v (%d errors%s)", what, l.total.Load()-start, n, within, l.errs.Load(), msg)
		}
		if time.Now().After(next) {
			t.Logf("  %s: %d IDs collected (%d so far), %d request errors", what, l.total.Load()-start, l.total.Load(), l.errs.Load())
			next = next.Add(time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Check verifies every ID collected: no duplicate, strictly increasing
// per connection and incarnation. On a duplicate it prints the IDs
// decoded and who issued them.
func (l *Load) Check(t testing.TB, layout flake.Layout) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	type origin struct {
		rec int
		pos int
	}
	var all []uint64
	var from []origin
	// Loads merged into one (Absorb) number their connections alike: the
	// daemon's name tells them apart.
	type stream struct {
		daemon string
		conn   int
		inc    int64
	}
	last := map[stream]uint64{}
	for ri, r := range l.recs {
		key := stream{r.daemon, r.conn, r.inc}
		for i, id := range r.ids {
			if r.inc != 0 {
				if p, ok := last[key]; ok && id <= p {
					t.Errorf("connection %d to %s (incarnation %d): ID %d %+v follows %d %+v: not strictly increasing",
						r.conn, r.daemon, r.inc, id, layout.Decompose(id), p, layout.Decompose(p))
				}
				last[key] = id
			}
			all = append(all, id)
			from = append(from, origin{ri, i})
		}
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return all[idx[a]] < all[idx[b]] })
	dups := 0
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		if all[a] != all[b] {
			continue
		}
		dups++
		if dups <= 10 {
			ra, rb := l.recs[from[a].rec], l.recs[from[b].rec]
			t.Errorf("DUPLICATE ID %d %+v: issued by %s (incarnation %d, connection %d) and by %s (incarnation %d, connection %d)",
				all[a], layout.Decompose(all[a]), ra.daemon, ra.inc, ra.conn, rb.daemon, rb.inc, rb.conn)
		}
	}
	if dups > 0 {
		t.Errorf("%d duplicate IDs among %d", dups, len(all))
	}
	// Counter-mode IDs (the reserved machine ID) only from daemons that
	// may run in counter mode.
	counter, strays := 0, 0
	for _, r := range l.recs {
		for _, id := range r.ids {
			if layout.Decompose(id).MachineID != layout.CounterMachineID() {
				continue
			}
			counter++
			if !r.mayCounter {
				if strays++; strays <= 5 {
					t.Errorf("ID %d %+v carries the counter machine ID but came from %s, which runs in flake mode",
						id, layout.Decompose(id), r.daemon)
				}
			}
		}
	}
	t.Logf("checked %d IDs from %d replies: %d duplicates, %d counter-mode IDs, %d request errors",
		len(all), len(l.recs), dups, counter, l.errs.Load())
	return len(all)
}

// IDsOf returns the IDs collected from one daemon, in collection order.
func (l *Load) IDsOf(name string) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for _, r := range l.recs {
		if r.daemon == name {
			out = append(out, r.ids...)
		}
	}
	return out
}

// Watch samples INFO of the live daemons every 100 ms and fails when two
// of them report the same machine ID at once. Stop it with the returned
// function. Only for faults where no lease can be lost: after a pause
// past the TTL or a Redis that lost its data, the old holder reports its
// ID until its next renewal tells it the lease is gone (it issues nothing
// past its reservation meanwhile, which the ID checks verify).
func Watch(t testing.TB, daemons []*Daemon) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			held := map[string]string{}
			for _, d := range daemons {
				if d.down.Load() {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				info, err := d.Info(ctx)
				cancel()
				if err != nil || info["mode"] != "flake" || info["lease_lost"] == "true" {
					continue
				}
				for _, m := range strings.Split(info["machine_ids"], ",") {
					if m == "" {
						continue
					}
					if o, ok := held[m]; ok {
						t.Errorf("machine ID %s reported live by %s and %s at once", m, o, d.Name)
					}
					held[m] = d.Name
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// fleet makes the registry and starts n daemons on redisURL with extra
// flags.
func fleet(t *testing.T, n int, redisURL string, extra ...string) []*Daemon {
	t.Helper()
	initRegistry(t, append([]string{"--redis", redisURL}, extra...)...)
	return startFleet(t, n, redisURL, extra...)
}

// startFleet starts n daemons on redisURL with extra flags, on the
// registry there.
func startFleet(t *testing.T, n int, redisURL string, extra ...string) []*Daemon {
	t.Helper()
	var ds []*Daemon
	for i := range n {
		d := NewDaemon(t, fmt.Sprintf("node%d", i+1), redisURL, extra...)
		d.MustStart()
		ds = append(ds, d)
	}
	for _, d := range ds {
		d.WaitReady(t, 20*time.Second)
	}
	return ds
}

func defaultLayout() flake.Layout { return flake.DefaultLayout() }

// errorsAs is errors.As for exit errors.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// sortedCopy returns a sorted copy.
func sortedCopy(ids []uint64) []uint64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}
