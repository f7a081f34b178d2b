// Package interop tests Redis clients of other languages (redis-py,
// ioredis, node-redis, rueidis) against built flaked daemons, each client
// with its default options. It is its own module, so those clients never
// enter the main one. The Go side starts every process; the Python and Node
// scripts get the daemons' addresses in environment variables and ask the
// harness, over HTTP on loopback, to restart a daemon.
package interop

import (
	"errors"
	"fmt"
	"net"
	"net/http"
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

	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
)

// binary is the flaked binary (daemontest), built once for the package.
var binary string

func TestMain(m *testing.M) {
	redis.SetLogger(idtest.QuietRedis{}) // dials to daemons stopped on purpose
	var err error
	if binary, err = daemontest.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(daemontest.Run(m))
}

const (
	startWithin  = 30 * time.Second
	stopWithin   = 15 * time.Second // SIGTERM, then SIGKILL
	bindAttempts = 3
	password     = "interop-secret"
)

// daemon is one flaked process, restartable on the same port and state
// file.
type daemon struct {
	name    string
	port    int
	metrics int
	args    []string // serve flags besides listen, metrics and state file
	state   string

	t    testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan error
	log  *idtest.LogBuffer
}

func newDaemon(t testing.TB, name string, args ...string) *daemon {
	d := &daemon{name: name, port: redistest.FreePort(t), metrics: redistest.FreePort(t), args: args,
		state: filepath.Join(t.TempDir(), name+".state"), t: t}
	t.Cleanup(func() { _ = d.stop(syscall.SIGKILL) })
	return d
}

func (d *daemon) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)) }

// start runs the daemon and waits until /readyz says it can issue IDs.
func (d *daemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return fmt.Errorf("%s already running", d.name)
	}
	args := append([]string{"serve", "--listen", d.addr(), "--state-file", d.state, "--log-format", "json",
		"--metrics-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.metrics))}, d.args...)
	cmd := exec.Command(binary, args...)
	d.log = &idtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = d.log, d.log
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd, d.exit = cmd, make(chan error, 1)
	go func() { d.exit <- cmd.Wait() }()
	deadline := time.Now().Add(startWithin)
	for !d.ready() {
		select {
		case err := <-d.exit:
			d.cmd = nil
			return fmt.Errorf("%s exited at start: %v\n%s", d.name, err, d.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v\n%s", d.name, startWithin, d.log.String())
		}
	}
	// Ready, and still running: not another process that answered on a
	// port this one failed to bind.
	select {
	case err := <-d.exit:
		d.cmd = nil
		return fmt.Errorf("%s exited at start: %v\n%s", d.name, err, d.log.String())
	case <-time.After(50 * time.Millisecond):
	}
	return nil
}

func (d *daemon) ready() bool {
	c := http.Client{Timeout: time.Second}
	r, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", d.metrics))
	if err != nil {
		return false
	}
	r.Body.Close()
	return r.StatusCode == http.StatusOK
}

// stop signals the process it started (by its PID) and waits for the
// exit; SIGKILL after stopWithin.
func (d *daemon) stop(sig syscall.Signal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(sig)
	var err error
	select {
	case err = <-d.exit:
	case <-time.After(stopWithin):
		_ = d.cmd.Process.Kill()
		<-d.exit
		err = fmt.Errorf("%s did not exit within %v of %v; killed", d.name, stopWithin, sig)
	}
	d.cmd = nil
	if sig == syscall.SIGKILL {
		return nil // its status is the signal's
	}
	return err
}

// restart stops the daemon gracefully and starts it on the same port and
// state file: the clients' connections are closed under them.
func (d *daemon) restart() error {
	if err := d.stop(syscall.SIGTERM); err != nil {
		return err
	}
	return d.start()
}

// firstStart is the first start. A port found free a moment ago may have
// been taken since (by any process's outgoing connection): then the daemon
// gets new ports, up to bindAttempts times. Restarts keep their port.
func (d *daemon) firstStart() error {
	for attempt := 1; ; attempt++ {
		err := d.start()
		if err == nil || attempt == bindAttempts || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		d.t.Logf("%s: a port was taken; trying others", d.name)
		d.port, d.metrics = redistest.FreePort(d.t), redistest.FreePort(d.t)
	}
}

func (d *daemon) mustStart() {
	d.t.Helper()
	if err := d.firstStart(); err != nil {
		d.t.Fatal(err)
	}
}

// flavours are three standalone daemons with the default layout: plain
// TCP, a password, and TLS.
type flavours struct {
	plain, auth, tls *daemon
	ca               string // PEM of the CA that signed tls's certificate
}

func startFlavours(t *testing.T) *flavours {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key := writeTLSFiles(t, dir)
	f := &flavours{
		plain: newDaemon(t, "plain"),
		auth:  newDaemon(t, "auth", "--requirepass", password),
		tls:   newDaemon(t, "tls", "--tls-cert", cert, "--tls-key", key),
		ca:    ca,
	}
	for _, d := range f.all() {
		d.mustStart()
	}
	return f
}

func (f *flavours) all() []*daemon { return []*daemon{f.plain, f.auth, f.tls} }

// env is what the language scripts read: one URL per flavour, the CA
// file, and where to ask for a restart.
func (f *flavours) env(control string) []string {
	return []string{
		"FLAKED_PLAIN_URL=redis://" + f.plain.addr(),
		"FLAKED_AUTH_URL=redis://:" + password + "@" + f.auth.addr(),
		"FLAKED_TLS_URL=rediss://" + f.tls.addr(),
		"FLAKED_TLS_CA=" + f.ca,
		"FLAKED_CONTROL=" + control,
	}
}

// startFleet makes the registry of a new fleet on one new redis-server
// with the flaked init binary (as the README's fleet steps do), then
// starts n daemons with the given layout flags, all at once.
func startFleet(t *testing.T, n int, layout ...string) []*daemon {
	t.Helper()
	r := redistest.Start(t, redistest.Options{})
	if out, err := exec.Command(binary, append([]string{"init", "--redis", r.URL()}, layout...)...).CombinedOutput(); err != nil {
		t.Fatalf("flaked init: %v\n%s", err, out)
	}
	ds := make([]*daemon, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ds {
		ds[i] = newDaemon(t, fmt.Sprintf("fleet%d", i+1), append([]string{"--redis", r.URL()}, layout...)...)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = ds[i].firstStart() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ds
}

// serveControl answers POST /restart/{name} for the named daemons: the
// scripts' way to have a daemon restarted under their connections. It
// replies once the daemon is ready again.
func serveControl(t *testing.T, ds ...*daemon) string {
	t.Helper()
	byName := map[string]*daemon{}
	for _, d := range ds {
		byName[d.name] = d
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /restart/{name}", func(w http.ResponseWriter, r *http.Request) {
		d, ok := byName[r.PathValue("name")]
		if !ok {
			http.Error(w, "no daemon "+r.PathValue("name"), http.StatusNotFound)
			return
		}
		if err := d.restart(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "restarted", d.name)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// requireTool skips the test when a language's runtime or libraries are
// missing, and fails it under CI=true, where scripts/interop installs them.
func requireTool(t *testing.T, what, hint string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf("%s is missing; %s (scripts/interop installs it as root)", what, hint)
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s; CI=true: interop tests fail instead of skipping", msg)
	}
	t.Skip(msg)
}
