package coord

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/redisurl"
)

// Sentinels gives the views of every Sentinel watching the fleet's master;
// with Options.Sentinels set, a grant the Sentinels vouch for is used
// whatever the replicas acknowledged (Split brain in the package doc).
// NewSentinels makes one from a redis-sentinel:// URL; the simulator and
// tests give their own.
type Sentinels = replwait.Sentinels

// SentinelView is one Sentinel's answer to SENTINEL MASTER <name>.
type SentinelView = replwait.SentinelView

// SentinelSet asks the Sentinels of a redis-sentinel:// URL, and those
// they announce, for their view of the master. Safe for concurrent use.
type SentinelSet struct {
	master string
	opt    redis.Options // the options every Sentinel client is made from

	mu       sync.Mutex
	clients  map[string]*redis.Client
	replicas replwait.ReplicaMemory // the replicas they know, for a check none answers
}

// sentinelTimeout bounds one Sentinel's answer: past it, the check does
// not vouch for the grant it went with (MaxCheckAge), and the replicas'
// WAIT decides.
const sentinelTimeout = 500 * time.Millisecond

// NewSentinels returns the Sentinels of rawURL (redisurl.NewClient's forms), or
// nil and no error when it does not name Sentinels. Close it when done.
func NewSentinels(rawURL string) (*SentinelSet, error) {
	fo, err := redisurl.SentinelOptions(rawURL)
	if err != nil || fo == nil {
		return nil, err
	}
	return NewSentinelSet(fo.MasterName, fo.SentinelAddrs, fo.SentinelUsername, fo.SentinelPassword, fo.TLSConfig), nil
}

// NewSentinelSet returns the Sentinels at addrs watching master, logged
// in as username/password (both may be empty), over TLS when tlsConfig is
// set. Close it when done.
func NewSentinelSet(master string, addrs []string, username, password string, tlsConfig *tls.Config) *SentinelSet {
	s := &SentinelSet{master: master, clients: map[string]*redis.Client{}, opt: redis.Options{
		Username: username, Password: password, TLSConfig: tlsConfig,
		DialTimeout: sentinelTimeout, ReadTimeout: sentinelTimeout, WriteTimeout: sentinelTimeout,
		MaxRetries: -1, DisableIdentity: true, PoolSize: 2,
	}}
	for _, a := range addrs {
		s.add(a)
	}
	return s
}

// MasterName is the master the Sentinels are asked about.
func (s *SentinelSet) MasterName() string { return s.master }

func (s *SentinelSet) add(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[addr]; ok {
		return
	}
	o := s.opt
	o.Addr = addr
	s.clients[addr] = redis.NewClient(&o)
}

func (s *SentinelSet) known() map[string]*redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*redis.Client, len(s.clients))
	for a, c := range s.clients {
		out[a] = c
	}
	return out
}

// Views asks every Sentinel it knows at once. When the answers name
// Sentinels it did not ask (SENTINEL SENTINELS), it asks them too, and
// keeps them for the next check, so a URL naming one Sentinel of three
// still reaches all.
func (s *SentinelSet) Views(ctx context.Context) []SentinelView {
	asked := s.known()
	views, found := s.ask(ctx, asked)
	fresh := map[string]*redis.Client{}
	for _, addr := range found {
		if _, ok := asked[addr]; !ok {
			s.add(addr)
		}
	}
	for a, c := range s.known() {
		if _, ok := asked[a]; !ok {
			fresh[a] = c
		}
	}
	if len(fresh) > 0 {
		more, _ := s.ask(ctx, fresh)
		views = append(views, more...)
	}
	return s.replicas.Fill(views)
}

// ask asks each client for its view at once, and returns the views and
// the addresses of the Sentinels they name.
func (s *SentinelSet) ask(ctx context.Context, clients map[string]*redis.Client) ([]SentinelView, []string) {
	out := make([]SentinelView, len(clients))
	addrs := make([][]string, len(clients))
	var wg sync.WaitGroup
	i := 0
	for addr, c := range clients {
		wg.Add(1)
		go func(i int, addr string, c *redis.Client) {
			defer wg.Done()
			out[i], addrs[i] = view(ctx, addr, c, s.master)
		}(i, addr, c)
		i++
	}
	wg.Wait()
	var found []string
	for _, a := range addrs {
		found = append(found, a...)
	}
	return out, found
}

// view asks one Sentinel for its ID, its view of master and the other
// Sentinels it knows, in one round trip.
func view(ctx context.Context, addr string, c *redis.Client, master string) (SentinelView, []string) {
	v := SentinelView{Sentinel: addr}
	pipe := c.Pipeline()
	myID := pipe.Do(ctx, "SENTINEL", "MYID")
	m := pipe.Do(ctx, "SENTINEL", "MASTER", master)
	others := pipe.Do(ctx, "SENTINEL", "SENTINELS", master)
	if _, err := pipe.Exec(ctx); err != nil {
		v.Err = fmt.Errorf("SENTINEL MYID, MASTER %s, SENTINELS %s: %w", master, master, err)
		return v, nil
	}
	fields := toMap(m.Val())
	ms := func(k string) time.Duration {
		n, _ := strconv.ParseInt(fields[k], 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	n, _ := strconv.Atoi(fields["num-other-sentinels"])
	v.ID = fmt.Sprint(myID.Val())
	v.MasterAddr = net.JoinHostPort(fields["ip"], fields["port"])
	v.RunID, v.Flags, v.Known = fields["runid"], fields["flags"], n+1
	v.DownAfter = ms("down-after-milliseconds")
	v.Replicas, _ = strconv.Atoi(fields["num-slaves"])
	v.Age = max(ms("last-ping-sent"), ms("last-ok-ping-reply"))
	var addrs []string
	list, _ := others.Val().([]any)
	for _, o := range list {
		om := toMap(o)
		v.Others = append(v.Others, om["runid"])
		if om["ip"] != "" && om["port"] != "" {
			addrs = append(addrs, net.JoinHostPort(om["ip"], om["port"]))
		}
	}
	return v, addrs
}

func toMap(v any) map[string]string {
	out := map[string]string{}
	switch x := v.(type) {
	case map[any]any:
		for k, val := range x {
			out[fmt.Sprint(k)] = fmt.Sprint(val)
		}
	case map[string]string:
		return x
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			out[fmt.Sprint(x[i])] = fmt.Sprint(x[i+1])
		}
	}
	return out
}

// Close closes the connections to the Sentinels.
func (s *SentinelSet) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, c := range s.clients {
		_ = c.Close()
		delete(s.clients, a)
	}
	return nil
}
