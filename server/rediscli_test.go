package server

import (
	"bufio"
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

// redis-cli --pipe ends its stream with ECHO of 20 random bytes and waits
// for them; it finishes at once with exit status 0, having issued the IDs.
func TestRedisCLI_Pipe(t *testing.T) {
	cli := lookTool(t, "redis-cli")
	ts := startServer(t, Options{})
	var in strings.Builder
	for range 1000 {
		in.WriteString(resp("NEXTID"))
	}
	in.WriteString(resp("NEXTIDS", "100", "STRING") + "MULTI\r\nNEXTID\r\nEXEC\r\n")
	cmd := exec.Command(cli, "-p", ts.port, "--pipe")
	cmd.Stdin = strings.NewReader(in.String())
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "errors: 0, replies: 1004") {
		t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("redis-cli --pipe took %v", d)
	}
	if n := ts.issued(); n != 1101 {
		t.Errorf("%d IDs issued, want 1101", n)
	}
}

// redis-cli --stat reads INFO every interval: its columns are numbers, not
// garbage from missing fields.
func TestRedisCLI_Stat(t *testing.T) {
	cli := lookTool(t, "redis-cli")
	ts := startServer(t, Options{})
	cmd := exec.Command(cli, "-p", ts.port, "--stat", "-i", "0.01")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill() // the process this test started
	// redis-cli's stdout is a pipe: block-buffered, it arrives in 4 KiB.
	sc := bufio.NewScanner(stdout)
	row := regexp.MustCompile(`^0 +\d+(\.\d+)?[BKMG] +1 +0 +\d+ \(\+\d+\) +1 +$`)
	rows := 0
	for sc.Scan() && rows < 5 {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "---") || strings.HasPrefix(line, "keys "):
		case row.MatchString(line):
			rows++
		default:
			t.Fatalf("redis-cli --stat line %q", line)
		}
	}
	if rows < 5 {
		t.Fatalf("redis-cli --stat: %d rows, %v", rows, sc.Err())
	}
}
