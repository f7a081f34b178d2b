package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/idtest"
)

// idsIn pulls the IDs out of a rendered reply: integers (":n") and bulk
// strings of digits ("$n").
func idsIn(t *testing.T, reply string) []uint64 {
	t.Helper()
	var ids []uint64
	for _, f := range strings.FieldsFunc(reply, func(r rune) bool { return r == '[' || r == ']' || r == ',' || r == ' ' }) {
		if len(f) < 2 || f[0] != ':' && f[0] != '$' {
			continue
		}
		id, err := strconv.ParseUint(f[1:], 10, 64)
		if err != nil {
			t.Fatalf("not an ID %q in %.80q", f, reply)
		}
		ids = append(ids, id)
	}
	return ids
}

// issued is how many IDs the server has issued (INFO's ids_issued).
func (ts *testServer) issued() uint64 { return ts.stats.idsFlake.Load() + ts.stats.idsCounter.Load() }

// A transaction that is discarded or aborted issues no ID: no reply
// carries one, and the generator's counters (INFO ids_issued) stay 0.
func TestMULTI_DiscardedOrAbortedIssuesNothing(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for _, tc := range []struct {
		name, end, want string
		bad             []string // requests that doom the transaction
	}{
		{"discard", "DISCARD", "+OK", nil},
		{"unknown command", "EXEC", "-EXECABORT Transaction discarded because of previous errors.", []string{"NEXTIDD"}},
		{"wrong arity", "EXEC", "-EXECABORT Transaction discarded because of previous errors.", []string{"PARSE"}},
		{"reset", "RESET", "+RESET", nil},
	} {
		reqs := []string{"MULTI", "NEXTID", "NEXTIDS 50", "NEXTID STRING"}
		reqs = append(reqs, tc.bad...)
		reqs = append(reqs, "NEXTIDS 3 STRING", tc.end)
		var replies []string
		for _, r := range reqs {
			replies = append(replies, c.do(r+"\r\n"))
		}
		for i, r := range replies[1 : len(replies)-1] {
			if r != "+QUEUED" && !strings.HasPrefix(r, "-ERR") {
				t.Errorf("%s: %q = %q", tc.name, reqs[i+1], r)
			}
		}
		if got := replies[len(replies)-1]; got != tc.want {
			t.Errorf("%s: %s = %q, want %q", tc.name, tc.end, got, tc.want)
		}
		if n, g := ts.issued(), ts.gen.given.Load(); n != 0 || g != 0 {
			t.Fatalf("%s: %d IDs issued (INFO), %d by the generator, want 0", tc.name, n, g)
		}
	}
	info := c.do("INFO stats\r\n")
	if !strings.Contains(info, "\r\nids_issued:0\r\n") {
		t.Errorf("INFO stats after the transactions: %q", info)
	}
	// The same connection still issues IDs, outside a transaction.
	if got := c.do("NEXTID\r\n"); !strings.HasPrefix(got, ":") || ts.issued() != 1 {
		t.Errorf("NEXTID after: %q, %d issued", got, ts.issued())
	}
}

