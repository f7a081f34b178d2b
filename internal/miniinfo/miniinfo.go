// Package miniinfo makes a miniredis answer INFO as a redis-server does,
// for unit tests that run flaked's scripts on miniredis. It imports
// nothing of flaked's, so the scripts' own package can use it in its
// tests (internal/redistest wraps it for everyone else).
package miniinfo

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// Install makes mr answer INFO server, replication and memory (also from
// scripts) with a run_id and master_replid, fixed for mr's life, and
// maxmemory_policy noeviction, as a redis-server does. miniredis has none
// of them, and guard.lua refuses to write without them (fail closed);
// unit tests run the scripts as a fleet node does, with the identity read,
// rather than each opting out. A miniredis Restart drops the hook: call
// Install again, which gives a new identity, as a redis-server restart
// does. It replaces any pre-hook mr had.
func Install(mr *miniredis.Miniredis) {
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
