package tests

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redistest"
)

// aclFile is the users file docs/operating.md documents.
const aclFile = "../deploy/redis/acl.conf"

// aclRules are the rules the users file gives user.
func aclRules(t *testing.T, user string) []string {
	t.Helper()
	b, err := os.ReadFile(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "user" && f[1] == user {
			return f[2:]
		}
	}
	t.Fatalf("%s: no user %s", aclFile, user)
	return nil
}

// aclPassword is the password the users file gives user (the noinfo
// variant has the node user's).
func aclPassword(t *testing.T, user string) string {
	t.Helper()
	for _, rule := range aclRules(t, strings.TrimSuffix(user, "-noinfo")) {
		if p, ok := strings.CutPrefix(rule, ">"); ok {
			return p
		}
	}
	t.Fatalf("%s: user %s has no >password", aclFile, user)
	return ""
}

// aclURL is srv's URL as user.
func aclURL(t *testing.T, srv *redistest.Server, user string) string {
	u := url.URL{Scheme: "redis", Host: srv.Addr(), Path: "/0", User: url.UserPassword(user, aclPassword(t, user))}
	return u.String()
}

// flakedCmd runs the flaked binary with args for at most 20 s.
func flakedCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	return exitCode(err), string(out)
}

// The fleet's nodes run under the users file's node user, and audit,
// whois and verify under its read-only user, on a real redis-server that
// loaded the file: claims, renewals (1 s leases), reservations, the
// counter and releases work, the clock guard reads TIME, guard.lua reads
// the server's identity (INFO), and Redis logs no refusal (ACL LOG). Prune
// writes: it works with its own user and is refused to the read-only one,
// and a node under the read-only user fails at start naming the refused
// command and the ACL section of docs/operating.md.
func TestRedisACL_NodeAndAuditUsers(t *testing.T) {
	redistest.Require(t)
	abs, err := filepath.Abs(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Options{Args: []string{"aclfile " + abs}})
	admin := srv.Client(t) // the default user: not in the file, so all may
	nodeURL, auditURL := aclURL(t, srv, "flaked-node"), aclURL(t, srv, "flaked-audit")

	// flaked init under the node user: the node's rights are enough.
	if code, out := flakedCmd(t, "init", "--redis", nodeURL); code != 0 {
		t.Fatalf("flaked init as flaked-node: status %d\n%s", code, out)
	}
	ds := []*Daemon{
		NewDaemon(t, "flake", nodeURL, "--lease-ttl", "1s", "--machine-ids", "2"),
		NewDaemon(t, "auto", nodeURL, "--lease-ttl", "1s", "--mode", "auto"),
		NewDaemon(t, "counter", nodeURL, "--lease-ttl", "1s", "--mode", "counter"),
	}
	for _, d := range ds {
		d.MustStart()
		d.WaitReady(t, 20*time.Second)
	}
	load := StartLoad(ds, 2, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "IDs under the node user")
	time.Sleep(2 * time.Second) // renewals: every 1/3 s with --lease-ttl 1s
	load.Stop()
	load.Check(t, defaultLayout())
	ids := load.IDsOf("flake")
	if len(ids) == 0 {
		t.Fatal("no IDs from the flake node")
	}
	if server, _ := admin.HGet(ctxT(t), "{flaked}:meta", "server").Result(); !strings.Contains(server, ":") {
		t.Fatalf("{flaked}:meta server = %q: guard.lua could not read the server's identity (INFO) under the node user", server)
	}
	// The start checks ran under the node user (their persistence
	// finding is logged), with only its commands: ACL LOG stays empty.
	if l := ds[0].Log(); !strings.Contains(l, `"check":"persistence"`) || strings.Contains(l, "cannot check the fleet's Redis") {
		t.Fatalf("the start checks did not run under the node user:\n%s", l)
	}
	for _, d := range ds {
		if err := d.Term(); err != nil {
			t.Fatalf("%s: stop: %v\n%s", d.Name, err, d.log.String())
		}
	}

	for _, args := range [][]string{
		{"audit", "--redis", auditURL},
		{"audit", "verify", "--redis", auditURL},
		{"audit", "history", "--redis", auditURL, strconv.Itoa(defaultLayout().Decompose(ids[0]).MachineID)},
		{"whois", "--redis", auditURL, strconv.FormatUint(ids[len(ids)-1], 10)},
	} {
		if code, out := flakedCmd(t, args...); code != 0 || (args[1] == "--redis" && !strings.Contains(out, "released")) {
			t.Fatalf("flaked %s: exit %d\n%s", strings.Join(args[:2], " "), code, out)
		}
	}
	// The users docs/operating.md names for the other commands that touch
	// the registry: seq create, seq restore and audit replicas --set write
	// as the node user; seq list and seq show read as the audit user.
	for _, args := range [][]string{
		{"seq", "create", "--redis", nodeURL, "orders"},
		{"seq", "restore", "--redis", nodeURL, "--above", "5000", "orders"},
		{"audit", "replicas", "--redis", nodeURL, "--set", "0"},
		{"seq", "list", "--redis", auditURL},
		{"seq", "show", "--redis", auditURL, "orders"},
	} {
		if code, out := flakedCmd(t, args...); code != 0 {
			t.Fatalf("flaked %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if users := aclLogUsers(t, admin); len(users) != 0 {
		t.Fatalf("ACL LOG names users %v: the users file misses a permission flaked uses", users)
	}

	// Refused: writes under the read-only user. The released IDs'
	// reservations (their last ticks: ahead of the clock, as the nodes'
	// generators started at the loss floor init recorded) are then in the
	// past, so prune has something to write.
	top := int64(-1)
	for _, v := range admin.HVals(ctxT(t), "{flaked}:reserved").Val() {
		r, _ := strconv.ParseInt(v, 10, 64)
		top = max(top, r)
	}
	time.Sleep(time.Until(defaultLayout().TickTime(top + 1)))
	code, out := flakedCmd(t, "audit", "prune", "--redis", auditURL, "--older-than", "1ms")
	if code != 1 || !strings.Contains(out, "NOPERM") || !strings.Contains(out, "Redis ACLs") {
		t.Fatalf("prune under the read-only user: exit %d\n%s\nwant 1, NOPERM and the ACL hint", code, out)
	}
	code, out = runServe(t, redistest.FreePort(t), "--redis", auditURL, "--no-state-file")
	if code != 1 || !strings.Contains(out, "NOPERM") || !strings.Contains(out, "Redis ACLs") || !strings.Contains(out, "serve: the fleet's Redis is unsafe") {
		t.Fatalf("a node under the read-only user: exit %d\n%s\nwant 1, what it was doing, NOPERM and the ACL hint", code, out)
	}
	// Without INFO, guard.lua cannot read the server's identity: the
	// start refuses such a user (and so would every writing script).
	rules := []any{"ACL", "SETUSER", "flaked-node-noinfo"}
	for _, r := range aclRules(t, "flaked-node") {
		if r != "+info" {
			rules = append(rules, r)
		}
	}
	if err := admin.Do(ctxT(t), rules...).Err(); err != nil {
		t.Fatal(err)
	}
	code, out = runServe(t, redistest.FreePort(t), "--redis", aclURL(t, srv, "flaked-node-noinfo"), "--no-state-file")
	if code != 1 || !strings.Contains(out, "identity: INFO server replication memory refused") || !strings.Contains(out, "+info") || !strings.Contains(out, "Redis ACLs") {
		t.Fatalf("a node under a user without INFO: exit %d\n%s\nwant 1, NOPERM naming info and the ACL hint", code, out)
	}
	code, out = flakedCmd(t, "audit", "prune", "--redis", aclURL(t, srv, "flaked-prune"), "--older-than", "1ms")
	if code != 0 || !strings.Contains(out, "forgot 3 machine IDs") {
		t.Fatalf("prune under its user: exit %d\n%s\nwant 0 and the 3 released IDs forgotten", code, out)
	}
	if users := aclLogUsers(t, admin); len(users) != 2 || !users["flaked-audit"] || !users["flaked-node-noinfo"] {
		t.Fatalf("ACL LOG names users %v, want only flaked-audit and flaked-node-noinfo (the refusals above)", users)
	}
}

// aclLogUsers are the users ACL LOG names (each refusal is an entry).
func aclLogUsers(t *testing.T, admin *redis.Client) map[string]bool {
	t.Helper()
	entries, err := admin.Do(ctxT(t), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, e := range entries {
		switch e := e.(type) {
		case map[any]any: // RESP3
			users[fmt.Sprint(e["username"])] = true
		case []any: // RESP2: name, value, ...
			for i := 0; i+1 < len(e); i += 2 {
				if e[i] == "username" {
					users[fmt.Sprint(e[i+1])] = true
				}
			}
		}
	}
	return users
}
