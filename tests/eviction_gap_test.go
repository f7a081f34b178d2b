package tests

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redistest"
)

// Fault: as TestRedisEviction_VolatileUnderCacheLoad_NoDuplicates (a
// cache fills Redis's memory under volatile-lru, then volatile-random,
// and Redis evicts the leases, the only keys of the fleet with a TTL), in
// a machine-ID space of three IDs, two flake, two auto and one counter
// daemon under load. An evicted lease reads as an expired one; its owner
// issues on under what it was granted while it claims again (its own ID
// first), and an auto node falling back to counter mode finds the counter
// reaching as far ahead as its flake IDs did (a counter lead of a second
// left it 10-12 s without an ID). Every ID checked; no daemon goes longer
// than gapTarget without one.
func TestRedisEviction_VolatileUnderCacheLoad_NoGap(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"maxmemory-policy volatile-lru"}})
	flags := []string{"--bits-machine", "2", "--lease-ttl", "2s"}
	initRegistry(t, append([]string{"--redis", srv.URL()}, flags...)...)
	f := startModeFleet(t, srv.URL(), []string{"flake", "flake", "auto", "counter", "auto"}, flags...)
	time.Sleep(2 * time.Second)
	from := time.Now()
	stop := fillCache(t, srv)
	time.Sleep(within(8*time.Second, 30*time.Second))
	rdb := srv.Client(t)
	if err := rdb.ConfigSet(ctxT(t), "maxmemory-policy", "volatile-random").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(within(8*time.Second, 30*time.Second))
	written := stop()
	to := time.Now()
	f.stop(t)
	expired := 0
	evs, _ := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	for _, e := range evs {
		if e.Values["type"] == "renew_fail" && e.Values["reason"] == "expired" {
			expired++
		}
	}
	t.Logf("cache wrote %d keys; Redis evicted %s; %d leases found gone at a renewal", written, redisInfo(t, rdb, "stats", "evicted_keys"), expired)
	if expired == 0 {
		t.Fatal("no lease evicted: the test did not reach the fault")
	}
	checkGaps(t, "leases evicted", f.report(t, "leases evicted under cache load", from, to))
}

// fillCache caps srv's memory 3 MiB above what it uses and writes 1 KiB
// values with a TTL into it as fast as one connection goes, so Redis
// evicts keys with a TTL (under a volatile-* policy) until stop, which
// returns how many it wrote.
func fillCache(t *testing.T, srv *redistest.Server) (stop func() int) {
	t.Helper()
	rdb := srv.Client(t)
	base, _ := strconv.Atoi(redisInfo(t, rdb, "memory", "used_memory"))
	if err := rdb.ConfigSet(ctxT(t), "maxmemory", strconv.Itoa(base+3<<20)).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	count := make(chan int)
	go func() {
		c := srv.Client(t)
		val := strings.Repeat("x", 1024)
		n := 0
		for {
			select {
			case <-done:
				count <- n
				return
			default:
			}
			p := c.Pipeline()
			for range 100 {
				p.Set(context.Background(), "cache:"+strconv.Itoa(n), val, time.Minute)
				n++
			}
			_, _ = p.Exec(context.Background())
		}
	}()
	return func() int {
		close(done)
		return <-count
	}
}

// redisInfo is one field of an INFO section of Redis, "" when missing.
func redisInfo(t *testing.T, rdb *redis.Client, section, field string) string {
	t.Helper()
	info, err := rdb.Info(ctxT(t), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}
