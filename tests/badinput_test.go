package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// runServe runs `flaked serve` with args for at most 10 s and returns its
// exit status and output. A daemon that starts (it should not) is killed
// and reported as status -2.
func runServe(t *testing.T, port int, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	full := append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...)
	cmd := exec.CommandContext(ctx, binary, full...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return -2, string(out)
	}
	return exitCode(err), string(out)
}

// listening reports whether something accepts on the port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 100*time.Millisecond)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// Every serve flag with an invalid value: exit status 2, a message naming
// the flag, and nothing served.
func TestBadInput_Flags(t *testing.T) {
	cases := []struct {
		args []string
		want string // in the output
	}{
		{[]string{"--listen", "not-an-address"}, "listen"},
		{[]string{"--redis", "mysql://x"}, "redis"},
		{[]string{"--namespace", "bad ns!"}, "namespace"},
		{[]string{"--mode", "turbo"}, "mode"},
		{[]string{"--lease-ttl", "10ms"}, "lease"},
		{[]string{"--lease-ttl", "banana"}, "lease-ttl"},
		{[]string{"--max-lead", "-1s"}, "lead"},
		{[]string{"--max-wait", "2h"}, "wait"},
		{[]string{"--max-skew", "0s"}, "skew"},
		{[]string{"--machine-ids", "0"}, "machine-ids"},
		{[]string{"--machine-ids", "100000"}, "machine-ids"},
		{[]string{"--bits-sequence", "0"}, "sequence"},
		{[]string{"--bits-sequence", "31"}, "sequence"},
		{[]string{"--bits-machine", "40"}, "machine"},
		{[]string{"--bits-sequence", "20", "--bits-machine", "20"}, "time"},
		{[]string{"--tick", "1us"}, "tick"},
		{[]string{"--epoch", "yesterday"}, "epoch"},
		{[]string{"--epoch", "2999-01-01T00:00:00Z"}, "epoch"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--log-format", "xml"}, "log-format"},
		{[]string{"--tls-cert", "/nonexistent.pem"}, "tls"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			port := redistest.FreePort(t)
			code, out := runServe(t, port, c.args...)
			if code != 2 {
				t.Fatalf("exit status %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(strings.ToLower(out), c.want) {
				t.Fatalf("the message does not name %q:\n%s", c.want, out)
			}
			if listening(port) {
				t.Fatal("something listens on the port after a refused start")
			}
		})
	}
}

// A state file that is truncated, from another namespace, from another
// layout, or unreadable: a clear error, exit status 2, nothing issued, and
// the file left as it was (never silently reused or overwritten).
func TestBadInput_StateFile(t *testing.T) {
	srv := redisServer(t, false)
	// A good state file, from a clean run.
	good := filepath.Join(t.TempDir(), "good.state")
	d := NewDaemon(t, "writer", srv.URL())
	d.StateFile = good
	d.InitRegistry()
	d.MustStart()
	if err := d.Term(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Log())
	}
	valid, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unreadable := filepath.Join(dir, "a-directory.state")
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		args []string
		want string
	}{
		{"truncated", write("truncated.state", valid[:len(valid)/2]), nil, "corrupt"},
		{"checksum", write("flipped.state", []byte(strings.Replace(string(valid), `"reservation":`, `"reservation":1`, 1))), nil, "corrupt"},
		{"other namespace", write("ns.state", valid), []string{"--namespace", "other"}, "namespace"},
		{"other layout", write("layout.state", valid), []string{"--bits-sequence", "10"}, "layout"},
		{"unreadable", unreadable, nil, "state"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(c.path)
			port := redistest.FreePort(t)
			code, out := runServe(t, port, append([]string{"--redis", srv.URL(), "--state-file", c.path}, c.args...)...)
			if code != 2 {
				t.Fatalf("exit status %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(strings.ToLower(out), c.want) {
				t.Fatalf("the message does not say %q:\n%s", c.want, out)
			}
			if after, _ := os.ReadFile(c.path); string(after) != string(before) {
				t.Fatal("the state file was changed by a refused start")
			}
		})
	}
}
