package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// auditFleet is a small fleet in namespace "cli": node A live, node B
// stopped cleanly (released), and a lease C that stopped renewing (what a
// crash looks like) and ran out (expired).
type auditFleet struct {
	url        string
	a          *node.Node
	midA, midB int
	midC       int
	idA, idB   uint64
}

func startAuditFleet(t *testing.T) *auditFleet {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb, err := redisurl.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ctx := idtest.Context(t, time.Minute)
	l, err := flake.NewLayout(8, 3, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	if err := redistest.InitRegistry(ctx, rdb, "cli", l.String()); err != nil {
		t.Fatal(err)
	}
	reg := func(addr string) coord.Options {
		return coord.Options{Namespace: "cli", Layout: l, LeaseTTL: time.Second, Owner: coord.Owner{Addr: addr, Version: "cli-test"}}
	}
	newNode := func(addr string) *node.Node {
		n, err := node.New(ctx, node.Options{Redis: rdb, Registry: reg(addr), MaxLead: 20 * time.Millisecond, ReserveAhead: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	f := &auditFleet{url: srv.URL()}
	f.a = newNode("node-a:7001")
	t.Cleanup(func() { f.a.Close(context.Background()) })
	b := newNode("node-b:7002")
	f.midA, f.midB = f.a.MachineIDs()[0], b.MachineIDs()[0]
	if f.idA, err = f.a.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	if f.idB, err = b.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	o := reg("crashed:7003")
	o.MaxWait, o.Horizon = 3*time.Second, 10*time.Millisecond // the fleet's own horizon (in {cli}:meta) still applies
	r, err := coord.NewRegistry(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Claim(ctx, coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// B releases only now, so C cannot have taken B's machine ID.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.KeepAlive()
	c.Abandon()
	f.midC = c.MachineIDs()[0]
	// Wait for C's lease to run out.
	poll.Until(t, 10*time.Second, "the abandoned lease to run out", func() bool {
		return rdb.Exists(ctx, "{cli}:lease:"+strconv.Itoa(f.midC)).Val() == 0
	})
	return f
}

func (f *auditFleet) args(cmd ...string) []string {
	return append(cmd, "--redis", f.url, "--namespace", "cli")
}

func TestAudit_Fleet_TableJSONFilterHistoryWhoisVerify(t *testing.T) {
	f := startAuditFleet(t)

	code, out, errs := runT(t, nil, f.args("audit")...)
	if code != exitOK || errs != "" {
		t.Fatalf("audit: exit %d, stderr %q", code, errs)
	}
	for mid, want := range map[int][]string{f.midA: {"live", "node-a:7001"}, f.midB: {"released", "node-b:7002"}, f.midC: {"expired", "crashed:7003"}} {
		line := tableRow(t, out, mid)
		for _, w := range want {
			if !strings.Contains(line, " "+w+" ") {
				t.Errorf("row of %d lacks %q: %q", mid, w, line)
			}
		}
	}
	if !strings.Contains(out, "3 machine IDs: 1 live, 1 expired, 1 released, 0 orphan, 0 conflict; 6 of 7 leasable IDs free") {
		t.Errorf("summary missing:\n%s", out)
	}

	code, out, _ = runT(t, nil, f.args("audit", "--json")...)
	var rep struct {
		Machines []struct {
			MachineID int    `json:"machine_id"`
			State     string `json:"state"`
			Owner     struct{ Addr, Version string }
		}
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Machines) != 3 {
		t.Fatalf("audit --json: exit %d:\n%s", code, out)
	}
	for _, m := range rep.Machines {
		want := map[int]string{f.midA: "live", f.midB: "released", f.midC: "expired"}[m.MachineID]
		if m.State != want || m.Owner.Version != "cli-test" {
			t.Errorf("JSON machine %+v, want state %s", m, want)
		}
	}

	code, out, _ = runT(t, nil, f.args("audit", "--state", "expired,released")...)
	if code != exitOK || strings.Contains(out, " live ") || !strings.Contains(out, " expired ") || !strings.Contains(out, "showing 2 (expired, released)") {
		t.Errorf("--state expired,released: exit %d:\n%s", code, out)
	}

	code, out, _ = runT(t, nil, f.args("audit", "verify")...)
	if code != exitOK || !strings.HasPrefix(out, "consistent: namespace cli, 3 machine IDs") {
		t.Errorf("verify: exit %d:\n%s", code, out)
	}

	code, out, _ = runT(t, nil, append(f.args("audit", "history"), strconv.Itoa(f.midB))...)
	if code != exitOK || !strings.Contains(out, "  claim  ") || !strings.Contains(out, "  release  ") ||
		!strings.Contains(out, "addr node-b:7002") || !strings.Contains(out, "now: released") {
		t.Errorf("history: exit %d:\n%s", code, out)
	}

	for _, tc := range []struct {
		id   uint64
		addr string
	}{{f.idA, "node-a:7001"}, {f.idB, "node-b:7002"}} {
		code, out, _ = runT(t, nil, append(f.args("whois"), flake.FormatID(tc.id))...)
		if code != exitOK || !strings.Contains(out, "owner:     ") || !strings.Contains(out, "addr "+tc.addr) {
			t.Errorf("whois %d: exit %d:\n%s", tc.id, code, out)
		}
	}
	code, out, _ = runT(t, nil, append(f.args("whois", "--json"), flake.FormatBase32(f.idA))...)
	var w struct {
		Known bool
		Owner struct{ Addr string }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &w) != nil || !w.Known || w.Owner.Addr != "node-a:7001" {
		t.Errorf("whois --json (base32): exit %d:\n%s", code, out)
	}
	// An ID under a machine ID nobody ever claimed: no owner, exit 1.
	unused := 0
	for unused == f.midA || unused == f.midB || unused == f.midC {
		unused++
	}
	l, _ := flake.NewLayout(8, 3, 10*time.Millisecond, flake.DefaultStartTime)
	id, _ := l.Compose(l.Tick(time.Now()), 0, unused)
	code, out, errs = runT(t, nil, append(f.args("whois"), flake.FormatID(id))...)
	if code != exitFailure || !strings.Contains(out, "owner:     unknown") || !strings.Contains(errs, "no owner found") {
		t.Errorf("whois of an unclaimed machine ID: exit %d, stdout:\n%s\nstderr %q", code, out, errs)
	}
}

func TestAudit_Verify_HandMadeInconsistency_Exit1(t *testing.T) {
	f := startAuditFleet(t)
	rdb, _ := redisurl.NewClient(f.url)
	defer rdb.Close()
	ctx := context.Background()
	// A live lease's owner data names another token (a deleted owner hash
	// would be written back whole by the owner's next renewal), and the
	// released ID's reservation drops far below the tick its owner used.
	if err := rdb.HSet(ctx, "{cli}:owner:"+strconv.Itoa(f.midA), "token", "f0f0f0f0deadbeef").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "{cli}:reserved", f.midB, 5).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runT(t, nil, f.args("audit", "verify")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantA := "machine ID " + strconv.Itoa(f.midA) + ": lease token "
	wantB := "machine ID " + strconv.Itoa(f.midB) + ": reservation 5 is below tick "
	if code != exitFailure || len(lines) != 2 || !strings.Contains(errs, "2 inconsistencies in namespace cli") {
		t.Fatalf("verify: exit %d, stdout:\n%s\nstderr %q; want exit 1, two lines", code, out, errs)
	}
	if got := strings.Join(lines, "\n"); !strings.Contains(got, wantA) || !strings.Contains(got, "differs from the owner data's token f0f0f0f0") || !strings.Contains(got, wantB) {
		t.Errorf("findings:\n%s\nwant lines starting %q and %q", got, wantA, wantB)
	}
	code, out, _ = runT(t, nil, f.args("audit", "verify", "--json")...)
	var v struct {
		Consistent bool
		Findings   []struct{ Check string }
	}
	if code != exitFailure || json.Unmarshal([]byte(out), &v) != nil || v.Consistent || len(v.Findings) != 2 {
		t.Errorf("verify --json: exit %d:\n%s", code, out)
	}
	// The table marks both as conflicts and says why under it.
	code, out, _ = runT(t, nil, f.args("audit")...)
	if code != exitOK || !strings.Contains(tableRow(t, out, f.midA), " conflict ") || !strings.Contains(tableRow(t, out, f.midB), " conflict ") ||
		!strings.Contains(out, "2 inconsistencies:\n"+lines[0]) {
		t.Errorf("table after the damage:\n%s", out)
	}
}

func TestAudit_Prune_DryRunThenForget_LiveKept(t *testing.T) {
	f := startAuditFleet(t)
	time.Sleep(300 * time.Millisecond) // B's and C's reservations end >= 200 ms ago
	code, out, _ := runT(t, nil, f.args("audit", "prune", "--older-than", "200ms", "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "would forget (dry run) 2 machine IDs") ||
		!strings.Contains(out, "kept          "+strconv.Itoa(f.midA)+"  live") {
		t.Fatalf("dry run: exit %d:\n%s", code, out)
	}
	code, out, _ = runT(t, nil, f.args("audit", "--state", "released,expired")...)
	if code != exitOK || !strings.Contains(out, "showing 2") {
		t.Fatalf("the dry run changed the registry: exit %d:\n%s", code, out)
	}
	code, out, _ = runT(t, map[string]string{"FLAKED_OLDER_THAN": "200ms"}, f.args("audit", "prune", "--json")...)
	var res struct {
		Pruned []struct {
			MachineID int `json:"machine_id"`
		}
		Kept []struct {
			MachineID int `json:"machine_id"`
			Reason    string
		}
	}
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res.Pruned) != 2 || len(res.Kept) != 1 || res.Kept[0].MachineID != f.midA {
		t.Fatalf("prune (FLAKED_OLDER_THAN): exit %d:\n%s", code, out)
	}
	code, out, _ = runT(t, nil, f.args("audit")...)
	if code != exitOK || !strings.Contains(out, "1 machine ID: 1 live, 0 expired, 0 released") || !strings.Contains(out, "2 pruned (reservation kept)") {
		t.Errorf("after prune: exit %d:\n%s", code, out)
	}
	if _, err := f.a.NextID(context.Background()); err != nil {
		t.Errorf("live node after prune: %v", err)
	}
}

func TestAudit_Env_RedisNamespaceJSON(t *testing.T) {
	f := startAuditFleet(t)
	env := map[string]string{"FLAKED_REDIS": f.url, "FLAKED_NAMESPACE": "cli", "FLAKED_JSON": "true", "FLAKED_STATE": "live"}
	code, out, errs := runT(t, env, "audit")
	var rep struct {
		Namespace string
		Machines  []struct{ State string }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Namespace != "cli" || len(rep.Machines) != 1 || rep.Machines[0].State != "live" {
		t.Fatalf("env: exit %d, stderr %q:\n%s", code, errs, out)
	}
	// The flag wins over FLAKED_NAMESPACE; another namespace is empty.
	code, out, _ = runT(t, nil, "audit", "--namespace", "other", "--json=false")
	if code != exitOK || !strings.Contains(out, "namespace other ") || !strings.Contains(out, "0 machine IDs") {
		t.Errorf("other namespace: exit %d:\n%s", code, out)
	}
}

func TestAudit_BadInput_Exit2(t *testing.T) {
	r := "redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no redis", []string{"audit"}, "--redis (or FLAKED_REDIS) is required"},
		{"bad scheme", []string{"audit", "--redis", "http://x:1"}, "unknown scheme"},
		{"bad namespace", []string{"audit", "--redis", r, "--namespace", "a b"}, "namespace"},
		{"bad state", []string{"audit", "--redis", r, "--state", "live,dead"}, "live, expired, released, orphan, conflict"},
		{"unknown subcommand", []string{"audit", "--redis", r, "bogus"}, `unknown subcommand "bogus"`},
		{"history without ID", []string{"audit", "history", "--redis", r}, "want one machine ID, got 0"},
		{"history text", []string{"audit", "history", "--redis", r, "seven"}, "non-negative integer"},
		{"verify with argument", []string{"audit", "verify", "--redis", r, "x"}, "no arguments"},
		{"prune without older-than", []string{"audit", "prune", "--redis", r}, "--older-than (or FLAKED_OLDER_THAN) is required"},
		{"prune older-than 0", []string{"audit", "prune", "--redis", r, "--older-than", "0s"}, "must be > 0"},
		{"prune older-than text", []string{"audit", "prune", "--redis", r, "--older-than", "a month"}, "older-than"},
		{"whois without ID", []string{"whois", "--redis", r}, "want one ID, got 0"},
		{"whois bad ID", []string{"whois", "--redis", r, "banana"}, "Crockford base32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runT(t, nil, tc.args...)
			if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr naming %q", code, out, errs, tc.want)
			}
		})
	}
}

func TestAudit_RedisDown_Exit1(t *testing.T) {
	for _, args := range [][]string{{"audit"}, {"whois", "12345"}} {
		all := append([]string{args[0]}, "--redis", "redis://127.0.0.1:1")
		all = append(all, args[1:]...)
		code, out, errs := runT(t, nil, all...)
		if code != exitFailure || out != "" || !strings.Contains(errs, "connection refused") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 naming the failure", args, code, out, errs)
		}
	}
}

// tableRow returns the table row of machine ID mid.
func tableRow(t *testing.T, table string, mid int) string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == strconv.Itoa(mid) {
			return line
		}
	}
	t.Fatalf("no row for machine ID %d:\n%s", mid, table)
	return ""
}

// TestAudit_Verify_Clone_Exit1: two live leases whose owner data carries
// one state-file node ID under two tokens (written by hand, as claim.lua
// writes them) are one finding naming both processes and their machine
// IDs; verify exits 1 while it lasts, the table shows the IDs in
// conflict, history says why. With one token it is one process: no
// finding.
func TestAudit_Verify_Clone_Exit1(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb, err := redisurl.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	l, _ := flake.NewLayout(8, 3, 10*time.Millisecond, flake.DefaultStartTime)
	now := time.Now()
	const node = "0123abcd4567ef89"
	p := rdb.TxPipeline()
	p.Set(ctx, "{clone}:layout", l.String(), 0)
	p.HSet(ctx, "{clone}:meta", "generation", "g", "created_ms", now.Add(-time.Hour).UnixMilli(),
		"created_tick", l.Tick(now.Add(-time.Hour)), "horizon", 500, "server", "", "loss_ms", 0)
	owners := []struct{ id, host, pid, addr, token string }{
		{"3", "host-a", "101", "10.0.0.1:7379", "aaaa1111aaaa1111aaaa1111aaaa1111"},
		{"5", "host-a", "101", "10.0.0.1:7379", "aaaa1111aaaa1111aaaa1111aaaa1111"},
		{"6", "host-b", "202", "10.0.0.2:7379", "bbbb2222bbbb2222bbbb2222bbbb2222"},
	}
	for _, o := range owners {
		p.SAdd(ctx, "{clone}:machines", o.id)
		p.HSet(ctx, "{clone}:reserved", o.id, l.Tick(now)+100)
		p.Set(ctx, "{clone}:lease:"+o.id, o.token, time.Minute)
		p.HSet(ctx, "{clone}:owner:"+o.id, "host", o.host, "pid", o.pid, "addr", o.addr, "version", "v1", "mode", "flake",
			"token", o.token, "state", "live", "heartbeat", now.UnixMilli(), "claimed", now.UnixMilli(), "node", node, "from_token", "")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	args := func(cmd ...string) []string { return append(cmd, "--redis", srv.URL(), "--namespace", "clone") }
	want := "machine IDs 3, 5 and 6: held by two live processes started from copies of one state file (node " + node + "): " +
		"host-a pid 101 addr 10.0.0.1:7379 token aaaa1111 (machine IDs 3 and 5) and host-b pid 202 addr 10.0.0.2:7379 token bbbb2222 (machine ID 6); " +
		"give one of them a state file of its own"

	code, out, errs := runT(t, nil, args("audit", "verify")...)
	if code != exitFailure || out != want+"\n" || !strings.Contains(errs, "1 inconsistency in namespace clone") {
		t.Fatalf("verify: exit %d, stdout:\n%s\nstderr %q\nwant exit 1 and the line\n%s", code, out, errs, want)
	}
	code, out, _ = runT(t, nil, args("audit", "verify", "--json")...)
	var v struct {
		Consistent bool
		Findings   []struct {
			MachineIDs []int `json:"machine_ids"`
			Check      string
			Message    string
		}
	}
	if code != exitFailure || json.Unmarshal([]byte(out), &v) != nil || v.Consistent || len(v.Findings) != 1 ||
		v.Findings[0].Check != "clone" || fmt.Sprint(v.Findings[0].MachineIDs) != "[3 5 6]" || !strings.Contains(want, v.Findings[0].Message) {
		t.Errorf("verify --json: exit %d:\n%s", code, out)
	}
	code, out, _ = runT(t, nil, args("audit")...)
	for _, mid := range []int{3, 5, 6} {
		if !strings.Contains(tableRow(t, out, mid), " conflict ") {
			t.Errorf("row of %d not in conflict:\n%s", mid, out)
		}
	}
	if code != exitOK || !strings.Contains(out, "3 conflict; 4 of 7 leasable IDs free") || !strings.HasSuffix(out, "1 inconsistency:\n"+want+"\n") {
		t.Errorf("table: exit %d:\n%s", code, out)
	}
	code, out, _ = runT(t, nil, append(args("audit", "history"), "6")...) // flags before the argument
	if code != exitOK || !strings.Contains(out, "now: conflict, owner host-b pid 202") || !strings.Contains(out, "problem: held by two live processes") {
		t.Errorf("history: exit %d:\n%s", code, out)
	}

	// host-b was started with a state file of its own (and claimed anew).
	if err := rdb.HSet(ctx, "{clone}:owner:6", "node", "fedc0987ba654321").Err(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runT(t, nil, args("audit", "verify")...); code != exitOK || !strings.HasPrefix(out, "consistent: namespace clone, 3 machine IDs") {
		t.Errorf("verify after the fix: exit %d:\n%s%s", code, out, errs)
	}
}
