// Package replwait runs a script that grants (claim.lua, renew.lua,
// counter.lua, seq.lua) and says whether its grant may be used: only when
// a replica promoted in place of the master cannot lack it, or cannot
// have been promoted yet (coord/doc.go, Split brain).
//
// Two proofs, the first that holds is taken. With Sentinels, a check of
// every Sentinel sent with the script bounds when a promotion can come
// (sentinel.go): a grant made before it is covered by the promoted
// replica's loss floors, replicated or not. Otherwise WAIT: the script's
// reply says how many replicas must acknowledge it (the fleet's
// high-water mark, scripts/lua/replicas.lua; with Sentinels, at least every
// replica they know), and WAIT, which counts the replicas that
// acknowledged the offset of this connection's last write, follows the
// script on the connection that ran it.
package replwait

import (
	"context"
	"errors"
	"fmt"
	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/bugs"
	"github.com/flaked/flaked/internal/redisinfo"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout limits and default. WAIT asks the replicas for their offset at
// once (not at their 1 s ack), so it waits a replication round trip plus
// the replica's lag: the default covers a replica in another region or
// behind a slow disk, 300 ms behind. Grants are taken ahead of need
// (reservations reach ReserveAhead, counter segments are fetched at half
// left), so a longer wait delays no ID but a node's first claim and a
// counter node's segment once it ran dry.
const (
	DefaultTimeout = time.Second
	MinTimeout     = 10 * time.Millisecond
	MaxTimeout     = 10 * time.Second
)

// ErrNotReplicated is wrapped by the error of a grant that fewer replicas
// acknowledged than must hold it: the grant is not used.
var ErrNotReplicated = errors.New("grant not acknowledged by the replicas")

// off turns the wait off: the test of a split brain shows with it that
// its scenario makes duplicates when nothing waits (its teeth). Nothing
// else sets it.
var off atomic.Bool

// SetOffForTest switches the wait off (true) or on again, for the whole
// process, and returns what it was. Only tests call it.
func SetOffForTest(v bool) bool { return off.Swap(v) }

// Result is what Run returns besides the reply.
type Result struct {
	Need   int64  // replicas that must acknowledge (the script's count)
	Acked  int64  // replicas WAIT counted (Need when no WAIT was needed)
	Listed string // the replicas the master listed, "ip:port state" comma separated
	// Via says what made the grant safe to use: "replicas" (WAIT counted
	// Need; also when Need is 0) or "sentinels" (the Sentinel rule).
	Via string
	// Sentinels is why the Sentinel rule did not vouch for the grant
	// ("" when it did, or when the deployment has no Sentinels).
	Sentinels string
	// Known is how many replicas the Sentinels know, when they did not
	// vouch for the grant: Need is at least that (knownReplicas).
	Known int64
}

// Waiter runs a deployment's grants and says whether each may be used.
type Waiter struct {
	// Meta is the {ns}:meta key: its "server" field, which guard.lua sets
	// to the identity of the server that ran the script, gives the master's
	// run ID for the Sentinel rule.
	Meta string
	// Floor is the fewest replicas any grant must reach, whatever the mark
	// says (the operator's --min-replicas): the mark starts from the
	// replicas a master lists, which is none on a master already cut off
	// from them, and a promotion lowers it; the SPIN model finds a split
	// brain through either (docs/model.md), and a floor closes both.
	Floor int64
	// Sentinels, when set, are the Sentinels watching the master: a grant
	// they vouch for (sentinel.go) is used without waiting for replicas.
	Sentinels Sentinels
	// Clock is what the Sentinel rule measures with and waits on; nil
	// means the process's clock.
	Clock clock.Clock
	// Marks, when set, is the mark of the last grant used shared with
	// the process's other Waiters; nil means the Waiter's own.
	Marks *MarkMemory

	last    atomic.Pointer[Status]
	own     MarkMemory
	settles sync.Map // *redis.Client -> *settleOnce: see settled
}

// MarkMemory is the replicas mark of the last grant a process used,
// shared by its Waiters (a node's registry, counter and sequences): a
// node restores a {ns}:meta that Redis lost with its last mark, whichever
// kind of grant used it. With a mark of its own, an auto node's counter,
// which takes over just when Redis lost everything, would restore it with
// none before its first segment.
type MarkMemory struct{ v atomic.Int64 }

// Load returns the mark last stored (0 before any).
func (m *MarkMemory) Load() int64 { return m.v.Load() }

// Store records the mark of a grant used.
func (m *MarkMemory) Store(n int64) { m.v.Store(n) }

func (w *Waiter) marks() *MarkMemory {
	if w.Marks != nil {
		return w.Marks
	}
	return &w.own
}

// Status is the last grant's outcome, for the node's INFO and metrics.
type Status struct {
	Result
	Err string // why it was refused, "" when used
}

// Last returns the outcome of the last grant Run made (nil before any).
func (w *Waiter) Last() *Status { return w.last.Load() }

// Mark is the replicas high-water mark of the last grant used: what a
// caller sends with its calls (contract's Mark argument), so that a node
// restoring a {ns}:meta that Redis lost restores the mark with it. A
// master restarted empty lists only the replicas that reconnected; with
// the mark started from those, a replica cut off from it and promoted
// meanwhile would leave it granting with the other one's acknowledgement
// alone, as the simulator found.
func (w *Waiter) Mark() int64 { return w.marks().Load() }

var systemClock = clock.System()

func (w *Waiter) clock() clock.Clock {
	if w.Clock != nil {
		return w.Clock
	}
	return systemClock
}

func (w *Waiter) now() time.Duration { return w.clock().Monotonic() }

// Run runs s on rdb (the master of keys[0]'s slot on a Cluster) and
// returns the reply. When the reply is a grant ({"OK", ...}), the element
// at needAt is how many replicas must acknowledge it and the next the
// replicas listed. The grant is used when the Sentinels vouch for it (a
// check sent with it, sentinel.go) or, failing that, when WAIT, sent on the
// same connection right after the script, counts that many replicas within
// timeout; otherwise Run returns the reply and an error wrapping
// ErrNotReplicated that names what is missing: the caller must not use
// the grant.
func (w *Waiter) Run(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys []string, argv []any,
	needAt int, timeout time.Duration) ([]any, Result, error) {
	v, res, err := w.run(ctx, rdb, s, keys, argv, needAt, timeout)
	if res.Via != "" {
		w.marks().Store(toInt(v[needAt]))
	}
	if res.Via != "" || err != nil && errors.Is(err, ErrNotReplicated) {
		st := &Status{Result: res}
		if err != nil {
			st.Err = err.Error()
		}
		w.last.Store(st)
	}
	return v, res, err
}

func (w *Waiter) run(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys []string, argv []any,
	needAt int, timeout time.Duration) ([]any, Result, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c, err := master(ctx, rdb, keys[0])
	if err != nil {
		return nil, Result{}, err
	}
	// WAIT counts the replicas that acknowledged this connection's last
	// write, so the script and its WAIT go on one connection.
	if err := w.settled(ctx, c); err != nil {
		return nil, Result{}, err
	}
	conn := c.Conn()
	defer conn.Close()

	// The Sentinels are asked while the script runs: a check sent before
	// the grant's reply bounds a promotion from its send on.
	var views chan []SentinelView
	sent := w.now()
	sentinels := w.Sentinels != nil && w.Meta != ""
	if sentinels {
		views = make(chan []SentinelView, 1)
		go func() { views <- w.Sentinels.Views(ctx) }()
	}
	v, server, err := script(ctx, conn, s, keys, argv, w.Meta)
	replied := w.now()
	if err != nil {
		if cc, ok := rdb.(*redis.ClusterClient); ok && isRedirect(err) {
			cc.ReloadState(ctx) // the slot moved: the next call goes to its new master
		}
		return nil, Result{}, contract.Explain(err) // a guard.lua refusal written out
	}
	if len(v) == 0 || v[0] != "OK" || len(v) <= needAt+1 {
		return v, Result{}, nil
	}
	floor := w.Floor
	if bugs.MinReplicasIgnored {
		floor = 0
	}
	res := Result{Need: max(toInt(v[needAt]), floor), Listed: fmt.Sprint(v[needAt+1])}
	if off.Load() || bugs.ReplicaWaitOff || res.Need <= 0 {
		res.Acked, res.Via = res.Need, "replicas"
		return v, res, nil
	}
	if sentinels {
		var vs []SentinelView
		select {
		case vs = <-views:
		case <-ctx.Done():
		}
		runID, _, _ := strings.Cut(server, ":")
		win := WindowOf(sent, vs, runID)
		if win.Until > 0 && replied < win.Until {
			res.Via = "sentinels"
			return v, res, nil
		}
		if win.Up && (replied < sent+MaxCheckAge || bugs.SentinelNoMaxCheckAge) {
			// The check answered before the grant ran and its
			// down-after bound (a Sentinel's PING age) leaves the
			// grant out: asked again now, after the reply, the
			// Sentinels need only name the master up with no failover
			// (sentinel.go). One round trip to them instead of a WAIT
			// that a replica away fails. MaxCheckAge still holds: it
			// is what covers a promotion no Sentinel flags.
			vs = w.Sentinels.Views(ctx)
			again := WindowOf(replied, vs, runID)
			if again.Up {
				res.Via = "sentinels"
				return v, res, nil
			}
			win = again
		}
		res.Sentinels = win.Why
		if win.Why == "" {
			res.Sentinels = fmt.Sprintf("the grant came %v after the check, past what it vouches for", replied-sent)
		}
		known, ok := knownReplicas(vs)
		if !ok {
			return v, res, fmt.Errorf("%w: the Sentinels do not vouch for it (%s), and none has answered since this process "+
				"started: the replicas they may promote are unknown", ErrNotReplicated, res.Sentinels)
		}
		res.Known = known
		res.Need = max(res.Need, known)
	}
	if listedCount(res.Listed) < res.Need {
		// More replicas than the master lists cannot acknowledge: the WAIT
		// is not waited out (a replica may attach meanwhile), so a caller
		// that tries again (a claim, a counter refill) soon reaches a check
		// the Sentinels vouch for, as after a failover that not every
		// Sentinel has seen yet, with the old master on their list.
		timeout = min(timeout, hopelessWait)
	}
	// Wait, not Do: it sets the read timeout to the WAIT's own, past the
	// client's (1 s by default), which WAIT may well reach.
	acked, err := conn.Wait(ctx, int(res.Need), timeout).Result()
	if err != nil {
		return v, res, fmt.Errorf("%w: WAIT %d %d: %w", ErrNotReplicated, res.Need, timeout.Milliseconds(), err)
	}
	res.Acked = acked
	if acked >= res.Need {
		res.Via = "replicas"
		return v, res, nil
	}
	why := ""
	if res.Sentinels != "" {
		why = "; the Sentinels do not vouch for it: " + res.Sentinels
	}
	if res.Known > max(w.Floor, toInt(v[needAt])) {
		return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s)%s; "+
			"the Sentinels know %d replicas and may promote any of them: bring the missing ones back, "+
			"or drop one gone for good from every Sentinel with SENTINEL RESET (docs/operating.md)",
			ErrNotReplicated, acked, res.Need, timeout, listedText(res.Listed), why, res.Known)
	}
	if w.Floor > toInt(v[needAt]) {
		// The floor, not the mark, asks for more: say so, naming the
		// flag (a Sentinel deployment has a floor of 1 by default).
		return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s)%s; "+
			"--min-replicas is %d (1 by default through Sentinel): bring a replica back, or start the nodes with "+
			"--min-replicas 0 to use grants no replica holds (a split brain may then repeat IDs: docs/model.md)",
			ErrNotReplicated, acked, res.Need, timeout, listedText(res.Listed), why, w.Floor)
	}
	return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s)%s; "+
		"the fleet's high-water mark of replicas is %d: bring the missing replicas back, "+
		"or, for a replica away for a while (a planned restart), lower the mark with flaked audit replicas --set %d "+
		"(it rises again by itself when the replica is listed again)",
		ErrNotReplicated, acked, res.Need, timeout, listedText(res.Listed), why, res.Need, max(res.Need-1, 0))
}

