package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinels are n redis-sentinel processes monitoring one master as
// "mymaster", the deployment Sentinel's documentation recommends (three
// Sentinels, a quorum of two): unlike Sentinel's single one, a promotion
// needs a majority, and a test can take Sentinels away one by one. The
// master is given by address, so a test may have them reach it through a
// fault proxy and cut it off from them.
type Sentinels struct {
	servers []*Server
}

// SentinelsOptions configure StartSentinels.
type SentinelsOptions struct {
	N         int           // Sentinels; default 3
	Quorum    int           // default a majority of N
	DownAfter time.Duration // down-after-milliseconds; default 500 ms
	// FailoverTimeout is failover-timeout; default 5 s.
	FailoverTimeout time.Duration
}

// StartSentinels starts the Sentinels monitoring master (host:port) and
// waits until each of them knows the others and the replicas the master
// lists, as replicas in sync (what a failover needs).
func StartSentinels(tb testing.TB, master string, replicas int, o SentinelsOptions) *Sentinels {
	tb.Helper()
	Require(tb, "redis-server", "redis-sentinel")
	if o.N == 0 {
		o.N = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.N/2 + 1
	}
	if o.DownAfter == 0 {
		o.DownAfter = 500 * time.Millisecond
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sentinels{}
	for range o.N {
		s.servers = append(s.servers, start(tb, "redis-sentinel", true, Options{Args: []string{
			fmt.Sprintf("sentinel monitor %s %s %s %d", masterName, host, port, o.Quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", masterName, o.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", masterName, o.FailoverTimeout.Milliseconds()),
		}}))
	}
	err = poll(30*time.Second, func(ctx context.Context) error {
		for _, sv := range s.servers {
			c := redis.NewSentinelClient(&redis.Options{Addr: sv.Addr(), DialTimeout: time.Second})
			m, err := c.Master(ctx, masterName).Result()
			if err == nil && m["num-other-sentinels"] != strconv.Itoa(o.N-1) {
				err = fmt.Errorf("sentinel %s knows %s other sentinels, want %d", sv.Addr(), m["num-other-sentinels"], o.N-1)
			}
			if err == nil {
				var rs []map[string]string
				if rs, err = c.Replicas(ctx, masterName).Result(); err == nil && synced(rs) < replicas {
					err = fmt.Errorf("sentinel %s sees %d replicas in sync, want %d: %v", sv.Addr(), synced(rs), replicas, rs)
				}
			}
			c.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: sentinels: %v%s", err, logs(s.servers...))
	}
	return s
}

// synced counts the replicas a Sentinel lists with a working link.
func synced(rs []map[string]string) int {
	n := 0
	for _, r := range rs {
		if r["master-link-status"] == "ok" && !strings.Contains(r["flags"], "down") {
			n++
		}
	}
	return n
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var out []string
	for _, sv := range s.servers {
		out = append(out, sv.Addr())
	}
	return out
}

// URL is the flaked form: redis-sentinel://host:port,host:port,.../mymaster.
func (s *Sentinels) URL() string {
	return "redis-sentinel://" + strings.Join(s.Addrs(), ",") + "/" + masterName
}

// Servers are the Sentinel processes, to stop or pause one.
func (s *Sentinels) Servers() []*Server { return s.servers }

// WaitMaster waits until every Sentinel reports master (host:port) as the
// master, as after a failover to it.
func (s *Sentinels) WaitMaster(tb testing.TB, master string, within time.Duration) {
	tb.Helper()
	err := poll(within, func(ctx context.Context) error {
		for _, sv := range s.servers {
			c := redis.NewSentinelClient(&redis.Options{Addr: sv.Addr(), DialTimeout: time.Second})
			addr, err := c.GetMasterAddrByName(ctx, masterName).Result()
			c.Close()
			if err != nil {
				return err
			}
			if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != master {
				return fmt.Errorf("sentinel %s reports master %v, want %s", sv.Addr(), addr, master)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: %v%s", err, logs(s.servers...))
	}
}

// Master is the master's address as the first Sentinel that answers
// reports it.
func (s *Sentinels) Master(ctx context.Context) (string, error) {
	var last error
	for _, sv := range s.servers {
		c := redis.NewSentinelClient(&redis.Options{Addr: sv.Addr(), DialTimeout: time.Second})
		addr, err := c.GetMasterAddrByName(ctx, masterName).Result()
		c.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel reports a master: %v", last)
}
