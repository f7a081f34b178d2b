package server

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// lookTool finds a Redis tool, skipping the test without it unless CI=true.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required on CI: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRedisCLI(t *testing.T) {
	cli := lookTool(t, "redis-cli")
	ts := startServer(t, Options{RequirePass: "pw"})
	p := []string{"-p", ts.port, "--no-auth-warning", "-a", "pw"}
	if out := run(t, cli, append(p, "NEXTID")...); !regexp.MustCompile(`^\d+\n$`).MatchString(out) {
		t.Errorf("redis-cli NEXTID = %q", out)
	}
	if out := run(t, cli, append(p, "PING")...); out != "PONG\n" {
		t.Errorf("redis-cli PING = %q", out)
	}
	if out := run(t, cli, append(p, "NEXTIDS", "3")...); !regexp.MustCompile(`^(\d+\n){3}$`).MatchString(out) {
		t.Errorf("redis-cli NEXTIDS 3 = %q", out)
	}
	if out := run(t, cli, append(p, "PARSE", "0")...); out != "2025-01-01T00:00:00.000Z\n0\n0\n0\nflake\n" {
		t.Errorf("redis-cli PARSE 0 = %q", out)
	}
	if out := run(t, cli, append(p, "NEXTIDS", "0")...); !strings.Contains(out, "ERR NEXTIDS count must be an integer in 1..10000") {
		t.Errorf("redis-cli NEXTIDS 0 = %q", out)
	}
	if out := run(t, cli, append(p, "INFO", "flaked")...); !strings.Contains(out, "mode:flake") {
		t.Errorf("redis-cli INFO = %q", out)
	}
	// RESP3: redis-cli -3 prints a map of CONFIG GET as Redis's.
	if out := run(t, cli, append(p, "-3", "CONFIG", "GET", "maxclients")...); out != "maxclients 10000\n" {
		t.Errorf("redis-cli -3 CONFIG GET = %q", out)
	}
	if out := run(t, cli, append(p, "-3", "NEXTID", "STRING")...); !regexp.MustCompile(`^\d+\n$`).MatchString(out) {
		t.Errorf("redis-cli -3 NEXTID STRING = %q", out)
	}
	if out := run(t, cli, "-p", ts.port, "NEXTID"); !strings.Contains(out, "NOAUTH") {
		t.Errorf("redis-cli without a password = %q", out)
	}
	// Commands on stdin, as a script would pipe them.
	cmd := exec.Command(cli, p...)
	cmd.Stdin = strings.NewReader("NEXTID\nPING\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`^\d+\nPONG\n$`).MatchString(string(out)) {
		t.Errorf("redis-cli with stdin = %q, %v", out, err)
	}
}

func TestRedisBenchmark(t *testing.T) {
	bench := lookTool(t, "redis-benchmark")
	ts := startServer(t, Options{})
	out := run(t, bench, "-p", ts.port, "-n", "20000", "-c", "4", "-P", "16", "-q", "NEXTID")
	if strings.Contains(out, "WARN") || strings.Contains(out, "ERR") || !strings.Contains(out, "requests per second") {
		t.Errorf("redis-benchmark:\n%s", out)
	}
	t.Logf("redis-benchmark NEXTID -P 16: %s", strings.TrimSpace(out[strings.LastIndex(out, "\r")+1:]))
	if got := ts.stats.idsFlake.Load(); got != 20000 {
		t.Errorf("ids issued = %d, want 20000", got)
	}
	out = run(t, bench, "-p", ts.port, "-n", "2000", "-c", "2", "-q", "-t", "ping")
	if strings.Contains(out, "WARN") || strings.Contains(out, "ERR") || strings.Count(out, "requests per second") != 2 {
		t.Errorf("redis-benchmark -t ping:\n%s", out)
	}
}