// script runs s on conn, then reads meta's server field (the identity
// guard.lua left there: run_id:master_replid) in the same pipeline,
// falling back to EVAL when the server does not have the script cached.
func script(ctx context.Context, conn *redis.Conn, s *redis.Script, keys []string, argv []any, meta string) ([]any, string, error) {
	for _, sha := range []bool{true, false} {
		pipe := conn.Pipeline()
		var run *redis.Cmd
		if sha {
			run = s.EvalSha(ctx, pipe, keys, argv...)
		} else {
			run = s.Eval(ctx, pipe, keys, argv...)
		}
		var server *redis.StringCmd
		if meta != "" {
			server = pipe.HGet(ctx, meta, "server")
		}
		_, _ = pipe.Exec(ctx)
		v, err := run.Slice()
		if sha && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if server == nil {
			return v, "", nil
		}
		return v, server.Val(), nil
	}
	return nil, "", errors.New("unreachable")
}

// master is the client of the master that serves key: rdb itself, or on a
// Cluster the node client of key's slot, so the pipeline goes on one
// connection to the node that runs the script.
func master(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	c, err := redisinfo.Master(ctx, rdb, key)
	if errors.Is(err, redisinfo.ErrClientType) {
		return nil, fmt.Errorf("%w: a %T cannot run a grant and WAIT on one connection", ErrNotReplicated, rdb)
	}
	return c, err
}

