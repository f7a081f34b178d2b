// Package replwait runs a script that grants (claim.lua, renew.lua,
// counter.lua) followed by WAIT on the same connection, so that a node uses
// a grant only once every replica that may be promoted holds it
// (coord/doc.go, Split brain).
//
// The script's reply says how many replicas must acknowledge it (the
// fleet's high-water mark, scripts/lua/replicas.lua). WAIT counts the
// replicas that acknowledged the offset of this connection's last write,
// so it must follow the script on the connection that ran it: the two go
// out as one pipeline, which go-redis sends on one connection (on Redis
// Cluster, a pipeline of the master of the script's slot, the node that
// runs the script). The count is not known before the script runs, so the
// pipeline asks WAIT for the count the previous grant needed (a Waiter
// remembers it): when the script asks for more, the grant is not used and
// the pipeline runs again at once with that count. With a count of 0 no
// WAIT is sent.
package replwait

import (
	"context"
	"errors"
	"fmt"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/bugs"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout limits and default: long enough for a replica on the same network
// to acknowledge (WAIT asks replicas for their offset at once, not at their
// 1 s ack), short enough that no client of a node waits on it long.
const (
	DefaultTimeout = 200 * time.Millisecond
	MinTimeout     = 10 * time.Millisecond
	MaxTimeout     = time.Second
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
}

// Waiter remembers how many replicas the last grant needed, so the next
// one's pipeline asks WAIT for as many. Before its first grant it reads
// the mark (from Meta, when set) and the replicas the master lists, so a
// node's first claim is not made twice (a claim made and not used holds
// its machine ID until the lease expires).
type Waiter struct {
	// Meta is the {ns}:meta key, whose "replicas" field is the mark.
	Meta string
	// Floor is the fewest replicas any grant must reach, whatever the mark
	// says (the operator's --min-replicas): the mark starts from the
	// replicas a master lists, which is none on a master already cut off
	// from them, and a promotion lowers it; the SPIN model finds a split
	// brain through either (docs/model.md), and a floor closes both.
	Floor int64
	last  atomic.Int64
	known atomic.Bool
}

// guess is the count the first grant will likely need: the larger of the
// stored mark and the replicas the master lists now (not atomic with the
// grant: a hint, which the grant's reply corrects).
func (w *Waiter) guess(ctx context.Context, c *redis.Client) int64 {
	pipe := c.Pipeline()
	var mark *redis.StringCmd
	if w.Meta != "" {
		mark = pipe.HGet(ctx, w.Meta, "replicas")
	}
	info := pipe.Info(ctx, "replication")
	_, _ = pipe.Exec(ctx)
	var n int64
	if mark != nil {
		n, _ = strconv.ParseInt(mark.Val(), 10, 64)
	}
	for _, line := range strings.Split(info.Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			listed, _ := strconv.ParseInt(v, 10, 64)
			n = max(n, listed)
		}
	}
	return n
}

// Run runs s on rdb (the master of keys[0]'s slot on a Cluster) and WAIT
// on the same connection, and returns the reply. When the reply is a
// grant ({"OK", ...}) whose element at needAt asks for more replicas than
// acknowledged it, it returns the reply and an error wrapping
// ErrNotReplicated that names them: the caller must not use the grant.
// discard, when not nil, is given a grant Run made and does not return (it
// asked WAIT for too few and ran again), so the caller can give it back.
func (w *Waiter) Run(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys []string, argv []any,
	needAt int, timeout time.Duration, discard func(reply []any)) ([]any, Result, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c, err := master(ctx, rdb, keys[0])
	if err != nil {
		return nil, Result{}, err
	}
	if !w.known.Load() {
		w.last.Store(w.guess(ctx, c))
		w.known.Store(true)
	}
	for attempt := 0; ; attempt++ {
		sent := max(w.last.Load(), w.Floor)
		if off.Load() || bugs.ReplicaWaitOff {
			sent = 0
		}
		v, acked, err := run(ctx, c, s, keys, argv, sent, timeout)
		if err != nil {
			if cc, ok := rdb.(*redis.ClusterClient); ok && isRedirect(err) {
				cc.ReloadState(ctx) // the slot moved: the next call goes to its new master
			}
			return nil, Result{}, contract.Explain(err) // a guard.lua refusal written out
		}
		if len(v) == 0 || v[0] != "OK" || len(v) <= needAt+1 {
			return v, Result{}, nil
		}
		res := Result{Need: max(toInt(v[needAt]), w.Floor), Listed: fmt.Sprint(v[needAt+1]), Acked: acked}
		w.last.Store(res.Need)
		if off.Load() || bugs.ReplicaWaitOff || res.Need <= 0 {
			res.Acked = max(res.Acked, res.Need)
			return v, res, nil
		}
		if res.Need > sent && attempt == 0 {
			// The WAIT asked for fewer than the grant needs: again, asking
			// for enough.
			if discard != nil {
				discard(v)
			}
			continue
		}
		if acked < res.Need && w.Floor > toInt(v[needAt]) {
			// The floor, not the mark, asks for more: say so, naming the
			// flag (a Sentinel deployment has a floor of 1 by default).
			return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s); "+
				"--min-replicas is %d (1 by default through Sentinel): bring a replica back, or start the nodes with "+
				"--min-replicas 0 to use grants no replica holds (a split brain may then repeat IDs: docs/model.md)",
				ErrNotReplicated, acked, res.Need, timeout, listedText(res.Listed), w.Floor)
		}
		if acked < res.Need {
			return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s); "+
				"the fleet's high-water mark of replicas (or --min-replicas) is %d: bring the missing replicas back, "+
				"or lower the mark with flaked audit replicas --set N once they are gone for good",
				ErrNotReplicated, acked, res.Need, timeout, listedText(res.Listed), res.Need)
		}
		return v, res, nil
	}
}

// run sends the script, then WAIT n timeout when n > 0, as one pipeline,
// falling back to EVAL when the server does not have the script cached.
func run(ctx context.Context, c *redis.Client, s *redis.Script, keys []string, argv []any, n int64,
	timeout time.Duration) ([]any, int64, error) {
	for _, sha := range []bool{true, false} {
		pipe := c.Pipeline()
		var script *redis.Cmd
		if sha {
			script = s.EvalSha(ctx, pipe, keys, argv...)
		} else {
			script = s.Eval(ctx, pipe, keys, argv...)
		}
		var wait *redis.Cmd
		if n > 0 {
			wait = pipe.Do(ctx, "WAIT", n, timeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx)
		v, err := script.Slice()
		if sha && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if wait == nil {
			return v, 0, nil
		}
		acked, err := wait.Int64()
		if err != nil {
			return v, 0, fmt.Errorf("%w: WAIT %d %d: %w", ErrNotReplicated, n, timeout.Milliseconds(), err)
		}
		return v, acked, nil
	}
	return nil, 0, errors.New("unreachable")
}

// master is the client of the master that serves key: rdb itself, or on a
// Cluster the node client of key's slot, so the pipeline goes on one
// connection to the node that runs the script.
func master(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("the master of %s: %w", key, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: a %T cannot run a grant and WAIT on one connection", ErrNotReplicated, rdb)
}

func isRedirect(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "TRYAGAIN")
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
