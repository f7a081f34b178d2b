// Package simredis is a deterministic, in-process, single-threaded
// simulation of one redis-server process, for the fleet simulator: it runs
// flaked's real code, which talks to Redis through go-redis v9, on virtual
// time, thousands of fleet schedules a minute.
//
// A Server holds a keyspace, an identity (run_id, master_replid: what
// scripts/lua/guard.lua compares) and a clock the simulator owns. Do
// executes one command with Redis's reply types and error texts; Client
// returns a real go-redis client whose commands call Do and never touch the
// network. Scripts run in gopher-lua with Redis 7 semantics for what
// flaked's scripts use (lua.go lists the known differences), compiled once
// per process and run in one Lua state per Server, which is what makes a
// script call several times cheaper than on miniredis (a new Lua state per
// EVAL, and TCP).
//
// Replication, failover, restarts and backups are modelled with Snapshot,
// Load, Restart and Promote: a replica's data is an older Snapshot of its
// master's; a failover promotes data that may lack a tail of writes; a
// restart without persistence starts empty.
//
// Nothing depends on Go's map iteration order: hashes and sets keep their
// members in insertion order (as Redis's small encodings do), KEYS and SCAN
// return keys sorted, and SRANDMEMBER draws from the Server's rng.
package simredis
