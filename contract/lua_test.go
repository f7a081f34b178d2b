package contract

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The Go side of the post-loss floors (coord's Lease.settle, the counter's
// wait) and the scripts' must assume the same Redis clock skew.
func TestRedisSkew_MatchesGuard(t *testing.T) {
	m := regexp.MustCompile(`local redisSkewMs = (\d+)`).FindStringSubmatch(guard)
	if m == nil {
		t.Fatal("guard.lua has no redisSkewMs")
	}
	ms, _ := strconv.Atoi(m[1])
	if got := time.Duration(ms) * time.Millisecond; got != RedisSkew {
		t.Fatalf("guard.lua redisSkewMs = %v, contract.RedisSkew = %v", got, RedisSkew)
	}
}
