package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const clusterTimeout = 20 * time.Second

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	servers []*Server
}

// StartCluster starts masters redis-servers with cluster-enabled yes, splits
// the 16384 slots evenly between them (CLUSTER ADDSLOTSRANGE), joins them
// (CLUSTER MEET) and waits until every node reports cluster_state:ok and the
// same slot map.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	Require(tb, "redis-server")
	if masters < 1 {
		tb.Fatalf("redistest: StartCluster needs at least one master, got %d", masters)
	}
	// The cluster bus listens on its own port (default port+10000, which may
	// not exist or be taken), so both are chosen explicitly.
	ports := freePorts(tb, 2*masters)
	c := &Cluster{}
	for i := range masters {
		c.servers = append(c.servers, Start(tb, Options{
			Port: ports[2*i],
			Args: []string{
				"cluster-enabled yes",
				"cluster-config-file nodes.conf",
				"cluster-port " + strconv.Itoa(ports[2*i+1]),
				"cluster-node-timeout 5000",
			},
		}))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	clients := make([]*redis.Client, masters)
	for i, s := range c.servers {
		clients[i] = s.Client(tb)
	}
	for i, s := range c.servers {
		cl := clients[i]
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		// Distinct config epochs up front spare the nodes the epoch
		// collision dance after they meet (what redis-cli --cluster does).
		err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		if err == nil {
			err = cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		}
		if err == nil && i > 0 {
			err = clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.Port(), ports[2*i+1]).Err()
		}
		if err != nil {
			tb.Fatalf("redistest: setting up cluster node %s: %v%s", s.Addr(), err, logs(c.servers...))
		}
	}

	err := poll(clusterTimeout, func(ctx context.Context) error {
		var want string
		for i, s := range c.servers {
			cl := clients[i]
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", masters)) {
				return fmt.Errorf("node %s: CLUSTER INFO:\n%s", s.Addr(), info)
			}
			slots, err := cl.ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			got := slotMap(slots)
			if want == "" {
				want = got
			} else if got != want {
				return fmt.Errorf("slot maps differ: %s sees %s, %s sees %s", c.servers[0].Addr(), want, s.Addr(), got)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: cluster of %d did not become ready: %v%s", masters, err, logs(c.servers...))
	}
	return c
}

func slotMap(slots []redis.ClusterSlot) string {
	var parts []string
	for _, s := range slots {
		var addrs []string
		for _, n := range s.Nodes {
			addrs = append(addrs, n.Addr)
		}
		parts = append(parts, fmt.Sprintf("%d-%d:%s", s.Start, s.End, strings.Join(addrs, ",")))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// Servers returns the nodes, in the order of their slot ranges.
func (c *Cluster) Servers() []*Server { return slices.Clone(c.servers) }

// Addrs returns the "127.0.0.1:port" address of every node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URL returns the form redis.ParseClusterURL reads:
//
//	redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	if len(addrs) == 1 {
		return "redis://" + addrs[0]
	}
	return "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
}

// Client returns a go-redis cluster client, closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: 2 * time.Second})
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}
