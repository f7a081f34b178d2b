package doctor

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redisinfo"
)

// env is what the checks of one run share: the target, the servers the
// fleet writes to (each master of a Cluster, else the one master) and
// what guard.lua's reading of INFO gave on each, read once.
type env struct {
	t Target

	once    sync.Once
	masters []*server
	err     error // listing the masters failed
}

// server is one Redis server the fleet writes to.
type server struct {
	addr string
	c    *redis.Client

	probed bool
	id     string // run_id:master_replid, "" when refused
	info   string // INFO server replication memory as a script reads it
	refuse string // the writing scripts' refusal, "" for none
	err    error  // the probe could not run (Redis away, EVAL refused)
}

// servers returns the masters, each probed (probe.lua).
func (e *env) servers(ctx context.Context) ([]*server, error) {
	e.once.Do(func() {
		switch c := e.t.Redis.(type) {
		case *redis.ClusterClient:
			var mu sync.Mutex
			e.err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				mu.Lock()
				defer mu.Unlock()
				e.masters = append(e.masters, &server{addr: m.Options().Addr, c: m})
				return nil
			})
		case *redis.Client:
			addr := c.Options().Addr
			if addr == "FailoverClient" { // go-redis's name for a Sentinel-found master
				addr = "master of " + e.t.MasterName
			}
			e.masters = []*server{{addr: addr, c: c}}
		default:
			e.masters = nil
		}
		for _, s := range e.masters {
			s.probe(ctx)
		}
	})
	return e.masters, e.err
}

var probeScript = redis.NewScript(contract.Probe)

// probe runs probe.lua on s: guard.lua's own reading of INFO, from a
// script, where ACL rules and rename-command apply as they do to the
// writing scripts.
func (s *server) probe(ctx context.Context) {
	s.probed = true
	v, err := probeScript.Run(ctx, s.c, nil).Slice()
	if err != nil {
		s.err = err
		return
	}
	switch {
	case len(v) == 3 && v[0] == "OK":
		s.id, _ = v[1].(string)
		s.info, _ = v[2].(string)
	case len(v) == 2 && v[0] == "UNSAFE":
		s.refuse, _ = v[1].(string)
		s.refuse = contract.ExplainRefusal(s.refuse)
	}
}

// refusal is s's refusal without its "UNSAFE <check>: " prefix.
func (s *server) refusal() string {
	_, text, _ := strings.Cut(s.refuse, ": ")
	return text
}

// refusedCheck is the check ("identity", "eviction") of s's refusal.
func (s *server) refusedCheck() string {
	check, _, _ := strings.Cut(strings.TrimPrefix(s.refuse, contract.UnsafePrefix), ":")
	return check
}

// replicaAddrs are the addresses of the replicas INFO replication lists.
func replicaAddrs(info string) []string {
	var out []string
	for _, r := range redisinfo.Replicas(info) {
		if r.IP != "" && r.Port != "" {
			out = append(out, r.Addr())
		}
	}
	return out
}

// dial connects to another server of the deployment (a replica) as the
// fleet's user on s does.
func (s *server) dial(addr string) *redis.Client {
	o := s.c.Options()
	return redis.NewClient(&redis.Options{Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, MaxRetries: -1,
		DisableIdentity: true})
}
