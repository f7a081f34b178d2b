package client

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLayoutFromInfo(t *testing.T) {
	const def = "time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z"
	for _, tc := range []struct {
		name, info, err string
	}{
		{"one line", "# Flaked\r\nmode:flake\r\nlayout:" + def + "\r\nready:1\r\n", ""},
		{"twice, agreeing", "layout:" + def + "\r\nlayout:" + def + "\r\n", ""},
		{"bare newlines", "layout:" + def + "\n", ""},
		{"twice, differing", "layout:" + def + "\r\nlayout:time=40,seq=7,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z\r\n", "two layouts"},
		{"missing", "# Server\r\nredis_version:7\r\n", "no layout line: is this a flaked daemon?"},
		{"garbage", "layout:nonsense\r\n", "INFO layout: invalid layout"},
	} {
		l, err := layoutFromInfo(tc.info)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && l.String() != def:
			t.Errorf("%s: layout %v", tc.name, l)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

func newTestClient(t *testing.T, n int, now func() time.Time) *Client {
	t.Helper()
	addrs := []string{}
	for i := range n {
		addrs = append(addrs, "127.0.0.1:"+string(rune('1'+i)))
	}
	c, err := New(Options{Addrs: addrs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPick_LeastLoadedThenRoundRobin_DownLast(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newTestClient(t, 3, func() time.Time { return now })
	d := c.daemons
	counts := map[*daemon]int{}
	for range 300 {
		counts[c.pick()]++
	}
	for _, x := range d {
		if counts[x] != 100 {
			t.Fatalf("round robin among equals: %v picks of %s, want 100", counts[x], x.addr)
		}
	}
	d[0].inflight.Add(2)
	d[1].inflight.Add(1)
	for range 10 {
		if got := c.pick(); got != d[2] {
			t.Fatalf("picked %s, want the least loaded %s", got.addr, d[2].addr)
		}
	}
	d[2].downUntil.Store(now.Add(time.Second).UnixNano())
	for range 10 {
		if got := c.pick(); got != d[1] {
			t.Fatalf("picked %s, want %s: the least loaded is down", got.addr, d[1].addr)
		}
	}
	if got := c.failoverOrder(d[1]); len(got) != 2 || got[0] != d[0] || got[1] != d[2] {
		t.Fatalf("failover order after %s: %v, want the up one, then the down one", d[1].addr, got)
	}
	for _, x := range d {
		x.downUntil.Store(now.Add(time.Second).UnixNano())
	}
	seen := map[*daemon]bool{}
	for range 30 {
		seen[c.pick()] = true
	}
	if len(seen) != 3 {
		t.Fatalf("all down: picked %d of 3 daemons, want each in turn", len(seen))
	}
	now = now.Add(time.Second) // DownFor over
	if got := c.pick(); got != d[2] {
		t.Fatalf("picked %s, want %s again: no longer down", got.addr, d[2].addr)
	}
}

func TestError_Text(t *testing.T) {
	e := &Error{Op: "NEXTID", Attempts: []Attempt{{"a:1", errors.New("boom")}, {"b:2", errors.New("bang")}}}
	if got, want := e.Error(), "flaked client: NEXTID: no daemon answered; tried 2 daemons: a:1: boom; b:2: bang"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, ErrNoDaemon) {
		t.Fatal("not ErrNoDaemon")
	}
}

// A daemon without NEXTBLOCK answers with flaked's (Redis's) unknown
// command error, or says its generator has no blocks; nothing else makes
// the client give blocks up.
func TestIsUnknownCommand(t *testing.T) {
	for msg, want := range map[string]bool{
		"ERR unknown command 'nextblock', with args beginning with: '1000' ": true,
		"ERR unknown command 'NEXTBLOCK', with args beginning with: ":        true,
		"ERR NEXTBLOCK is not supported by this generator: use NEXTIDS":      true,
		"ERR unknown command 'nextids', with args beginning with: '10' ":     false,
		"ERR no ID issued: reservation not granted":                          false,
	} {
		if got := isUnknownCommand(replyErr(msg)); got != want {
			t.Errorf("%q: %v, want %v", msg, got, want)
		}
	}
	if isUnknownCommand(errors.New("ERR unknown command 'nextblock'")) {
		t.Error("a connection error taken for the daemon's answer")
	}
}

// replyErr is an error reply as go-redis returns it (a redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