func isRedirect(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "TRYAGAIN")
}

// hopelessWait is the WAIT's timeout when the master lists fewer replicas
// than must acknowledge: short, yet a pause between a caller's tries.
const hopelessWait = 100 * time.Millisecond

// listedCount is how many replicas a listing ("ip:port state", comma
// separated) names, in any state.
func listedCount(s string) int64 {
	if s == "" {
		return 0
	}
	return int64(strings.Count(s, ",") + 1)
}

func listedText(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

type settleOnce struct {
	once sync.Once
	err  error
}

// settled makes one round trip on c before the first Conn of c is used.
// go-redis's Conn shares its client's options but not the lock that
// guards them, and a client's first connection may write them (its
// maintenance-notification handshake, refused by Redis 7, turns the mode
// off): a first connection made through a Conn while the client makes
// another is a data race. Once one connection is made, nothing writes
// them again. The record lives in the Waiter, whose clients live as long
// as it does: a map of the process would keep every client (and all it
// reaches) that ever made a grant.
func (w *Waiter) settled(ctx context.Context, c *redis.Client) error {
	v, _ := w.settles.LoadOrStore(c, &settleOnce{})
	s := v.(*settleOnce)
	s.once.Do(func() {
		// TIME, which the node's ACL user may run (PING it may not); an
		// error reply comes on a connection made all the same.
		var reply redis.Error
		if err := c.Time(ctx).Err(); err != nil && !errors.As(err, &reply) {
			s.err = err
		}
	})
	if s.err != nil {
		// Not settled: the next call tries again.
		w.settles.CompareAndDelete(c, s)
	}
	return s.err
}
