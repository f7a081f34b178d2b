// Package simredis is a deterministic, in-process, single-threaded
// simulation of one redis-server process, for the fleet simulator: it runs
// flaked's real code, which talks to Redis through go-redis v9, on virtual
// time, thousands of fleet schedules a minute.
//
// Why not miniredis, which the unit tests use: the simulator's cost is
// script calls, and miniredis serves them over loopback TCP and builds a
// new Lua state for every EVAL. simredis compiles each script once per
// process and runs it in the Server's one Lua state, without a network:
// BenchmarkScript (a lease renewal, guard.lua + renew.lua, both in one
// process, calls alternating) measures the two side by side:
//
//	go test -run '^$' -bench '^BenchmarkScript$' -benchtime 4000x -count 3 ./internal/simredis/
//
// Its figures are in BENCHMARKS.md (Simulator's Redis). Beyond speed,
// miniredis has no virtual clock for TIME and expiry, no identities
// (run_id, master_replid) or their changes, and no snapshots, promotions
// or WAIT.
//
// It implements what the simulator sends and nothing more: DEL, EXISTS,
// PEXPIRE, GET, SET, HGET, HMGET, HSET, HDEL, HGETALL, SADD, SISMEMBER,
// SRANDMEMBER, XADD (MAXLEN and the ID * only), TIME, INFO, WAIT, EVAL and
// EVALSHA, from clients and from scripts. The TestMain of sim/ records
// every command its runs send and fails on one missing here; the
// differential tests
// (diff_test.go) send the same commands and scripts to a real
// redis-server and compare replies and keyspaces.
//
// A Server holds a keyspace, an identity (run_id, master_replid: what
// scripts/lua/guard.lua compares) and a clock the simulator owns. Do
// executes one command with Redis's reply types and error texts; Client
// returns a real go-redis client whose commands call Do and never touch the
// network. Scripts run in gopher-lua with Redis 7 semantics for what
// flaked's scripts use (lua.go lists the known differences).
//
// Replication, failover, restarts and backups are modelled with Snapshot,
// Load, Restart and Promote: a replica's data is an older Snapshot of its
// master's; a failover promotes data that may lack a tail of writes; a
// restart without persistence starts empty.
//
// Nothing depends on Go's map iteration order: hashes and sets keep their
// members in insertion order (as Redis's small encodings do) and
// SRANDMEMBER draws from the Server's rng.
package simredis
