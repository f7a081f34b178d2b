package redistest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
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

// MiniInfo makes mr answer INFO server, replication and memory (also from
// scripts) with a run_id and master_replid, fixed for mr's life, and
// maxmemory_policy noeviction, as a redis-server does. miniredis has none
// of them, and guard.lua refuses to write without them (fail closed);
// unit tests run the scripts as a fleet node does, with the identity read,
// rather than each opting out. A miniredis Restart drops the hook: call
// MiniInfo again, which gives a new identity, as a redis-server restart
// does. It replaces any pre-hook mr had.
func MiniInfo(mr *miniredis.Miniredis) {
	runID, replID := randomHex(), randomHex()
	sections := map[string]string{
		"server":      "# Server\r\nredis_version:7.0.0\r\nrun_id:" + runID + "\r\n",
		"replication": "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:" + replID + "\r\n",
		"memory":      "# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
	}
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd != "INFO" || len(args) == 0 {
			return false
		}
		var parts []string
		for _, a := range args {
			s, ok := sections[strings.ToLower(a)]
			if !ok {
				return false // another section: miniredis's own INFO
			}
			parts = append(parts, s)
		}
		c.WriteBulk(strings.Join(parts, "\r\n"))
		return true
	})
}

func randomHex() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
