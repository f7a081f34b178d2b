package simredis

import (
	"slices"
	"strconv"
	"strings"
)

// Replication offsets and WAIT. The server counts its replication offset
// (master_repl_offset) up by one for every write command, run by a client
// or by a script, as Redis advances it for every write it propagates; a
// Conn remembers the offset after its own last write. The replicas are
// what the simulation says they are (SetReplicas): the offsets they have
// acknowledged, usually the Offset of the Snapshot that models their data.
//
// WAIT never blocks: it counts the replicas that hold the connection's
// last write now. A simulation that owns time (package sim) lets the
// timeout pass and brings its replicas up to date first, as replicas
// acknowledging within the timeout would.

// writeCommands are the commands that change the keyspace: each advances
// the offset (command.write).
var writeCommands = []string{"del", "pexpire", "set", "hset", "hdel", "sadd", "xadd"}

// waitCommand is WAIT, which a script may not call.
var waitCommand = &command{name: "wait", arity: 3, noScript: true, run: cmdWait}

// Conn is what a server keeps of one client connection: the offset of its
// last write, which WAIT waits for. The zero value is a new connection.
type Conn struct{ lastWrite int64 }

// DoConn is Do on connection c (nil: a connection that has written
// everything the server has, so WAIT waits for all of it).
func (s *Server) DoConn(c *Conn, args []string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Commands++
	s.tick()
	s.conn = c
	defer func() { s.conn = nil }()
	return clientReply(s.exec(args))
}

// wrote advances the offset for a write command.
func (s *Server) wrote() {
	s.offset++
	if s.conn != nil {
		s.conn.lastWrite = s.offset
	}
}

// Offset returns the replication offset: the number of writes so far.
func (s *Server) Offset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset
}

// Offset is the server's replication offset when the snapshot was taken:
// a replica holding this data has acknowledged up to it (0 for nil, no
// data).
func (d *Data) Offset() int64 {
	if d == nil {
		return 0
	}
	return d.offset
}

// SetReplicas sets the replicas attached to the server, by the offsets
// each has acknowledged, all online, at addresses 10.0.0.10, .11, ...;
// INFO replication lists them (connected_slaves) and WAIT counts them. An
// old master cut off from its replicas keeps listing them, with the
// offsets they had, until repl-timeout.
func (s *Server) SetReplicas(acked ...int64) {
	list := make([]Replica, len(acked))
	for i, a := range acked {
		list[i] = Replica{Addr: "10.0.0." + strconv.Itoa(10+i) + ":6379", State: "online", Offset: a}
	}
	s.SetReplicaList(list)
}

// Replica is one replica as its master lists it: its address, its state
// ("online", or "wait_bgsave" and "send_bulk" during a full sync, when it
// acknowledges nothing) and the offset it has acknowledged.
type Replica struct {
	Addr, State string
	Offset      int64
}

// SetReplicaList sets the replicas the server lists (SetReplicas with
// addresses and states). WAIT counts the online ones.
func (s *Server) SetReplicaList(list []Replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.replicas, list) {
		return
	}
	s.replicas = append(s.replicas[:0], list...)
	s.info.replication = ""
}

// Listed is how many replicas the server lists (INFO's connected_slaves).
func (s *Server) Listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replicas)
}

// cmdWait is WAIT numreplicas timeout: the number of replicas that hold
// the connection's last write (all of its own writes, for Do).
func cmdWait(s *Server, args []string) any {
	n, ok1 := parseInt(args[1])
	ms, ok2 := parseInt(args[2])
	if !ok1 || !ok2 {
		return errNotInt
	}
	if n < 0 || ms < 0 {
		return Error("ERR timeout is negative")
	}
	want := s.offset
	if s.conn != nil {
		want = s.conn.lastWrite
	}
	got := int64(0)
	for _, r := range s.replicas {
		if r.State == "online" && r.Offset >= want {
			got++
		}
	}
	return got
}

