package tests

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// The README's quick start over the real binaries: flaked serve on a fresh
// Redis refuses to start (status 1, NOREGISTRY naming flaked init), flaked
// init makes the registry, flaked serve starts, and NEXTID over plain TCP
// (what redis-cli sends) returns an ID; a second init is refused
// (status 1) and changes nothing the running node sees. Fault covered: a
// node making a registry of its own on a namespace without one.
func TestQuickStart_InitServeNextID(t *testing.T) {
	srv := redisServer(t, false)
	code, out := runServe(t, redistest.FreePort(t), "--redis", srv.URL(), "--no-state-file")
	if code != 1 || !strings.Contains(out, "NOREGISTRY") || !strings.Contains(out, "flaked init") {
		t.Fatalf("serve before init: status %d, want 1 naming NOREGISTRY and flaked init:\n%s", code, out)
	}
	code, out = flakedCmd(t, "init", "--redis", srv.URL())
	if code != 0 || !strings.Contains(out, "registry of namespace flaked made") {
		t.Fatalf("flaked init: status %d:\n%s", code, out)
	}
	d := NewDaemon(t, "quickstart", srv.URL())
	d.MustStart()
	conn, err := net.DialTimeout("tcp", d.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	var prev uint64
	for range 3 {
		if _, err := conn.Write([]byte("NEXTID\r\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, ":") {
			t.Fatalf("NEXTID: %q, %v; want an integer\n%s", line, err, d.Log())
		}
		id, err := strconv.ParseUint(strings.TrimSpace(line[1:]), 10, 64)
		if err != nil || id <= prev {
			t.Fatalf("NEXTID: %q after %d", line, prev)
		}
		prev = id
	}
	if code, out := flakedCmd(t, "init", "--redis", srv.URL()); code != 1 || !strings.Contains(out, "registry exists") {
		t.Fatalf("a second flaked init: status %d, want 1 naming registry exists:\n%s", code, out)
	}
	if _, err := conn.Write([]byte("NEXTID\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("NEXTID after a refused init: %q, %v", line, err)
	}
}
