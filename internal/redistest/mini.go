package redistest

import (
	"github.com/flaked/flaked/internal/miniinfo"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Mini starts a miniredis for a fast unit test, made to answer INFO as
// MiniInfo says, and returns it with a client; both end with the test.
func Mini(tb testing.TB) (*miniredis.Miniredis, *redis.Client) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	MiniInfo(mr)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// MiniInfo is miniinfo.Install: mr answers INFO server, replication and
// memory with a run_id and master_replid, fixed for mr's life (a new one
// at each call, as a redis-server restart gets), and maxmemory_policy
// noeviction. guard.lua refuses to write without them (fail closed).
func MiniInfo(mr *miniredis.Miniredis) { miniinfo.Install(mr) }
