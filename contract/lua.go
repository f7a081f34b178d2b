// Package contract is the Redis contract: it puts flaked's Redis Lua
// scripts (scripts/lua, one file each) together into the scripts Redis
// runs, and says in Go what each takes and replies. Each script is atomic
// and touches only keys of one namespace, which share a {hash tag}, so it
// runs on Redis Cluster. Every script starts with args.lua, which reads
// ARGV as name/value pairs; those that add events have events.lua next,
// the one writer of {ns}:events. The scripts that write the registry or
// the counter then have guard.lua, which notices that Redis may have lost
// acknowledged writes and refuses a namespace without a registry to a
// caller that never ran under it; those that grant then have
// replicas.lua, the count of replicas that must acknowledge a grant
// before it is used.
//
// The package is also the one home of what the scripts and the Go side
// must agree on, so coord, fallback and audit take it from here rather
// than each spelling it: the keys of a namespace and the namespace rule
// (keys.go), the names of the hash fields and events the scripts write
// (fields.go), and each script's KEYS, ARGV and reply as one typed value
// (claim.go for claim.lua, and so on): its fields' arg tags name
// the ARGV pairs and its comments explain them and the reply, checked
// against the names the script reads by a test.
package contract

import (
	"time"

	"github.com/flaked/flaked/scripts/lua"
)

// guard is what the writing scripts start with: args.lua, events.lua and
// guard.lua.
var guard = lua.Args + lua.Events + lua.Guard

// Claim atomically claims one machine ID (see claim.lua).
var Claim = guard + lua.Replicas + lua.Claim

// Renew extends leases and raises the reservation (see renew.lua).
var Renew = guard + lua.Replicas + lua.Renew

// Release gives leases back with the exact last tick (see release.lua).
var Release = guard + lua.Release

// Counter hands out a segment of counter-mode values (see counter.lua).
var Counter = guard + lua.Replicas + lua.Counter

// Probe runs guard.lua's reading of INFO and writes nothing (see
// probe.lua): flaked doctor and flaked serve's checks.
var Probe = guard + lua.Probe

// Init makes a fleet's registry, which no node's call makes (see
// init.lua); flaked init runs it.
var Init = guard + lua.Init

// Check is sonyflake's CheckMachineID (see check.lua).
var Check = lua.Args + lua.Check

// Prune forgets released and expired machine IDs, keeping their
// reservations (see prune.lua); flaked audit prune runs it.
var Prune = lua.Args + lua.Events + lua.Prune

// Mark sets the fleet's replicas high-water mark (see mark.lua); flaked
// audit replicas --set runs it.
var Mark = lua.Args + lua.Events + lua.Mark

// RedisSkew is how far apart the clocks of the Redis servers of one
// deployment (a master and the replicas that may replace it) are assumed to
// be at most: guard.lua's redisSkewMs, which floors after a loss add. Go
// code that computes or waits for such a floor uses this value
// (TestRedisSkew_MatchesGuard keeps the two equal).
const RedisSkew = time.Second
