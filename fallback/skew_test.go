package fallback

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/scripts/lua"
)

// The counter's wait after a loss and counter.lua's floor must assume the
// same Redis clock skew.
func TestRedisClockSkew_MatchesGuard(t *testing.T) {
	m := regexp.MustCompile(`local redisSkewMs = (\d+)`).FindStringSubmatch(lua.Counter)
	if m == nil {
		t.Fatal("guard.lua has no redisSkewMs")
	}
	ms, _ := strconv.Atoi(m[1])
	if got := time.Duration(ms) * time.Millisecond; got != redisClockSkew {
		t.Fatalf("guard.lua redisSkewMs = %v, fallback redisClockSkew = %v", got, redisClockSkew)
	}
}