// EXEC issues the transaction's IDs, each once, strictly increasing in
// the order of the queued commands, as integers or strings as asked, in
// RESP2 and RESP3.
func TestMULTI_ExecIDsUniqueAndIncreasing(t *testing.T) {
	ts := startServer(t, Options{})
	for _, proto := range []string{"2", "3"} {
		c := ts.dial(t)
		c.do("HELLO " + proto + "\r\n")
		before := ts.issued()
		c.send("MULTI\r\nNEXTID\r\nNEXTIDS 100\r\nNEXTID STRING\r\nPING\r\nNEXTIDS 7 STRING\r\nNEXTIDS 0\r\nNEXTID\r\nEXEC\r\n")
		if got := c.read(); got != "+OK" {
			t.Fatalf("MULTI = %q", got)
		}
		for range 7 {
			if got := c.read(); got != "+QUEUED" {
				t.Fatalf("RESP%s: queued: %q", proto, got)
			}
		}
		exec := c.read()
		parts := strings.SplitN(exec, ", ", 2)
		if !strings.HasPrefix(parts[0], "[:") || !strings.Contains(exec, ", +PONG, ") ||
			!strings.Contains(exec, ", -ERR NEXTIDS count must be an integer in 1..10000, ") {
			t.Fatalf("RESP%s: EXEC = %.200q", proto, exec)
		}
		ids := idsIn(t, exec)
		if len(ids) != 1+100+1+7+1 {
			t.Fatalf("RESP%s: %d IDs in EXEC's reply, want 110", proto, len(ids))
		}
		if !strings.Contains(exec, fmt.Sprintf("$%d, +PONG", ids[101])) || !strings.Contains(exec, fmt.Sprintf("[$%d, ", ids[102])) {
			t.Errorf("RESP%s: STRING IDs are not bulk strings: %.300q", proto, exec)
		}
		idtest.Increasing(t, ts.gen.g.Layout(), "EXEC", ids)
		if n, g := ts.issued()-before, ts.gen.given.Load()-before; n != uint64(len(ids)) || g != n {
			t.Errorf("RESP%s: %d IDs issued (INFO), %d by the generator, %d in the reply", proto, n, g, len(ids))
		}
	}
}

// Clients running transactions while others take IDs one by one, with the
// generator refusing now and then so connections move between event loops
// and goroutines: every ID is issued once.
func TestMULTI_ConcurrentTransactionsUnique(t *testing.T) {
	ts := startServer(t, Options{})
	ts.gen.refuseEvery.Store(5)
	ctx := context.Background()
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	add := func(ids ...uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	for w := range 6 {
		rdb := ts.client(t, &redis.Options{Protocol: 2 + w%2, PoolSize: 2})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				if w%3 == 2 { // plain requests
					id, err := rdb.Do(ctx, "NEXTID").Uint64()
					if err != nil {
						t.Error(err)
						return
					}
					add(id)
					continue
				}
				cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Do(ctx, "NEXTID")
					p.Do(ctx, "NEXTIDS", 20)
					p.Do(ctx, "NEXTID", "STRING")
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				var ids []uint64
				for _, cmd := range cmds {
					ids = append(ids, cmdIDs(t, cmd.(*redis.Cmd))...)
				}
				if len(ids) != 22 {
					t.Errorf("transaction gave %d IDs, want 22", len(ids))
				}
				idtest.Increasing(t, ts.gen.g.Layout(), "transaction", ids)
				add(ids...)
			}
		}()
	}
	wg.Wait()
	idtest.Unique(t, ts.gen.g.Layout(), all)
	if want := uint64(4*40*22 + 2*40); uint64(len(all)) != want || ts.issued() != want || ts.gen.given.Load() != want {
		t.Errorf("%d IDs received, %d issued (INFO), %d by the generator, want %d", len(all), ts.issued(), ts.gen.given.Load(), want)
	}
}

// cmdIDs reads the IDs of a NEXTID or NEXTIDS reply, integers or strings.
func cmdIDs(t *testing.T, cmd *redis.Cmd) []uint64 {
	t.Helper()
	one := func(v any) uint64 {
		switch v := v.(type) {
		case int64:
			return uint64(v)
		case string:
			id, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("ID %q: %v", v, err)
			}
			return id
		}
		t.Fatalf("ID of type %T", v)
		return 0
	}
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	if list, ok := v.([]any); ok {
		out := make([]uint64, len(list))
		for i, e := range list {
			out[i] = one(e)
		}
		return out
	}
	return []uint64{one(v)}
}

