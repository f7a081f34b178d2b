package deploy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// flakedBin is the flaked binary built from the main module (daemontest)
// for these tests, in TestMain.
var flakedBin string

// releaseBudget is how long a stopping daemon gives Redis to release its
// lease after --shutdown-timeout has run out. A stop cut short before both
// have passed leaves the lease to expire instead of handing it back with
// the exact last tick.
const releaseBudget = node.CloseTimeout

func TestMain(m *testing.M) {
	var err error
	if flakedBin, err = daemontest.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(daemontest.Run(m))
}

// flagInfo is one flag of `flaked serve`, as its --help prints it.
type flagInfo struct {
	name     string
	hasValue bool   // takes a value (not a boolean)
	def      string // the default, "" for none
	env      string // its environment variable
}

var helpLine = regexp.MustCompile(`^\s+--([a-z0-9-]+)(?:, -\w+)?( value)?\s{2,}(.*?)(?: \(default: (.*?)\))?(?: \[\$(\w+)\])?$`)

// serveFlags reads the flags of `flaked serve --help` from the built
// binary: the deploy files are checked against what the daemon accepts,
// not against a second copy of its flags.
func serveFlags(t *testing.T) map[string]flagInfo {
	t.Helper()
	flags, out := commandFlags(t, "serve")
	// The parse itself is checked: a help text this test no longer reads
	// must fail here, not pass every flag check below vacuously.
	for _, name := range []string{"listen", "metrics-addr", "state-file", "shutdown-timeout", "redis", "pprof"} {
		if _, ok := flags[name]; !ok {
			t.Fatalf("flaked serve --help: no --%s read from\n%s", name, out)
		}
	}
	if f := flags["shutdown-timeout"]; !f.hasValue || f.def == "" || f.env != "FLAKED_SHUTDOWN_TIMEOUT" {
		t.Fatalf("flaked serve --help: --shutdown-timeout read as %+v", f)
	}
	return flags
}

// commandFlags reads the flags of `flaked <command> --help` from the
// built binary, and the help text.
func commandFlags(t *testing.T, command string) (map[string]flagInfo, []byte) {
	t.Helper()
	out, err := exec.Command(flakedBin, command, "--help").Output()
	if err != nil {
		t.Fatalf("flaked %s --help: %v", command, err)
	}
	flags := map[string]flagInfo{}
	for _, line := range strings.Split(string(out), "\n") {
		m := helpLine.FindStringSubmatch(line)
		if m == nil || m[1] == "help" {
			continue
		}
		flags[m[1]] = flagInfo{name: m[1], hasValue: m[2] != "", def: strings.Trim(m[4], `"`), env: m[5]}
	}
	return flags, out
}

// envFlags maps FLAKED_* environment variables to their flags.
func envFlags(flags map[string]flagInfo) map[string]flagInfo {
	m := map[string]flagInfo{}
	for _, f := range flags {
		if f.env != "" {
			m[f.env] = f
		}
	}
	return m
}

// serveConfig is how a deploy file runs `flaked serve`: the flags after
// "serve" and the environment (image ENV, then the file's own).
type serveConfig struct {
	args []string
	env  map[string]string
	// sandbox, if set, runs the daemon as a pod's securityContext says:
	// see startServe.
	sandbox *podSandbox
	// straceOut, if set, runs the daemon under strace -f, which writes
	// the system calls it makes to this file.
	straceOut string
}

// podSandbox is the part of a pod's securityContext a test can make here:
// the user and group the daemon runs as, the fsGroup that owns its state
// volume, and a read-only root file system.
type podSandbox struct {
	uid, gid, fsGroup int64
}

// canSandbox reports why a podSandbox cannot be made here ("" if it can):
// it needs root, unshare and setpriv (util-linux), and mount namespaces.
func canSandbox() string {
	if os.Getuid() != 0 {
		return "not root"
	}
	for _, bin := range []string{"unshare", "setpriv", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not found (Debian package util-linux / mount)"
		}
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		return fmt.Sprintf("unshare -m: %v: %s", err, out)
	}
	return ""
}

