// Package doctor checks, on a live deployment, the assumptions flaked's
// uniqueness rests on (docs/guarantees.md): that guard.lua can read the
// Redis server's identity from a script, that Redis cannot evict the
// registry's keys, what a crash-restart costs, replication and Sentinel
// timings, the clocks, the ACL of the connected user, the fleet's stored
// layout and horizon, and the lease TTL's costs. Each check is one file
// that registers itself (register); `flaked doctor` prints every Result,
// and `flaked serve` runs them at start (refusing Unsafe, warning Costly)
// and re-runs the Live ones while it serves (package daemon's watch).
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
)

// CheckTimeout bounds one run of the checks (Run, RunLive) by flaked
// doctor and flaked serve.
const CheckTimeout = 20 * time.Second

// Status is a check's verdict.
type Status int

const (
	// OK: the assumption holds.
	OK Status = iota
	// Costly: uniqueness holds, at a cost worth knowing (a wait after a
	// restart, a lease given up), or the check cannot tell.
	Costly
	// Unsafe: the assumption does not hold; flaked serve refuses to start,
	// or its scripts refuse to write.
	Unsafe
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Costly:
		return "costly"
	}
	return "unsafe"
}

// MarshalText writes the status as its name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Result is one finding of a check.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Server string `json:"server,omitempty"` // the Redis server it is about, if one
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Target is the deployment to check.
type Target struct {
	// Redis is the client of the fleet's Redis, as the nodes connect.
	Redis redis.UniversalClient
	// Sentinels are the addresses of the Sentinels watching MasterName,
	// if any; Sentinel connects to them.
	Sentinels  []string
	MasterName string
	// SentinelPassword authenticates to the Sentinels.
	SentinelPassword string
	// Namespace, Layout, LeaseTTL and MaxSkew are the nodes' settings
	// (zero: coord's defaults).
	Namespace string
	Layout    flake.Layout
	LeaseTTL  time.Duration
	MaxSkew   time.Duration
	// Clock is this host's clock; nil means the system clock.
	Clock clock.Clock
	// AsNode: the checks send only commands deploy/redis/acl.conf grants
	// its flaked-node user (no CONFIG GET, no ACL, HMGET rather than
	// HGETALL), so flaked serve's checks leave ACL LOG free of refusals;
	// what those commands would show is reported as unknown, and the acl
	// check is skipped.
	AsNode bool
	// IdentityNone: the nodes run with the opt-in --redis-identity=none
	// (contract.IdentityNone): the identity check reports what that loses
	// (costly) instead of refusing.
	IdentityNone bool
	// MinReplicas is the nodes' floor of replicas every grant must reach
	// (coord.Options.MinReplicas, --min-replicas); the splitbrain check
	// reports it with the mark. 0 is the default for the target, as
	// flaked serve takes it: coord.SentinelMinReplicas when Sentinels are
	// given, else none; NoMinReplicas (an explicit --min-replicas 0) is
	// none.
	MinReplicas int
}

// NoMinReplicas is Target.MinReplicas for nodes started with an explicit
// --min-replicas 0.
const NoMinReplicas = -1

// minReplicas is the floor the nodes use (Target.MinReplicas).
func (t Target) minReplicas() int {
	switch {
	case t.MinReplicas == NoMinReplicas:
		return 0
	case t.MinReplicas == 0 && len(t.Sentinels) > 0:
		return coord.SentinelMinReplicas
	}
	return t.MinReplicas
}

func (t Target) withDefaults() Target {
	if t.Namespace == "" {
		t.Namespace = coord.DefaultNamespace
	}
	if t.Layout.BitsTime == 0 {
		t.Layout = flake.DefaultLayout()
	}
	if t.LeaseTTL == 0 {
		t.LeaseTTL = coord.DefaultLeaseTTL
	}
	if t.MaxSkew == 0 {
		t.MaxSkew = coord.DefaultMaxSkew
	}
	if t.Clock == nil {
		t.Clock = clock.System()
	}
	return t
}

// check is one registered check.
type check struct {
	name string
	// live: the check reads what can change while the fleet runs
	// (CONFIG SET, ACL SETUSER): flaked serve's watch re-runs it.
	live bool
	run  func(ctx context.Context, e *env) []Result
}

var checks []check

// register adds a check; each check's file calls it from init, so a new
// check is one more file. They run in the order of the files' names.
func register(name string, live bool, run func(ctx context.Context, e *env) []Result) {
	checks = append(checks, check{name, live, run})
}

// Checks names the checks, in the order they run.
func Checks() []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.name)
	}
	return out
}

// Run runs every check against t.
func Run(ctx context.Context, t Target) []Result {
	return run(ctx, t, func(check) bool { return true })
}

// RunLive runs the checks of what can change while the fleet runs: the
// INFO permission and rename (identity), the eviction policy and the
// persistence settings.
func RunLive(ctx context.Context, t Target) []Result {
	return run(ctx, t, func(c check) bool { return c.live })
}

func run(ctx context.Context, t Target, want func(check) bool) []Result {
	e := &env{t: t.withDefaults()}
	var out []Result
	for _, c := range checks {
		if !want(c) {
			continue
		}
		for _, r := range c.run(ctx, e) {
			r.Check = c.name
			out = append(out, r)
		}
	}
	return out
}

// Worst is the worst status among rs (OK for none).
func Worst(rs []Result) Status {
	w := OK
	for _, r := range rs {
		w = max(w, r.Status)
	}
	return w
}

// UnsafeChecks names the checks with an Unsafe result, sorted, once each.
func UnsafeChecks(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Status == Unsafe && !slices.Contains(out, r.Check) {
			out = append(out, r.Check)
		}
	}
	slices.Sort(out)
	return out
}

// WriteText prints rs one per line: status, check, server, detail, fix.
func WriteText(w io.Writer, rs []Result) error {
	for _, r := range rs {
		var b strings.Builder
		fmt.Fprintf(&b, "%-6s %-11s", r.Status, r.Check)
		if r.Server != "" {
			fmt.Fprintf(&b, " [%s]", r.Server)
		}
		b.WriteString(" " + r.Detail)
		if r.Fix != "" {
			b.WriteString("\n       fix: " + r.Fix)
		}
		if _, err := fmt.Fprintln(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON prints rs as a JSON array.
func WriteJSON(w io.Writer, rs []Result) error {
	if rs == nil {
		rs = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}
