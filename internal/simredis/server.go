package simredis

import (
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Server is one simulated redis-server process: its data, its identity,
// its clock. It is safe for concurrent use, one command (or script) at a
// time, as Redis runs them; a simulation normally calls it from one
// goroutine.
type Server struct {
	mu  sync.Mutex
	now func() time.Time
	rng *rand.Rand

	db     *Data
	runID  string
	replID string
	// replID2 is master_replid2: the replication ID a promoted replica
	// followed before (PromoteReplica), "" for none.
	replID2 string

	// scripts is the script cache (EVAL): SHA1 -> compiled
	// script. The compiled code is shared by every server of the process
	// (protos); what this map models is which scripts this server knows,
	// for NOSCRIPT.
	scripts map[string]*lua.FunctionProto
	lua     *engine // made at the first script call
	luaRand lrand48 // math.random's state: the process's, as in Redis

	// The clock read when the current command (or script) started: expiry
	// and stream IDs use it, as Redis 7 freezes time for a script.
	nowTime time.Time
	nowMs   int64

	info  infoCache
	stats Stats

	// Replication (replicas.go): the offset, the replicas' acknowledged
	// offsets, the connection of the command running.
	offset   int64
	replicas []Replica
	conn     *Conn
	// Faults a simulation sets (replicas.go): the eviction policy, INFO
	// refused or renamed.
	policy    string
	infoFault InfoFault
}

// Stats counts what a Server did.
type Stats struct {
	Commands       uint64 // commands run by Do, a script call counting as one
	ScriptCalls    uint64 // EVAL and EVALSHA runs (not NOSCRIPT replies)
	ScriptCommands uint64 // commands run by scripts (redis.call, redis.pcall)
	Keys           int    // keys held, not counting expired ones
}

// New returns an empty server. now is its wall clock, which the
// simulation owns (virtual time); it is read once per command. rng draws
// SRANDMEMBER's members and the server's identities, so a server made with
// the same seed and given the same commands replies the same. A nil now
// means time.Now, a nil rng a fixed seed.
func New(now func() time.Time, rng *rand.Rand) *Server {
	if now == nil {
		now = time.Now
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(1, 2))
	}
	s := &Server{now: now, rng: rng, db: newData(), scripts: map[string]*lua.FunctionProto{}, luaRand: newLrand48()}
	s.runID, s.replID = s.newID(), s.newID()
	return s
}

// Do executes one command, e.g. "EVALSHA", sha, "3", k1, k2, k3, argv....
// The reply has the types go-redis returns for a *redis.Cmd on a RESP2
// connection: int64, string (bulk and status), []any (nested; nil for a
// nil element; HGETALL a flat array of fields and values), and
// (nil, redis.Nil) for a top-level nil. An error reply is returned as an
// Error, with Redis's text.
func (s *Server) Do(args []string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Commands++
	s.tick()
	return clientReply(s.exec(args))
}

// tick reads the clock for the command about to run.
func (s *Server) tick() {
	s.nowTime = s.now()
	s.nowMs = s.nowTime.UnixMilli()
}

// RunID returns the run_id INFO server shows: 40 hex digits, new at every
// Restart.
func (s *Server) RunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runID
}

// ReplID returns the master_replid INFO replication shows: 40 hex digits,
// new at every Restart and Promote.
func (s *Server) ReplID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replID
}

// ReplID2 returns the master_replid2 INFO replication shows ("" for
// none: INFO shows 40 zeros).
func (s *Server) ReplID2() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replID2
}

// Snapshot returns a copy of the data as of now, with absolute expiry
// times: what a replica holds once it has replicated up to this moment,
// an RDB save, a backup. Later writes to the server do not change it, nor
// does loading it anywhere. Keys already expired are left out.
func (s *Server) Snapshot() *Data {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	d := s.db.copy(func(key string) bool {
		at, ok := s.db.expires[key]
		return ok && s.nowMs > at
	})
	d.offset = s.offset
	return d
}

// Restart models a process restart: a new run_id and master_replid, an
// empty script cache, and the data replaced by a copy of d: what the
// restarted process loaded (an RDB or AOF; an old backup restored), or
// nothing when d is nil (no persistence). Keys whose expiry passed while
// it was down are gone.
func (s *Server) Restart(d *Data) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load(d)
	s.runID, s.replID, s.replID2 = s.newID(), s.newID(), ""
	s.replicas = s.replicas[:0] // they attach again (SetReplicas)
	clear(s.scripts)
	s.luaRand = newLrand48()
	s.info = infoCache{}
}

// Promote models this server, a replica, becoming master: a new
// master_replid (replication history starts anew), the same run_id (the
// process lives on). When d is not nil the data is replaced by a copy of
// it first: what the replica had replicated, for a simulation that models
// the replica's data as an older Snapshot of its master's rather than as
// a Server of its own. The script cache is emptied: Redis 7 replicates
// scripts by their effects and does not propagate SCRIPT LOAD, so a
// replica never learns its master's scripts (go-redis's Script.Run sends
// EVAL on NOSCRIPT).
func (s *Server) Promote(d *Data) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d != nil {
		s.load(d)
	}
	s.replID = s.newID()
	s.replicas = s.replicas[:0] // they attach again (SetReplicas)
	clear(s.scripts)
	s.info = infoCache{}
}

// PromoteReplica models a replica's process becoming master, for a
// simulation that keeps a replica as the Data it received and makes a
// Server only for a master: the data is replaced by a copy of d, the
// run_id is the replica process's (runID), master_replid is new and
// master_replid2 is replID2, the replication ID of the history the
// replica followed ("" when it followed none), as PSYNC2 keeps it so the
// old master's other replicas can continue from the promoted one, and
// the replication offset goes on from the replica's. The script cache is
// emptied, as Promote does.
func (s *Server) PromoteReplica(d *Data, runID, replID2 string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load(d)
	if d != nil {
		s.offset = d.offset // the replication offset goes on from the replica's
	}
	s.runID, s.replID, s.replID2 = runID, s.newID(), replID2
	s.replicas = s.replicas[:0]
	clear(s.scripts)
	s.info = infoCache{}
}

// Field returns field of the hash at key as stored, or false: what a
// simulation reads of a server's data without running a command (no
// expiry on the way, nothing counted).
func (s *Server) Field(key, field string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.db.keys[key]
	if v == nil || v.kind != kindHash {
		return "", false
	}
	return v.hash.get(field)
}

// Load replaces the data with a copy of d, keeping the identity and the
// script cache: a replica catching up to its master's data as of some
// moment (d = an earlier master Snapshot), or DEBUG RELOAD. nil empties
// the server.
func (s *Server) Load(d *Data) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load(d)
}

func (s *Server) load(d *Data) {
	if d == nil {
		s.db = newData()
		return
	}
	s.db = d.copy(nil)
}

// Stats returns what the server did so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	s.tick()
	st.Keys = len(s.db.keys)
	for _, at := range s.db.expires {
		if s.nowMs > at {
			st.Keys--
		}
	}
	return st
}

// newID returns 40 hex digits from the rng, like a run_id or replid.
func (s *Server) newID() string {
	var b [20]byte
	for i := 0; i < len(b); i += 8 {
		v := s.rng.Uint64()
		for j := i; j < min(i+8, len(b)); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return hex.EncodeToString(b[:])
}
