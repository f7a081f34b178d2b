package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redisinfo"
)

const (
	startTimeout = 10 * time.Second // until a started process answers PING
	stopTimeout  = 5 * time.Second  // until a signalled process has exited
	bindAttempts = 5                // launches tried when the port cannot be bound
	installHint  = "apt-get install -y redis-server redis-sentinel redis-tools"
)

// Require skips the test when one of the binaries (default "redis-server")
// is not in PATH, or fails it when the environment variable CI is true:
// tests that need a real Redis must never be skipped in CI. Under
// go test -short it skips always: the fast tier starts no server, and
// asking for it is explicit, so CI=true does not turn it into a failure.
func Require(tb testing.TB, binaries ...string) {
	tb.Helper()
	if len(binaries) == 0 {
		binaries = []string{"redis-server"}
	}
	SkipShort(tb, strings.Join(binaries, ", "))
	for _, bin := range binaries {
		if _, err := exec.LookPath(bin); err != nil {
			msg := fmt.Sprintf("redistest: %s not found in PATH; install it with: %s", bin, installHint)
			if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
				tb.Fatalf("%s (CI=true: tests that need a real Redis fail instead of skipping)", msg)
			}
			tb.Skip(msg)
		}
	}
}

// SkipShort skips the test under go test -short, saying what it needs
// (a process such as redis-server or Chromium, a built binary, a long
// fault). The full suite, what CI runs, never passes -short.
func SkipShort(tb testing.TB, needs string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("-short: needs %s (the full suite runs it: scripts/test)", needs)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	return freePorts(tb, 1)[0]
}

// FreeAddr returns "127.0.0.1:port" with a port from FreePort: an address
// to listen on (a daemon's, its metrics').
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

// handedOut are the ports this process was given already: the kernel may
// hand a port out again once its listener is closed, and two servers of
// one test given one port would answer for each other (a readiness check
// reaching the other one).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePorts returns n distinct free ports, none handed out before in this
// process: all listeners stay open until every port is chosen, so the
// kernel cannot hand out the same one twice in one call.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil || tries > 1000 {
			tb.Fatalf("redistest: looking for a free port: %v (%d tries)", err, tries)
		}
		defer l.Close()
		if p := l.Addr().(*net.TCPAddr).Port; !handedOut.ports[p] {
			handedOut.ports[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

// Options configures a standalone redis-server started by Start.
type Options struct {
	AOF      bool     // appendonly yes + appendfsync always
	Password string   // requirepass
	Dir      string   // data directory; default t.TempDir()
	Port     int      // 0 picks a free port
	Args     []string // extra config lines "name value", written after the generated ones
}

// Server is one redis-server (or redis-sentinel) process. The process may be
// killed, stopped, restarted and paused; it always keeps its port and data
// directory.
type Server struct {
	tb       testing.TB // owner, for errors of Kill, Stop, Pause and Resume
	bin      string     // redis-server or redis-sentinel
	sentinel bool       // config for redis-sentinel: no persistence lines
	opts     Options
	dir      string

	mu   sync.Mutex
	port int
	proc *process // nil when not running
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
}

// Start starts a redis-server on 127.0.0.1 and waits until it answers PING.
// The process is killed when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	Require(tb, "redis-server")
	return start(tb, "redis-server", false, opts)
}

func start(tb testing.TB, bin string, sentinel bool, opts Options) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: bin, sentinel: sentinel, opts: opts, dir: opts.Dir, port: opts.Port}
	if s.dir == "" {
		s.dir = tb.TempDir()
	}
	if s.port == 0 {
		s.port = FreePort(tb)
	}
	// Registered after TempDir, so it runs before the directory is removed.
	tb.Cleanup(s.Kill)
	s.launch(tb, opts.Port == 0)
	return s
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())) }

// Port returns the TCP port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// Dir returns the data directory.
func (s *Server) Dir() string { return s.dir }