// replicationInfo is INFO replication: master_replid first (guard.lua
// matches it at every script call), the replicas and the offset.
func (s *Server) replicationInfo() string {
	if s.info.replication == "" {
		var b strings.Builder
		b.WriteString("# Replication\r\nmaster_replid:" + s.replID + "\r\nrole:master\r\nconnected_slaves:" +
			strconv.Itoa(len(s.replicas)) + "\r\n")
		for i, r := range s.replicas {
			ip, port, _ := strings.Cut(r.Addr, ":")
			b.WriteString("slave" + strconv.Itoa(i) + ":ip=" + ip + ",port=" + port + ",state=" + r.State + ",offset=" +
				strconv.FormatInt(r.Offset, 10) + ",lag=0\r\n")
		}
		replID2 := s.replID2
		if replID2 == "" {
			replID2 = "0000000000000000000000000000000000000000"
		}
		b.WriteString("master_failover_state:no-failover\r\nmaster_replid2:" + replID2 + "\r\n")
		s.info.replication = b.String()
	}
	return s.info.replication + "master_repl_offset:" + strconv.FormatInt(s.offset, 10) + "\r\nsecond_repl_offset:-1\r\n"
}

// RewriteKeys copies keys (with their expiry) from d into the live data
// without changing the identity: an operator's RESTORE of old values, or
// DEBUG RELOAD of another file. A key missing from d is deleted. It
// returns how many keys it rewrote.
func (s *Server) RewriteKeys(d *Data, keys ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range keys {
		s.offset++
		v, ok := d.keys[k]
		if !ok {
			if s.del(k) {
				n++
			}
			continue
		}
		v.shared = true
		s.db.keys[k] = v
		delete(s.db.expires, k)
		if at, ok := d.expires[k]; ok {
			s.db.expires[k] = at
		}
		n++
	}
	return n
}

// Memory and eviction: the maxmemory_policy INFO memory reports, and
// Evict, which removes keys as that policy would once Redis is over its
// maxmemory (the simulation says when).

// SetMaxmemoryPolicy sets the policy INFO memory reports ("noeviction"
// unless set) and Evict follows.
func (s *Server) SetMaxmemoryPolicy(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
}

// Evict removes up to n keys as the policy does: any key under
// allkeys-*, only keys with an expiry under volatile-* (the sample is
// drawn from the server's rng, over keys in sorted order), none under
// noeviction. It returns the keys evicted.
func (s *Server) Evict(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var pool []string
	switch {
	case strings.HasPrefix(s.policy, "allkeys-"):
		pool = s.db.Keys()
	case strings.HasPrefix(s.policy, "volatile-"):
		for k := range s.db.expires {
			pool = append(pool, k)
		}
		slices.Sort(pool)
	}
	var out []string
	for ; n > 0 && len(pool) > 0; n-- {
		i := s.rng.IntN(len(pool))
		k := pool[i]
		pool = append(pool[:i], pool[i+1:]...)
		s.del(k)
		s.offset++
		out = append(out, k)
	}
	return out
}

func (s *Server) memoryInfo() string {
	p := s.policy
	if p == "" {
		p = "noeviction"
	}
	mm := "0"
	if p != "noeviction" {
		mm = "104857600"
	}
	return "# Memory\r\nmaxmemory:" + mm + "\r\nmaxmemory_policy:" + p + "\r\n"
}

// INFO refused or renamed.

// InfoFault is how INFO fails on a server (InfoOK: it does not).
type InfoFault int

const (
	InfoOK InfoFault = iota
	// InfoNoPerm: the user may not run INFO server or INFO replication
	// (an ACL granting only +info|server, or -info).
	InfoNoPerm
	// InfoRenamed: INFO is renamed (rename-command), so unknown.
	InfoRenamed
)

// SetInfoFault makes INFO fail from now on (InfoOK: work again).
func (s *Server) SetInfoFault(f InfoFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infoFault = f
}

// infoRefused returns the error INFO args gets under the fault, or nil.
// fromScript: the text a script's redis.call gets for an unknown command.
func (s *Server) infoRefused(args []string, fromScript bool) any {
	switch s.infoFault {
	case InfoRenamed:
		if fromScript {
			return Error("ERR Unknown Redis command called from script")
		}
		return unknownCommand(args)
	case InfoNoPerm:
		section := "server"
		if len(args) > 1 {
			section = strings.ToLower(args[1])
		}
		if section == "server" || section == "replication" || section == "all" || section == "everything" || section == "default" {
			return Error("NOPERM User flaked has no permissions to run the 'info|" + section + "' command")
		}
	}
	return nil
}
