package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redisinfo"
)

const (
	masterName      = "mymaster"
	failoverTimeout = 20 * time.Second
)

// Sentinel is a master, one replica and one redis-sentinel monitoring the
// master as "mymaster" with quorum 1, down-after-milliseconds 1000 and
// failover-timeout 5000. Master and Replica give access to the two
// servers, for example to Pause the master and let the sentinel fail over.
type Sentinel struct {
	sentinel *Server

	mu              sync.Mutex
	master, replica *Server // last known roles
}

// StartSentinel starts the master, the replica (replicaof the master) and the
// sentinel, and waits until the sentinel sees the replica in sync.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	Require(tb, "redis-server", "redis-sentinel")
	// Without the delay a full sync waits 5 s for more replicas to join.
	const noDelay = "repl-diskless-sync-delay 0"
	master := Start(tb, Options{Args: []string{noDelay}})
	replica := Start(tb, Options{Args: []string{noDelay, fmt.Sprintf("replicaof 127.0.0.1 %d", master.Port())}})
	sent := start(tb, "redis-sentinel", true, Options{Args: []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", masterName, master.Port()),
		"sentinel down-after-milliseconds " + masterName + " 1000",
		"sentinel failover-timeout " + masterName + " 5000",
	}})
	s := &Sentinel{sentinel: sent, master: master, replica: replica}

	sc := s.sentinelClient()
	defer sc.Close()
	err := poll(startTimeout, func(ctx context.Context) error {
		replicas, err := sc.Replicas(ctx, masterName).Result()
		if err != nil {
			return err
		}
		for _, r := range replicas {
			if net.JoinHostPort(r["ip"], r["port"]) == replica.Addr() && r["flags"] == "slave" && r["master-link-status"] == "ok" {
				return nil
			}
		}
		return fmt.Errorf("sentinel does not see %s as a synced replica yet: %v", replica.Addr(), replicas)
	})
	if err != nil {
		tb.Fatalf("redistest: sentinel setup: %v%s", err, logs(master, replica, sent))
	}
	// The replica acknowledges writes only from its first periodic ACK
	// after the sync (up to 1 s later): until then every grant's WAIT is
	// refused and retried, which a test counting events or claims would
	// see. Wait for it here, once.
	mc := redis.NewClient(master.clientOptions())
	defer mc.Close()
	err = poll(startTimeout, func(ctx context.Context) error {
		conn := mc.Conn()
		defer conn.Close()
		if err := conn.Set(ctx, "redistest:probe", 1, 0).Err(); err != nil {
			return err
		}
		if n := conn.Wait(ctx, 1, 500*time.Millisecond).Val(); n < 1 {
			return fmt.Errorf("the replica has not acknowledged a write yet")
		}
		return conn.Del(ctx, "redistest:probe").Err()
	})
	if err != nil {
		tb.Fatalf("redistest: sentinel setup: %v%s", err, logs(master, replica, sent))
	}
	return s
}

func (s *Sentinel) sentinelClient() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.Addr(), DialTimeout: 2 * time.Second})
}

// MasterName returns "mymaster".
func (s *Sentinel) MasterName() string { return masterName }

// SentinelAddrs returns the address of the sentinel.
func (s *Sentinel) SentinelAddrs() []string { return []string{s.sentinel.Addr()} }

// URL returns the form redis.ParseFailoverURL reads (sentinel addresses
// as host and addr parameters, the master name as master_name):
//
//	redis://127.0.0.1:26379/0?master_name=mymaster
func (s *Sentinel) URL() string {
	addrs := s.SentinelAddrs()
	u := "redis://" + addrs[0] + "/0?master_name=" + masterName
	for _, a := range addrs[1:] {
		u += "&addr=" + a
	}
	return u
}

// Client returns a go-redis failover client that finds the master through
// the sentinel; it is closed when the test ends.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    masterName,
		SentinelAddrs: s.SentinelAddrs(),
		DialTimeout:   2 * time.Second,
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master returns the server the sentinel reports as master (or, if the
// sentinel does not answer, the master as of the last failover).
func (s *Sentinel) Master() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.sentinelClient()
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if addr, err := sc.GetMasterAddrByName(ctx, masterName).Result(); err == nil && len(addr) == 2 &&
		net.JoinHostPort(addr[0], addr[1]) == s.replica.Addr() {
		s.master, s.replica = s.replica, s.master
	}
	return s.master
}