// URL returns redis://[:password@]127.0.0.1:port/0, as redis.ParseURL reads it.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/0"}
	if s.opts.Password != "" {
		u.User = url.UserPassword("", s.opts.Password)
	}
	return u.String()
}

// Client returns a go-redis client for the server, closed when the test ends.
// It has go-redis's default retries: a command against a killed server
// takes about 1.7 s to fail.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(s.clientOptions())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Server) clientOptions() *redis.Options {
	return &redis.Options{Addr: s.Addr(), Password: s.opts.Password, DialTimeout: 2 * time.Second}
}

// Flush runs FLUSHALL.
func (s *Server) Flush(tb testing.TB) {
	tb.Helper()
	c := redis.NewClient(s.clientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.FlushAll(ctx).Err(); err != nil {
		tb.Fatalf("redistest: FLUSHALL on %s: %v", s.Addr(), err)
	}
}

// Kill sends SIGKILL, like a crash, and waits for the process to exit.
// Without AOF all data is lost; with AOF (fsync always) every acknowledged
// write survives a Restart. Killing a stopped server does nothing.
func (s *Server) Kill() { s.halt(syscall.SIGKILL) }

// Stop shuts the server down cleanly with SIGTERM (the AOF is flushed; no RDB
// is written unless Args configured save points) and waits for it to exit.
// A paused server is resumed first so it can handle the signal.
func (s *Server) Stop() { s.halt(syscall.SIGTERM) }

func (s *Server) halt(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return
	case <-time.After(stopTimeout):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		s.tb.Errorf("redistest: %s (pid %d) on port %d did not exit after SIGKILL", s.bin, p.cmd.Process.Pid, s.Port())
	}
}

// Restart starts the server again on the same port and data directory,
// killing it first (SIGKILL) if it still runs. Data written before survives
// only with AOF on. It waits until the server answers PING, which includes
// loading the AOF. The config file is written afresh from the Options, so
// changes made by CONFIG SET/REWRITE (for example by a sentinel) are lost.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	s.launch(tb, false)
}

// Pause freezes the process with SIGSTOP: connections are still accepted by
// the kernel but nothing is answered, like a long GC pause or a hung host.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		s.tb.Errorf("redistest: %v to %s on port %d: not running", sig, s.bin, s.Port())
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.tb.Errorf("redistest: %v to %s on port %d: %v", sig, s.bin, s.Port(), err)
	}
}

// launch starts the process and waits until it answers PING. When the
// process exits because its port is taken (for example still in TIME_WAIT
// for a listener without SO_REUSEADDR, or grabbed by another test), it is
// tried again, on a new port if newPort is set.
func (s *Server) launch(tb testing.TB, newPort bool) {
	tb.Helper()
	var err error
	for attempt := 1; ; attempt++ {
		var p *process
		if p, err = s.spawn(); err != nil {
			break
		}
		if err = s.waitReady(p); err == nil {
			return
		}
		s.Kill()
		if !errors.Is(err, errExited) || !strings.Contains(s.LogTail(), "Address already in use") || attempt == bindAttempts {
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		if newPort {
			s.mu.Lock()
			s.port = FreePort(tb)
			s.mu.Unlock()
		}
	}
	tb.Fatalf("redistest: %s on %s did not come up: %v\n--- tail of %s ---\n%s",
		s.bin, s.Addr(), err, s.logPath(), s.LogTail())
}

var errExited = errors.New("process exited")

func (s *Server) spawn() (*process, error) {
	conf := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(s.config()), 0o600); err != nil {
		return nil, err
	}
	// Redis writes to logfile itself once the config is read; anything it
	// prints before that (a config error) lands in the same file.
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, conf)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return p, nil
}

