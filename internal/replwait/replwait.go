// Package replwait runs a script that grants (claim.lua, renew.lua,
// counter.lua) and then WAIT on the same connection, so that a node uses a
// grant only once every replica that may be promoted holds it (coord/doc.go,
// Split brain).
//
// The script's reply says how many replicas must acknowledge it (the
// fleet's high-water mark, scripts/lua/replicas.lua). WAIT counts the
// replicas that acknowledged the offset of this connection's last write,
// so it must follow the script on the connection that ran it: Run pins one
// (Client.Conn; on Redis Cluster, a connection to the master of the
// script's slot, the node that ran the script). With a count of 0 no WAIT
// is sent.
package replwait

import (
	"context"
	"errors"
	"fmt"
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
	Acked  int64  // replicas WAIT counted (Need when no WAIT was sent)
	Listed string // the replicas the master listed, "ip:port state" comma separated
}

// Run runs s on rdb (the master of keys[0]'s slot on a Cluster) and, when
// the reply is a grant ({"OK", ...}) whose element at needAt asks for
// replicas, WAIT that many with timeout on the same connection. It returns
// the reply and, when fewer replicas acknowledged it, an error wrapping
// ErrNotReplicated that names them: the caller must not use the grant.
func Run(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys []string, argv []any,
	needAt int, timeout time.Duration) ([]any, Result, error) {
	conn, done, err := pin(ctx, rdb, keys[0])
	if err != nil {
		return nil, Result{}, err
	}
	defer done()
	v, err := s.Run(ctx, conn, keys, argv...).Slice()
	if err != nil {
		if c, ok := rdb.(*redis.ClusterClient); ok && isRedirect(err) {
			c.ReloadState(ctx) // the slot moved: the next call goes to its new master
		}
		return nil, Result{}, err
	}
	if len(v) == 0 || v[0] != "OK" || len(v) <= needAt+1 {
		return v, Result{}, nil
	}
	res := Result{Need: toInt(v[needAt]), Listed: fmt.Sprint(v[needAt+1])}
	res.Acked = res.Need
	if res.Need <= 0 || off.Load() {
		return v, res, nil
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	n, err := conn.Wait(ctx, int(res.Need), timeout).Result()
	if err != nil {
		res.Acked = 0
		return v, res, fmt.Errorf("%w: WAIT %d %d: %w", ErrNotReplicated, res.Need, timeout.Milliseconds(), err)
	}
	res.Acked = n
	if n < res.Need {
		return v, res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v (the master lists %s); "+
			"the fleet's high-water mark of replicas is %d: bring the missing replicas back, "+
			"or lower the mark with flaked audit replicas --set N once they are gone for good",
			ErrNotReplicated, n, res.Need, timeout, listedText(res.Listed), res.Need)
	}
	return v, res, nil
}

// pin returns a client bound to one connection of the master that serves
// key, and the function that gives the connection back.
func pin(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Conn, func(), error) {
	switch c := rdb.(type) {
	case *redis.Client:
		conn := c.Conn()
		return conn, func() { _ = conn.Close() }, nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("the master of %s: %w", key, err)
		}
		conn := m.Conn()
		return conn, func() { _ = conn.Close() }, nil
	}
	return nil, nil, fmt.Errorf("%w: a %T cannot run a grant and WAIT on one connection", ErrNotReplicated, rdb)
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