// Redis's errors around transactions; a doomed transaction still answers
// +QUEUED, and NOAUTH dooms it too.
func TestMULTI_Errors(t *testing.T) {
	ts := startServer(t, Options{RequirePass: "pw"})
	c := ts.dial(t)
	for _, tc := range []struct{ req, want string }{
		{"MULTI", "-NOAUTH Authentication required."},
		{"EXEC", "-NOAUTH Authentication required."},
		{"AUTH pw", "+OK"},
		{"EXEC", "-ERR EXEC without MULTI"},
		{"DISCARD", "-ERR DISCARD without MULTI"},
		{"MULTI", "+OK"},
		{"MULTI", "-ERR MULTI calls can not be nested"},
		{"WATCH a", "-ERR WATCH inside MULTI is not allowed"},
		{"NEXTID", "+QUEUED"},
		{"EXEC x", "-ERR wrong number of arguments for 'exec' command"},
		{"NEXTID", "+QUEUED"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		{"MULTI", "+OK"},
		{"NEXTID BOGUS", "+QUEUED"}, // the command's own error, at EXEC
		{"NEXTIDS 1 STRING STRING", "+QUEUED"},
		{"EXEC", "[-ERR syntax error: the only option of NEXTID is STRING (IDs as bulk strings), -ERR syntax error: the only option of NEXTIDS is STRING (IDs as bulk strings)]"},
		{"WATCH a b", "+OK"},
		{"UNWATCH", "+OK"},
		{"MULTI", "+OK"},
		{"EXEC", "[]"},
	} {
		if got := c.do(tc.req + "\r\n"); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	if n := ts.issued(); n != 0 {
		t.Errorf("%d IDs issued, want 0", n)
	}
}

// A transaction asks for at most MaxBatch IDs in all and holds at most
// MaxArgs × MaxBulk bytes; beyond, the request is refused and EXEC aborts.
func TestMULTI_Limits(t *testing.T) {
	ts := startServer(t, Options{MaxBatch: 10, MaxArgs: 8, MaxBulk: 64})
	c := ts.dial(t)
	for _, tc := range []struct{ req, want string }{
		{"MULTI", "+OK"},
		{"NEXTIDS 6", "+QUEUED"},
		{"NEXTID", "+QUEUED"},
		{"NEXTIDS 4", "-ERR transaction too large: it may ask for 10 IDs at most in all (NEXTIDS's limit)"},
		{"NEXTID", "+QUEUED"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors."},
		{"MULTI", "+OK"},
		{"NEXTIDS 10", "+QUEUED"},
		{"EXEC", "[[:"},
		{"MULTI", "+OK"},
	} {
		if got := c.do(tc.req + "\r\n"); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	if n := ts.issued(); n != 10 {
		t.Errorf("%d IDs issued, want 10", n)
	}
	ping := "PING " + strings.Repeat("x", 60) + "\r\n"
	var got string
	for i := 0; i < 8 && !strings.HasPrefix(got, "-"); i++ { // 8 × 64 bytes at most
		got = c.do(ping)
	}
	if got != "-ERR transaction too large: it may hold 512 bytes at most" {
		t.Errorf("PING past the byte limit: %q", got)
	}
	if got := c.do("EXEC\r\n"); got != "-EXECABORT Transaction discarded because of previous errors." {
		t.Errorf("EXEC = %q", got)
	}
}

// CLIENT INFO shows the transaction (flags x, multi), as Redis's.
func TestMULTI_ClientInfo(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	c.send("MULTI\r\nPING\r\nNEXTID\r\nCLIENT INFO\r\nEXEC\r\n")
	for range 4 {
		c.read()
	}
	exec := c.read()
	if !strings.Contains(exec, " flags=x ") || !strings.Contains(exec, " multi=3 ") {
		t.Errorf("CLIENT INFO in EXEC: %q", exec)
	}
	if got := c.do("CLIENT INFO\r\n"); !strings.Contains(got, " flags=N ") || !strings.Contains(got, " multi=-1 ") {
		t.Errorf("CLIENT INFO after EXEC: %q", got)
	}
}