// Replica returns the server that is not Master(). After a failover the
// former master keeps acting as a master, accepting writes, for about 10 s
// until the sentinel reconfigures it as a replica.
func (s *Sentinel) Replica() *Server {
	m := s.Master()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == s.master {
		return s.replica
	}
	return s.master
}

// Failover waits until the replica has received every write the master
// has acknowledged so far, runs SENTINEL FAILOVER mymaster and waits until
// the sentinel reports the former replica as master and that server answers
// ROLE as master (about 1 s). Writes that race with Failover may be lost:
// replication is asynchronous. The former master is left running; see
// Replica.
func (s *Sentinel) Failover(tb testing.TB) {
	tb.Helper()
	old := s.Master()
	next := s.Replica()
	sc := s.sentinelClient()
	defer sc.Close()
	// Sentinel promotes the replica at once, dropping whatever it has not
	// received yet. Like the FAILOVER command, wait until it has caught up.
	if err := waitCaughtUp(old, next); err != nil {
		tb.Fatalf("redistest: before failover: %v%s", err, logs(old, next, s.sentinel))
	}
	// NOGOODSLAVE or INPROG can be transient: retry within the bound.
	err := poll(failoverTimeout, func(ctx context.Context) error {
		return sc.Failover(ctx, masterName).Err()
	})
	if err != nil {
		tb.Fatalf("redistest: SENTINEL FAILOVER %s: %v%s", masterName, err, logs(old, next, s.sentinel))
	}
	s.waitPromoted(tb, next)
}

// KillMaster kills the master (SIGKILL) and waits until the sentinel has
// promoted the replica (about 2-3 s). Writes the replica has not received
// yet are lost; use WAIT (redis.Client.Wait) to make sure a write has
// reached it. (Right after the initial full sync the master holds the
// replication stream back until the replica's first REPLCONF ACK, which
// comes within a second.)
//
// The killed server stays down. Restart brings it back as an empty master,
// which the sentinel turns into a replica about 10 s later.
func (s *Sentinel) KillMaster(tb testing.TB) {
	tb.Helper()
	old := s.Master()
	next := s.Replica()
	old.Kill()
	s.waitPromoted(tb, next)
}

func (s *Sentinel) waitPromoted(tb testing.TB, next *Server) {
	tb.Helper()
	sc := s.sentinelClient()
	defer sc.Close()
	nc := redis.NewClient(next.clientOptions())
	defer nc.Close()
	err := poll(failoverTimeout, func(ctx context.Context) error {
		addr, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		if err != nil {
			return err
		}
		if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != next.Addr() {
			return fmt.Errorf("sentinel reports master %v, want %s", addr, next.Addr())
		}
		role, err := Role(ctx, nc)
		if err != nil {
			return err
		}
		if role != "master" {
			return fmt.Errorf("%s answers ROLE %s", next.Addr(), role)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: %s was not promoted: %v%s", next.Addr(), err, logs(s.master, s.replica, s.sentinel))
	}
	s.mu.Lock()
	if s.replica == next {
		s.master, s.replica = s.replica, s.master
	}
	s.mu.Unlock()
}

// Role returns the first element of ROLE: "master", "slave" or "sentinel".
func Role(ctx context.Context, c *redis.Client) (string, error) {
	res, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(res) == 0 {
		return "", fmt.Errorf("empty ROLE reply")
	}
	role, ok := res[0].(string)
	if !ok {
		return "", fmt.Errorf("unexpected ROLE reply %v", res)
	}
	return strings.ToLower(role), nil
}

// waitCaughtUp waits until replica has processed the master's replication
// stream up to the master's offset.
func waitCaughtUp(master, replica *Server) error {
	mc := redis.NewClient(master.clientOptions())
	defer mc.Close()
	rc := redis.NewClient(replica.clientOptions())
	defer rc.Close()
	return poll(failoverTimeout, func(ctx context.Context) error {
		m, err := replInfo(ctx, mc)
		if err != nil {
			return err
		}
		r, err := replInfo(ctx, rc)
		if err != nil {
			return err
		}
		want, _ := strconv.ParseInt(m["master_repl_offset"], 10, 64)
		got, err := strconv.ParseInt(r["slave_repl_offset"], 10, 64)
		if r["master_link_status"] != "up" || err != nil || got < want {
			return fmt.Errorf("replica %s (link %q, offset %q) behind master %s (offset %d)",
				replica.Addr(), r["master_link_status"], r["slave_repl_offset"], master.Addr(), want)
		}
		return nil
	})
}

// replInfo returns the fields of INFO replication.
func replInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	return redisinfo.Fields(info), nil
}
