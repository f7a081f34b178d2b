package coord

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/scripts/lua"
)

// The Go side of the post-loss floor (Lease.settle) and the scripts' must
// assume the same Redis clock skew.
func TestRedisClockSkew_MatchesGuard(t *testing.T) {
	m := regexp.MustCompile(`local redisSkewMs = (\d+)`).FindStringSubmatch(lua.Claim)
	if m == nil {
		t.Fatal("guard.lua has no redisSkewMs")
	}
	ms, _ := strconv.Atoi(m[1])
	if got := time.Duration(ms) * time.Millisecond; got != redisClockSkew {
		t.Fatalf("guard.lua redisSkewMs = %v, coord redisClockSkew = %v", got, redisClockSkew)
	}
}
