package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redisinfo"
	"github.com/flaked/flaked/internal/replwait"
)

// Where the scripts' grant replies carry the count of replicas that must
// acknowledge them (scripts/lua/replicas.lua), the list of replicas after it.
const (
	claimNeedAt = 10
	renewNeedAt = 5
)

// Limits of Options.ReplicaWait.
const (
	DefaultReplicaWait = replwait.DefaultTimeout
	MinReplicaWait     = replwait.MinTimeout
	MaxReplicaWait     = replwait.MaxTimeout
	// MaxMinReplicas bounds Options.MinReplicas (Redis's own replicas
	// rarely number more).
	MaxMinReplicas = 16
)

// ErrNotReplicated is wrapped by the error of a claim or renewal that the
// replicas did not acknowledge within Options.ReplicaWait: it was not
// used (the node keeps issuing under what it held, and retries).
var ErrNotReplicated = replwait.ErrNotReplicated

// replicaPatience is how long a claim the replicas do not acknowledge is
// tried again before it fails: a replica just synced acknowledges from its
// first periodic ACK on, up to a second later (the master holds its stream
// back until then), and a node starting next to it should not fail.
const replicaPatience = 1500 * time.Millisecond

// claimReplicated runs claim.lua and its WAIT (replwait). A claim the
// replicas do not acknowledge is given back at once (it was not used, and
// would hold its machine ID until the lease expired) and tried again for
// up to replicaPatience; then the error wraps ErrNotReplicated.
func (r *Registry) claimReplicated(ctx context.Context, token string, keys []string, argv []any) ([]any, error) {
	giveBack := func(v []any) { r.releaseUnused(ctx, token, v) }
	deadline := r.opts.Clock.Now().Add(replicaPatience)
	for {
		v, _, err := r.wait.Run(ctx, r.rdb, claimScript, keys, argv, claimNeedAt, r.opts.ReplicaWait)
		if !errors.Is(err, ErrNotReplicated) {
			return v, err
		}
		if v != nil {
			giveBack(v)
		}
		if !r.opts.Clock.Now().Before(deadline) {
			return nil, err
		}
		if serr := clock.Sleep(ctx, r.opts.Clock, 100*time.Millisecond); serr != nil {
			return nil, err
		}
	}
}

// releaseUnused gives back the machine ID of a claim reply ({"OK", id,
// floor, generation, ...}) that was not used: at its floor, which the
// claim wrote as the reservation, so the reservation stays.
func (r *Registry) releaseUnused(ctx context.Context, token string, v []any) {
	if len(v) < 4 || v[0] != "OK" {
		return
	}
	id, err := strconv.Atoi(fmt.Sprint(v[1]))
	if err != nil {
		return
	}
	o, lay := r.opts.Owner, r.opts.Layout
	keys, argv := contract.ReleaseArgs{
		Keys: r.keys, Token: token, LastTick: toInt64(v[2]), EventsMaxLen: r.opts.EventsMaxLen, Host: o.Host, PID: o.PID,
		Addr: o.Addr, Generation: fmt.Sprint(v[3]), Mark: r.wait.Mark(), EpochUs: lay.StartTime.UnixMicro(), TickUs: tickMicros(lay),
		MachineIDs: []int{id},
	}.KeysArgv()
	_ = releaseScript.Run(context.WithoutCancel(ctx), r.rdb, keys, argv...).Err()
}

// ReplicaMark is the fleet's replicas high-water mark and what the master
// lists now: SplitBrainCheck's report.
type ReplicaMark struct {
	Namespace string
	// Mark is {ns}:meta's replicas: how many replicas must acknowledge a
	// grant before a node uses it (-1 when the registry has none yet).
	Mark int
	// Listed is connected_slaves of the master; Online those of them in
	// state online, the ones that can acknowledge (INFO replication).
	Listed, Online int
	// Replicas are the master's replicas, "ip:port state" each.
	Replicas []string
	// Since are the replicas ("ip:port") the master has listed since it
	// took the registry over, listed now or not: the mark is at least
	// their count, as a grant one of them missed would be lost if it
	// were promoted.
	Since []string `json:",omitempty"`
}

// Away are the replicas of Since the master does not list now.
func (m ReplicaMark) Away() []string {
	var away []string
	for _, a := range m.Since {
		if !slices.ContainsFunc(m.Replicas, func(r string) bool { return strings.HasPrefix(r, a+" ") }) {
			away = append(away, a)
		}
	}
	return away
}