// sandboxScript runs "$@" (the daemon) in a mount namespace of its own
// where the root file system is read-only but for the state directory $1,
// bind-mounted over itself first (a mount of its own, as a pod's volume
// is), as user $2, group $3 with supplementary group $4 (the fsGroup).
const sandboxScript = `set -e
dir=$1 uid=$2 gid=$3 fsgroup=$4; shift 4
mount --make-rprivate /
mount --bind "$dir" "$dir"
mount -o remount,ro,bind /
if touch /.flaked-rw-probe 2>/dev/null; then rm -f /.flaked-rw-probe; echo "root still writable" >&2; exit 97; fi
exec setpriv --reuid="$uid" --regid="$gid" --groups="$fsgroup" --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
`

// parseArgs checks that each argument is a flag of flaked serve (with a
// value where it takes one; --name=value or --name value) and returns the
// values by flag name. A flag given twice is refused: the last would win
// silently.
func parseArgs(t *testing.T, flags map[string]flagInfo, args []string) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasEq := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") {
			t.Errorf("argument %q: not a --flag", a)
			continue
		}
		f, ok := flags[name]
		if !ok {
			t.Errorf("argument %q: flaked serve has no flag --%s", a, name)
			continue
		}
		if f.hasValue && !hasEq {
			if i+1 >= len(args) {
				t.Errorf("argument %q: no value", a)
				continue
			}
			i++
			val = args[i]
		}
		if !f.hasValue && !hasEq {
			val = "true"
		}
		if _, dup := vals[name]; dup {
			t.Errorf("--%s given twice", name)
		}
		vals[name] = val
	}
	return vals
}

// effective is the value flaked serve uses for a flag under cfg: the
// command line, else the environment, else the default.
func effective(t *testing.T, flags map[string]flagInfo, cfg serveConfig, name string) string {
	t.Helper()
	f, ok := flags[name]
	if !ok {
		t.Fatalf("no flag --%s", name)
	}
	if v, ok := parseArgs(t, flags, cfg.args)[name]; ok {
		return v
	}
	if v, ok := cfg.env[f.env]; ok {
		return v
	}
	return f.def
}

// checkEnvNames fails for a FLAKED_* variable that is no flag's: it would
// be ignored silently.
func checkEnvNames(t *testing.T, flags map[string]flagInfo, env map[string]string) {
	t.Helper()
	byEnv := envFlags(flags)
	for k := range env {
		if strings.HasPrefix(k, "FLAKED_") {
			if _, ok := byEnv[k]; !ok {
				t.Errorf("environment variable %s: no flag of flaked serve reads it", k)
			}
		}
	}
}

// checkLayoutExplicit fails unless all five layout flags are set: the
// layout must be the same on every node of a fleet, so a deploy file names
// it rather than trusting each binary's defaults.
func checkLayoutExplicit(t *testing.T, flags map[string]flagInfo, cfg serveConfig) {
	t.Helper()
	vals := parseArgs(t, flags, cfg.args)
	for _, name := range []string{"bits-id", "bits-sequence", "bits-machine", "tick", "epoch"} {
		if _, ok := vals[name]; ok {
			continue
		}
		if _, ok := cfg.env[flags[name].env]; !ok {
			t.Errorf("the layout flag --%s is not set: the layout must be equal fleet-wide, so name it", name)
		}
	}
}

// checkStopTime fails unless grace (what the supervisor waits after
// SIGTERM before SIGKILL) exceeds --shutdown-timeout plus the lease's
// release budget.
func checkStopTime(t *testing.T, flags map[string]flagInfo, cfg serveConfig, what string, grace time.Duration) {
	t.Helper()
	st, err := time.ParseDuration(effective(t, flags, cfg, "shutdown-timeout"))
	if err != nil {
		t.Fatalf("--shutdown-timeout: %v", err)
	}
	if grace <= st+releaseBudget {
		t.Errorf("%s %v: must be longer than --shutdown-timeout %v + %v for the lease's release, or a stop is cut short and the lease left to expire",
			what, grace, st, releaseBudget)
	}
}

