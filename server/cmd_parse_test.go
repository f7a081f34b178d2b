package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

func TestPARSE(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, nil)
	ctx := context.Background()
	id, err := rdb.Do(ctx, "NEXTID").Uint64()
	if err != nil {
		t.Fatal(err)
	}
	parts, err := rdb.Do(ctx, "PARSE", id).Slice()
	if err != nil {
		t.Fatal(err)
	}
	l := ts.gen.g.Layout()
	p := l.Decompose(id)
	want := []any{p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), p.Tick, int64(p.Sequence), int64(testMachine), "flake"}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Fatalf("PARSE %d = %v, want %v", id, parts, want)
	}
	tm, err := time.Parse(time.RFC3339, parts[0].(string))
	if err != nil || !strings.HasSuffix(parts[0].(string), "Z") || time.Since(tm).Abs() > time.Minute {
		t.Errorf("time %q: %v", parts[0], err)
	}
	// The base32 form, as `flaked parse` takes it, reads the same.
	if again, err := rdb.Do(ctx, "PARSE", flake.FormatBase32(id)).Slice(); err != nil || fmt.Sprint(again) != fmt.Sprint(parts) {
		t.Errorf("PARSE base32 = %v, %v", again, err)
	}
}

func TestPARSE_CounterMode(t *testing.T) {
	ts := startServer(t, Options{})
	l := ts.gen.g.Layout()
	id, err := l.Compose(12345, 7, l.CounterMachineID())
	if err != nil {
		t.Fatal(err)
	}
	c := ts.dial(t)
	want := fmt.Sprintf("[$%s, :12345, :7, :%d, $counter]",
		l.TickTime(12345).UTC().Format("2006-01-02T15:04:05.000Z07:00"), l.CounterMachineID())
	if got := c.do(resp("PARSE", fmt.Sprint(id))); got != want {
		t.Errorf("PARSE counter ID = %q, want %q", got, want)
	}
	if got := c.do("PARSE 0\r\n"); got != "[$2025-01-01T00:00:00.000Z, :0, :0, :0, $flake]" {
		t.Errorf("PARSE 0 = %q", got)
	}
}

func TestPARSE_Garbage(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for _, arg := range []string{"abc", "-1", "9223372036854775808", "18446744073709551615", "", "1.5", "0x10",
		"ZZZZZZZZZZZZZ", strings.Repeat("9", 5000)} {
		got := c.do(resp("PARSE", arg))
		if !strings.HasPrefix(got, "-ERR invalid ID") || !strings.Contains(got, "0..9223372036854775807") || len(got) > 300 {
			t.Errorf("PARSE %.20q = %q, want an error naming the range", arg, got)
		}
	}
	if got := c.do("PARSE\r\n"); got != "-ERR wrong number of arguments for 'parse' command" {
		t.Errorf("PARSE = %q", got)
	}
	ts.checkServes(t)
}

// startLayoutServer is startServer with a generator of another layout.
func startLayoutServer(t *testing.T, s flake.Settings) *testServer {
	t.Helper()
	g, err := flake.New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	gen := &testGen{g: g}
	srv, err := New(gen, Options{Loops: testLoops})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, gen: gen, addr: ln.Addr().String(), serve: make(chan error, 1)}
	_, ts.port, _ = net.SplitHostPort(ts.addr)
	go func() { ts.serve <- srv.Serve(ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	return ts
}

// Under a 53-bit layout the last ID, 2^53-1, decodes (the counter's
// machine ID at the last tick and sequence), and 2^53 is refused naming
// the layout's range.
func TestPARSE_BitsID53(t *testing.T) {
	ts := startLayoutServer(t, flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8, MachineID: 3})
	l := ts.gen.g.Layout()
	c := ts.dial(t)
	want := fmt.Sprintf("[$%s, :%d, :255, :255, $counter]", l.TickTime(l.MaxTick()).UTC().Format(rfc3339Millis), l.MaxTick())
	if got := c.do("PARSE 9007199254740991\r\n"); got != want {
		t.Errorf("PARSE 2^53-1 = %q, want %q", got, want)
	}
	if got := c.do("PARSE 9007199254740992\r\n"); !strings.HasPrefix(got, "-ERR invalid ID") || !strings.Contains(got, "0..9007199254740991") {
		t.Errorf("PARSE 2^53 = %q, want an error naming 0..2^53-1", got)
	}
	ts.checkServes(t)
}

// With regions PARSE appends the machine ID's region to the five fields;
// each region's last machine ID is its counter's.
func TestPARSE_Region_Appended(t *testing.T) {
	ts := startLayoutServer(t, flake.Settings{BitsSequence: 16, BitsMachineID: 4, BitsRegion: 1, Region: 1, MachineID: 9})
	l := ts.gen.g.Layout()
	c := ts.dial(t)
	for _, tc := range []struct {
		mid, region int
		mode        string
	}{{0, 0, "flake"}, {7, 0, "counter"}, {9, 1, "flake"}, {15, 1, "counter"}} {
		id, _ := l.Compose(100, 2, tc.mid)
		want := fmt.Sprintf("[$%s, :100, :2, :%d, $%s, :%d]", l.TickTime(100).UTC().Format(rfc3339Millis), tc.mid, tc.mode, tc.region)
		if got := c.do(resp("PARSE", fmt.Sprint(id))); got != want {
			t.Errorf("PARSE machine %d = %q, want %q", tc.mid, got, want)
		}
	}
}