func (s *Server) config() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("bind 127.0.0.1")
	line("port %d", s.Port())
	line("dir %q", s.dir)
	line("daemonize no")
	line("protected-mode no")
	line("logfile %q", s.logPath())
	if !s.sentinel {
		if !hasDirective(s.opts.Args, "save") {
			line(`save ""`)
		}
		if s.opts.AOF {
			line("appendonly yes")
			line("appendfsync always")
		} else {
			line("appendonly no")
		}
		if s.opts.Password != "" {
			line("requirepass %q", s.opts.Password)
		}
	}
	for _, a := range s.opts.Args {
		line("%s", a)
	}
	return b.String()
}

func hasDirective(lines []string, name string) bool {
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && strings.EqualFold(f[0], name) {
			return true
		}
	}
	return false
}

func (s *Server) logPath() string { return filepath.Join(s.dir, filepath.Base(s.bin)+".log") }

// LogTail returns the last lines of the process's log file.
func (s *Server) LogTail() string {
	data, err := os.ReadFile(s.logPath())
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// waitReady polls PING until it answers PONG, the process exits or
// startTimeout passes.
func (s *Server) waitReady(p *process) error {
	opts := s.clientOptions()
	opts.DialTimeout, opts.ReadTimeout, opts.MaxRetries, opts.DialerRetries = 500*time.Millisecond, 500*time.Millisecond, -1, 1
	c := redis.NewClient(opts)
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	err := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%w before answering PING (last PING error: %v)", errExited, err)
		default:
		}
		if err = c.Ping(context.Background()).Err(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %v", startTimeout, err)
}

// poll calls f until it returns nil or timeout passes, and returns f's last
// error.
func poll(timeout time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logs formats the log tails of servers for a failure message.
func logs(servers ...*Server) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "\n--- tail of %s (%s) ---\n%s\n", s.logPath(), s.Addr(), s.LogTail())
	}
	return b.String()
}

// ForgetLoss makes the registry of namespace ns on rdb look as if this
// server had written it all along: {ns}:meta records the server's identity
// (run_id:master_replid, what scripts/lua/guard.lua compares) and no
// possible data loss. Tests that plant keys by hand use it, so the guard's
// floors do not move what they check.
func ForgetLoss(ctx context.Context, rdb redis.UniversalClient, ns string) error {
	id := ""
	meta := contract.NewKeys(ns).Meta
	node, err := redisinfo.Master(ctx, rdb, meta) // INFO of the master holding the keys
	if err != nil {
		return err
	}
	server, err1 := node.Info(ctx, "server").Result()
	repl, err2 := node.Info(ctx, "replication").Result()
	if err1 == nil && err2 == nil {
		run, _ := redisinfo.Field(server, "run_id")
		rid, _ := redisinfo.Field(repl, "master_replid")
		if run != "" && rid != "" {
			id = run + ":" + rid
		}
	}
	// A generation when there is none, through HGET and HSET, which
	// internal/simredis implements (it has no HSETNX): test set-up, nothing
	// runs beside it.
	if err := rdb.HGet(ctx, meta, contract.MetaGeneration).Err(); errors.Is(err, redis.Nil) {
		err = rdb.HSet(ctx, meta, contract.MetaGeneration, "test").Err()
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return rdb.HSet(ctx, meta, contract.MetaServer, id, contract.MetaLossMs, 0).Err()
}

// InitRegistry makes the registry of namespace ns on rdb as flaked init
// does (coord.Init), but as a fleet that has issued nothing yet, with no
// loss floor to wait out: {ns}:meta as ForgetLoss leaves it, and the fleet
// layout unless one is stored. Tests start their fleets with it; coord.Init's own tests run the
// real thing.
func InitRegistry(ctx context.Context, rdb redis.UniversalClient, ns, layout string) error {
	if err := ForgetLoss(ctx, rdb, ns); err != nil {
		return err
	}
	key := contract.NewKeys(ns).Layout
	// GET then SET, which internal/simredis implements: test set-up.
	if err := rdb.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		return err // a layout stored (nil), kept as it is, or a failure
	}
	return rdb.Set(ctx, key, layout, 0).Err()
}