// checkRedisURL checks a Redis URL the way flaked serve --redis does (the
// main module's redisurl.NewClient, which connects to nothing).
func checkRedisURL(t *testing.T, where, url string) {
	t.Helper()
	if url == "" {
		return // standalone
	}
	rdb, err := redisurl.NewClient(url)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	rdb.Close()
}

// running is a flaked serve process started by a test.
type running struct {
	cmd         *exec.Cmd
	metricsAddr string // 127.0.0.1:port, "" without --metrics-addr
	listenAddr  string
	stderr      *bytes.Buffer
	done        chan error
	stopped     bool
	pid         int // the daemon's: under strace, strace's child
}

// addrFlags are the flags whose host:port is rewritten to a free loopback
// port for a test run; pathFlags those whose path is moved into the test's
// directory. Everything else runs as the deploy file says.
var (
	addrFlags = []string{"listen", "metrics-addr"}
	pathFlags = []string{"state-file"}
)

// startServe runs flaked serve as cfg says, with these changes so it can
// run here: addresses become free loopback ports (the host:port given must
// still parse), paths move under a temporary directory, and --redis (or
// FLAKED_REDIS) is dropped after checkRedisURL: the node runs standalone.
// Every other flag and value is the deploy file's, so a bad one makes the
// daemon exit with status 2. It waits until /readyz answers 200.
func startServe(t *testing.T, flags map[string]flagInfo, cfg serveConfig) *running {
	t.Helper()
	dir := t.TempDir()
	rewrite := func(name, val string) string {
		for _, f := range addrFlags {
			if f == name {
				if _, _, err := net.SplitHostPort(val); err != nil {
					t.Errorf("--%s %q: want host:port: %v", name, val, err)
				}
				return redistest.FreeAddr(t)
			}
		}
		for _, f := range pathFlags {
			if f == name && val != "" {
				return filepath.Join(dir, strings.TrimPrefix(filepath.Clean(val), "/"))
			}
		}
		return val
	}
	vals := parseArgs(t, flags, cfg.args)
	if t.Failed() {
		t.FailNow()
	}
	args := []string{"serve"}
	for name, val := range vals {
		if name == "redis" {
			checkRedisURL(t, "--redis", val)
			continue
		}
		args = append(args, "--"+name+"="+rewrite(name, val))
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	byEnv := envFlags(flags)
	for k, v := range cfg.env {
		if f, ok := byEnv[k]; ok {
			if f.name == "redis" {
				checkRedisURL(t, k, v)
				continue
			}
			v = rewrite(f.name, v)
		}
		env = append(env, k+"="+v)
	}
	// A flag neither given nor in the environment keeps its default; the
	// addresses must still be loopback ones here.
	for _, name := range addrFlags {
		if _, inArgs := vals[name]; !inArgs {
			if _, inEnv := cfg.env[flags[name].env]; !inEnv && flags[name].def != "" {
				args = append(args, "--"+name+"="+rewrite(name, flags[name].def))
			}
		}
	}
	for _, a := range args {
		for _, f := range pathFlags {
			if p, ok := strings.CutPrefix(a, "--"+f+"="); ok && p != "" {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, kv := range env {
		for _, f := range pathFlags {
			if p, ok := strings.CutPrefix(kv, flags[f].env+"="); ok && p != "" {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	r := &running{stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command(flakedBin, args...)
	if cfg.straceOut != "" {
		r.cmd = exec.Command("strace", append([]string{"-f", "-qq", "-o", cfg.straceOut, flakedBin}, args...)...)
	}
	if sb := cfg.sandbox; sb != nil {
		stateFile := ""
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--state-file="); ok {
				stateFile = v
			}
		}
		if stateFile == "" {
			t.Fatal("sandbox: the state file must be an argument")
		}
		// The volume as the kubelet prepares it for fsGroup: owned by
		// root and the group, group-writable, set-gid. The directories
		// above it only need to be passable.
		stateDir := filepath.Dir(stateFile)
		if err := os.Chown(stateDir, 0, int(sb.fsGroup)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(stateDir, 0o2770); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(stateDir); strings.HasPrefix(d, dir); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil { // t.TempDir's own parent
			t.Fatal(err)
		}
		r.cmd = exec.Command("unshare", append([]string{"-m", "sh", "-c", sandboxScript, "sh", stateDir,
			strconv.FormatInt(sb.uid, 10), strconv.FormatInt(sb.gid, 10), strconv.FormatInt(sb.fsGroup, 10), flakedBin}, args...)...)
	}
	r.cmd.Env = env
	r.cmd.Stderr = r.stderr
	r.cmd.Stdout = io.Discard
	// What the daemon listens on, after the rewrite: from the arguments,
	// else the environment.
	find := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, flags[name].env+"="); ok {
				return v
			}
		}
		return ""
	}
	r.metricsAddr, r.listenAddr = find("metrics-addr"), find("listen")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() { r.stop(t) })
	if r.metricsAddr == "" {
		t.Fatalf("flaked serve %v: no --metrics-addr, so no /readyz or /metrics", args)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-r.done:
			r.stopped = true // it exited: nothing for the cleanup to stop
			t.Fatalf("flaked %s exited before it was ready: %v\n%s", strings.Join(args, " "), err, r.stderr)
		default:
		}
		if code, _ := r.get(t, "/readyz"); code == http.StatusOK {
			r.pid = r.cmd.Process.Pid
			if cfg.straceOut != "" {
				r.pid = childPid(t, r.pid)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("flaked %s: /readyz not 200 within 20s\n%s", strings.Join(args, " "), r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get fetches a path of the daemon's HTTP side: the status (0 when it
// cannot connect) and the body.
func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(body)
}

// stop sends SIGTERM and expects a clean exit (status 0) within 15 s;
// SIGKILL after that. Only the process this test started is signalled.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	pid := r.pid
	if pid == 0 { // it never became ready
		pid = r.cmd.Process.Pid
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("flaked serve did not stop cleanly on SIGTERM: %v\n%s", err, r.stderr)
		}
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Errorf("flaked serve did not stop within 15s of SIGTERM\n%s", r.stderr)
	}
}

// childPid is the one child of process pid (strace's: the daemon).
func childPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("process %d: children %q; want one", pid, f)
	}
	child, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return child
}

// port is the port of a host:port.
func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%q: want host:port: %v", hostport, err)
	}
	return p
}

// readFile reads a file of the repository, relative to deploy/.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dockerfileEnv is the ENV of the repository's Dockerfile: the image's
// environment, under the pod's and the compose file's own.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	text := strings.ReplaceAll(string(readFile(t, "../Dockerfile")), "\\\n", " ")
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.ContainsAny(v, `"'$`) {
				t.Fatalf("Dockerfile ENV %q: this test reads only plain KEY=value pairs", kv)
			}
			env[k] = v
		}
	}
	if len(env) == 0 {
		t.Fatal("Dockerfile: no ENV read")
	}
	return env
}

// dockerfileStopsWithSIGTERM fails when the Dockerfile sets a STOPSIGNAL:
// the graceful stop is on SIGTERM or SIGINT.
func checkDockerfileStopSignal(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(string(readFile(t, "../Dockerfile")), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "STOPSIGNAL "); ok && s != "SIGTERM" && s != "SIGINT" {
			t.Errorf("Dockerfile STOPSIGNAL %s: flaked stops gracefully on SIGTERM or SIGINT only", s)
		}
	}
}
