package simredis

import (
	"strconv"
	"strings"
	"testing"
)

// WAIT counts the replicas holding the connection's last write, as Redis
// does: a replica behind it does not count, one that caught up does, and
// a connection that wrote nothing after the replica's offset needs
// nothing more.
func TestWait_CountsReplicasHoldingTheConnectionsLastWrite(t *testing.T) {
	s := New(nil, nil)
	var a, b Conn
	mustDo := func(c *Conn, args ...string) any {
		t.Helper()
		v, err := s.DoConn(c, args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	mustDo(&b, "SET", "k0", "v")
	replica := s.Snapshot() // the replica has b's write
	s.SetReplicas(replica.Offset())
	mustDo(&a, "SET", "k1", "v")
	mustDo(&a, "EVAL", "return redis.call('HSET', KEYS[1], 'f', 'v')", "1", "n") // a script's write counts too
	if got := mustDo(&a, "WAIT", "1", "100"); got != int64(0) {
		t.Errorf("WAIT on a connection whose write the replica lacks: %v, want 0", got)
	}
	if got := mustDo(&b, "WAIT", "1", "100"); got != int64(1) {
		t.Errorf("WAIT on a connection whose writes the replica has: %v, want 1", got)
	}
	if !strings.Contains(mustDo(nil, "INFO", "replication").(string), "connected_slaves:1\r\n") {
		t.Error("INFO replication does not list the replica")
	}
	s.SetReplicas(s.Snapshot().Offset(), replica.Offset())
	if got := mustDo(&a, "WAIT", "2", "100"); got != int64(1) {
		t.Errorf("WAIT with one replica caught up and one behind: %v, want 1", got)
	}
	s.Promote(nil)
	if got := mustDo(&b, "WAIT", "1", "0"); got != int64(0) {
		t.Errorf("WAIT after a promotion, no replica attached: %v, want 0", got)
	}
	if _, err := s.Do([]string{"EVAL", "return redis.call('WAIT', '1', '0')", "0"}); err == nil {
		t.Error("WAIT from a script: want refused, as Redis refuses it")
	}
}

// Eviction follows the policy: allkeys-* takes any key, volatile-* only
// keys with an expiry; INFO memory reports the policy.
func TestEvict_FollowsPolicy(t *testing.T) {
	s := New(nil, nil)
	for _, args := range [][]string{{"SET", "plain", "1"}, {"SET", "lease", "1", "PX", "100000"}, {"HSET", "meta", "a", "1"}} {
		if _, err := s.Do(args); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Evict(10); len(got) != 0 {
		t.Errorf("noeviction evicted %v", got)
	}
	s.SetMaxmemoryPolicy("volatile-lru")
	if got := s.Evict(10); len(got) != 1 || got[0] != "lease" {
		t.Errorf("volatile-lru evicted %v, want [lease]", got)
	}
	s.SetMaxmemoryPolicy("allkeys-lru")
	if info, _ := s.Do([]string{"INFO", "memory"}); !strings.Contains(info.(string), "maxmemory_policy:allkeys-lru\r\n") {
		t.Errorf("INFO memory: %q", info)
	}
	if got := s.Evict(10); len(got) != 2 {
		t.Errorf("allkeys-lru evicted %v, want both keys left", got)
	}
}

// INFO refused by an ACL or renamed: the errors a client and a script get.
func TestInfoFault(t *testing.T) {
	s := New(nil, nil)
	pcall := "local r = redis.pcall('INFO', ARGV[1]) if type(r) == 'table' then return r.err end return 'ok'"
	s.SetInfoFault(InfoNoPerm)
	if _, err := s.Do([]string{"INFO", "replication"}); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("INFO replication under NOPERM: %v", err)
	}
	if v, _ := s.Do([]string{"EVAL", pcall, "0", "server"}); !strings.HasPrefix(v.(string), "NOPERM") {
		t.Errorf("a script's INFO server under NOPERM: %v", v)
	}
	if v, _ := s.Do([]string{"EVAL", pcall, "0", "memory"}); v != "ok" {
		t.Errorf("a script's INFO memory under NOPERM of server and replication: %v", v)
	}
	s.SetInfoFault(InfoRenamed)
	if _, err := s.Do([]string{"INFO"}); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown command 'INFO'") {
		t.Errorf("INFO renamed: %v", err)
	}
	if v, _ := s.Do([]string{"EVAL", pcall, "0", "server"}); v != "ERR Unknown Redis command called from script" {
		t.Errorf("a script's INFO, renamed: %v", v)
	}
	s.SetInfoFault(InfoOK)
	if v, _ := s.Do([]string{"EVAL", pcall, "0", "server"}); v != "ok" {
		t.Errorf("INFO back: %v", v)
	}
}

// Keys rewritten by hand take old values without an identity change.
func TestRewriteKeys_KeepsIdentity(t *testing.T) {
	s := New(nil, nil)
	s.Do([]string{"SET", "r", "10"})
	old := s.Snapshot()
	s.Do([]string{"SET", "r", "20"})
	s.Do([]string{"SET", "new", "1"})
	run, repl := s.RunID(), s.ReplID()
	if n := s.RewriteKeys(old, "r", "new"); n != 2 {
		t.Errorf("rewrote %d keys, want 2", n)
	}
	if v, _ := s.Do([]string{"GET", "r"}); v != "10" {
		t.Errorf("r = %v, want the old 10", v)
	}
	if n, _ := s.Do([]string{"EXISTS", "new"}); n != int64(0) {
		t.Error("a key absent from the old data survived the rewrite")
	}
	if s.RunID() != run || s.ReplID() != repl {
		t.Error("the identity changed")
	}
}

// A replica in a full sync is listed (connected_slaves counts it, as
// guard.lua's mark does) but acknowledges nothing; a promoted replica
// reports the replication ID it followed as master_replid2 and goes on
// from its offset, with its own run_id.
func TestReplicaList_SyncingAndPromoted(t *testing.T) {
	s := New(nil, nil)
	var c Conn
	if _, err := s.DoConn(&c, []string{"SET", "k", "v"}); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	s.SetReplicaList([]Replica{{Addr: "10.0.0.11:6379", State: "online", Offset: snap.Offset()}, {Addr: "10.0.0.12:6379", State: "wait_bgsave"}})
	info, _ := s.Do([]string{"INFO", "replication"})
	if !strings.Contains(info.(string), "connected_slaves:2\r\n") || !strings.Contains(info.(string), "ip=10.0.0.12,port=6379,state=wait_bgsave") {
		t.Errorf("INFO replication: %q", info)
	}
	if got, _ := s.DoConn(&c, []string{"WAIT", "2", "0"}); got != int64(1) {
		t.Errorf("WAIT 2 with one replica online and one in a full sync: %v, want 1", got)
	}
	r := New(nil, nil)
	r.PromoteReplica(snap, "0123456789012345678901234567890123456789", s.ReplID())
	info, _ = r.Do([]string{"INFO", "server", "replication"})
	for _, want := range []string{"run_id:0123456789012345678901234567890123456789", "master_replid2:" + s.ReplID(), "master_repl_offset:" + strconv.FormatInt(snap.Offset(), 10)} {
		if !strings.Contains(info.(string), want) {
			t.Errorf("INFO of the promoted replica lacks %s: %q", want, info)
		}
	}
	if v, ok := r.Field("k", "x"); ok || v != "" {
		t.Errorf("Field of a string key: %q %v", v, ok)
	}
}
