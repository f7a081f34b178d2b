package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/idtest"
)

func TestNEXTID_GoRedis(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, nil)
	ctx := context.Background()
	var last int64
	for range 100 {
		id, err := rdb.Do(ctx, "NEXTID").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("NEXTID %d after %d", id, last)
		}
		last = id
	}
	if got := ts.gen.g.Layout().Decompose(uint64(last)).MachineID; got != testMachine {
		t.Errorf("machine ID %d, want %d", got, testMachine)
	}
	if got := ts.stats.idsFlake.Load(); got != 100 {
		t.Errorf("ids issued = %d, want 100", got)
	}
}

func TestNEXTID_Pipeline10000_StrictlyIncreasing(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, &redis.Options{PoolSize: 1})
	ctx := context.Background()
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 10000 {
			p.Do(ctx, "NEXTID")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i, cmd := range cmds {
		id, err := cmd.(*redis.Cmd).Int64()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if id <= last {
			t.Fatalf("reply %d: %d after %d", i, id, last)
		}
		last = id
	}
}

func TestNEXTID_Inline(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	a, b := c.do("NEXTID\r\n"), c.do("nextid\n") // nc may send bare LF
	x, errA := strconv.ParseUint(strings.TrimPrefix(a, ":"), 10, 64)
	y, errB := strconv.ParseUint(strings.TrimPrefix(b, ":"), 10, 64)
	if !strings.HasPrefix(a, ":") || !strings.HasPrefix(b, ":") || errA != nil || errB != nil || y <= x {
		t.Fatalf("inline NEXTID: %q then %q", a, b)
	}
	if got := c.do("NEXTID extra\r\n"); got != "-ERR syntax error: the only option of NEXTID is STRING (IDs as bulk strings)" {
		t.Errorf("NEXTID extra: %q", got)
	}
}

func TestNEXTID_GeneratorError(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	ts.gen.g.Close()
	for _, req := range []string{resp("NEXTID"), resp("NEXTIDS", "5")} {
		if got := c.do(req); !strings.HasPrefix(got, "-ERR no ID issued: ") || !strings.Contains(got, "closed") {
			t.Errorf("%q with a closed generator: %q", req, got)
		}
	}
	if got := ts.stats.nextIDErrors.Load(); got != 2 {
		t.Errorf("nextid errors = %d, want 2", got)
	}
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Errorf("PING after the errors: %q", got)
	}
}

// NEXTID allocates nothing, the way an event loop runs it and the way a
// goroutine does.
func TestNEXTID_NoAllocations(t *testing.T) {
	ts := startServer(t, Options{})
	c := &conn{s: ts.Server, p: newReqParser(ts.opts), fd: -1, authed: true}
	args := [][]byte{[]byte("NEXTID")}
	for _, inLoop := range []bool{true, false} {
		c.inLoop = inLoop
		run := func() {
			c.out = c.out[:0]
			c.exec(args)
			if c.blocked || len(c.out) == 0 || c.out[0] != ':' {
				t.Fatalf("NEXTID (in a loop: %v): %q, blocked %v", inLoop, c.out, c.blocked)
			}
		}
		run()
		if a := testing.AllocsPerRun(1000, run); a != 0 {
			t.Errorf("NEXTID (in a loop: %v): %v allocations, want 0", inLoop, a)
		}
	}
}

// NEXTID STRING: the ID as a bulk string of its decimal digits, the same
// bytes in RESP2 and RESP3; the option in any case; anything else is an
// error that names the option, and issues nothing.
func TestNEXTID_String(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	var ids []uint64
	for _, req := range []string{"NEXTID STRING\r\n", "HELLO 3\r\n", resp("nextid", "string"), "HELLO 2\r\n", "NEXTID\r\n"} {
		c.send(req)
		if strings.HasPrefix(req, "HELLO") {
			c.read()
			continue
		}
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if req == "NEXTID\r\n" {
			id, err := strconv.ParseUint(strings.TrimSuffix(line[1:], "\r\n"), 10, 64)
			if line[0] != ':' || err != nil {
				t.Fatalf("NEXTID = %q", line)
			}
			ids = append(ids, id)
			continue
		}
		digits, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		digits = strings.TrimSuffix(digits, "\r\n")
		id, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || line != fmt.Sprintf("$%d\r\n", len(digits)) || strconv.FormatUint(id, 10) != digits {
			t.Fatalf("%q = %q %q", req, line, digits)
		}
		ids = append(ids, id)
	}
	idtest.Increasing(t, ts.gen.g.Layout(), "NEXTID [STRING]", ids)
	before := ts.issued()
	for _, req := range []string{"NEXTID STRINGS\r\n", "NEXTID STRING STRING\r\n", "NEXTID 1\r\n"} {
		if got := c.do(req); got != "-ERR syntax error: the only option of NEXTID is STRING (IDs as bulk strings)" {
			t.Errorf("%q = %q", req, got)
		}
	}
	if ts.issued() != before {
		t.Errorf("the refused requests issued %d IDs", ts.issued()-before)
	}
	// go-redis gets a string, which a JavaScript client would not round.
	v, err := ts.client(t, nil).Do(context.Background(), "NEXTID", "STRING").Result()
	if s, ok := v.(string); err != nil || !ok || len(s) < 17 {
		t.Errorf("go-redis NEXTID STRING = %#v, %v", v, err)
	}
}

// NEXTID STRING allocates nothing either.
func TestNEXTID_StringNoAllocations(t *testing.T) {
	ts := startServer(t, Options{})
	c := &conn{s: ts.Server, p: newReqParser(ts.opts), fd: -1, authed: true}
	args := [][]byte{[]byte("NEXTID"), []byte("STRING")}
	run := func() {
		c.out = c.out[:0]
		c.exec(args)
		if len(c.out) == 0 || c.out[0] != '$' {
			t.Fatalf("NEXTID STRING: %q", c.out)
		}
	}
	run()
	if a := testing.AllocsPerRun(1000, run); a != 0 {
		t.Errorf("NEXTID STRING: %v allocations, want 0", a)
	}
}