// Problem says what is wrong with the deployment for the split-brain
// mechanism, with the fix, or "" when grants are acknowledged. A mark
// above the online replicas refuses every grant (fail closed): nodes issue
// only under what they already hold.
func (m ReplicaMark) Problem() string {
	if m.Mark > m.Online {
		away := ""
		if a := m.Away(); len(a) > 0 {
			away = "; listed since it took the registry over, not now: " + strings.Join(a, ", ")
		}
		return fmt.Sprintf("grants are refused: the fleet's high-water mark of replicas is %d but the master has %d online (%s)%s; "+
			"bring the replicas back, or lower the mark with flaked audit replicas --set %d once they are gone for good",
			m.Mark, m.Online, strings.Join(m.Replicas, ", "), away, m.Online)
	}
	return ""
}

// SplitBrainCheck reads the fleet's replicas high-water mark and the
// master's replicas. A Problem means grants are refused until it is fixed;
// none means every grant the nodes use is held by every replica the master
// has had since it took over the registry, so none of them promoted during
// a split brain can hand out what a node on the old master uses (package
// doc, Split brain). flaked doctor reports it.
func SplitBrainCheck(ctx context.Context, rdb redis.UniversalClient, namespace string) (ReplicaMark, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	keys := contract.NewKeys(namespace)
	c, err := redisinfo.Master(ctx, rdb, keys.Meta)
	if err != nil {
		return ReplicaMark{}, err
	}
	m := ReplicaMark{Namespace: namespace, Mark: -1}
	fields, err := c.HMGet(ctx, keys.Meta, contract.MetaReplicas, contract.MetaReplicaSet).Result()
	if err != nil {
		return m, fmt.Errorf("read %s: %w", keys.Meta, err)
	}
	switch v, _ := fields[0].(string); {
	case fields[0] == nil:
		// No mark: 0 in a registry that has none yet, -1 with no registry.
		if n, err := c.Exists(ctx, keys.Meta).Result(); err != nil {
			return m, err
		} else if n == 1 {
			m.Mark = 0
		}
	default:
		if m.Mark, err = strconv.Atoi(v); err != nil {
			return m, fmt.Errorf("%s %s is %q, not a count", keys.Meta, contract.MetaReplicas, v)
		}
	}
	if set, _ := fields[1].(string); set != "" {
		m.Since = strings.Split(set, ",")
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return m, fmt.Errorf("INFO replication: %w", err)
	}
	m.Listed, m.Online, m.Replicas = parseReplicas(info)
	return m, nil
}

// SetReplicaMark sets the fleet's replicas high-water mark to n (an
// operator's decision: a replica is gone for good, so grants need no
// longer wait for it) and records it as a replicas event. It refuses a
// registry that does not exist.
func SetReplicaMark(ctx context.Context, rdb redis.UniversalClient, namespace string, n int, host string) (previous int, err error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: replicas %d: must be >= 0", ErrInvalidOptions, n)
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	keys := contract.NewKeys(namespace)
	c, err := redisinfo.Master(ctx, rdb, keys.Meta)
	if err != nil {
		return 0, err
	}
	k, argv := contract.MarkArgs{Keys: keys, Replicas: n, Host: host, EventsMaxLen: DefaultEventsMaxLen}.KeysArgv()
	prev, err := markScript.Run(ctx, c, k, argv...).Int()
	if err != nil {
		return 0, fmt.Errorf("set %s %s: %w", keys.Meta, contract.MetaReplicas, err)
	}
	if prev < 0 {
		return 0, fmt.Errorf("namespace %q has no registry (%s is missing): nothing to set", namespace, keys.Meta)
	}
	return prev, nil
}

var markScript = redis.NewScript(contract.Mark)

// parseReplicas reads connected_slaves and the slaveN lines of INFO
// replication.
func parseReplicas(info string) (listed, online int, names []string) {
	v, _ := redisinfo.Field(info, "connected_slaves")
	listed, _ = strconv.Atoi(v)
	for _, r := range redisinfo.Replicas(info) {
		names = append(names, r.IP+":"+r.Port+" "+r.State)
		if r.Online() {
			online++
		}
	}
	return listed, online, names
}

// ReplicaStatus is the outcome of the registry's last claim or renewal as
// far as the replicas go (nil before the first): how many replicas it
// waited for and how many acknowledged, or that the Sentinels vouched for
// it (Via), and why it was refused, with the fix (Err). INFO, the status
// page and the metrics show it.
type ReplicaStatus = replwait.Status

// ReplicaStatus returns the outcome of the last claim or renewal.
func (r *Registry) ReplicaStatus() *ReplicaStatus { return r.wait.Last() }
