package interop

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runScript runs a language's test script with env added to the
// harness's, bounded by within, and fails the test with its output when it
// exits non-zero. The output is logged (go test -v shows it) and returned.
func runScript(t *testing.T, within time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	text := strings.TrimRight(string(out), "\n")
	what := strings.Join(append([]string{name}, args...), " ")
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s: not done within %v\n%s", what, within, text)
		}
		t.Fatalf("%s: %v\n%s", what, err, text)
	}
	t.Logf("%s:\n%s", what, text)
	return text
}

// python is Debian's interpreter, where apt's python3-redis lives (a
// python3 earlier in PATH, e.g. pyenv's, may not have it).
const python = "/usr/bin/python3"

func havePythonRedis() bool {
	return exec.Command(python, "-c", "import redis").Run() == nil
}

// TestPython_RedisPy runs python/test_clients.py: redis-py with its
// defaults over plain TCP, AUTH and TLS.
func TestPython_RedisPy(t *testing.T) {
	requireTool(t, "redis-py for "+python, "apt-get install python3-redis", havePythonRedis())
	f := startFlavours(t)
	control := serveControl(t, f.all()...)
	out := runScript(t, 2*time.Minute, f.env(control), python, "python/test_clients.py")
	// unittest exits 0 when it found no test at all (before Python 3.12).
	if m := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Fatalf("unittest ran no test:\n%s", out)
	}
}
