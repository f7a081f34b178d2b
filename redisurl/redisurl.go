// Package redisurl makes a go-redis client from one URL, the form every
// flaked command and the library's examples take Redis in: standalone,
// Sentinel or Cluster, with or without TLS, and timeouts short enough for
// a node to notice a Redis that does not answer while it still has
// reserved ticks.
package redisurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewClient returns a go-redis client for one URL:
//
//	redis://[user:pass@]host:port[/db]            standalone
//	rediss://[user:pass@]host:port[/db]           standalone over TLS
//	redis-sentinel://[user:pass@]host:port[,host:port...]/master[?db=N&sentinel_password=..]
//	redis-cluster://[user:pass@]host:port[,host:port...]
//
// (rediss-sentinel:// and rediss-cluster:// for TLS). The sentinel and
// cluster forms are rewritten into go-redis's own URL forms and parsed by
// go-redis (ParseFailoverURL, ParseClusterURL); query options those accept
// pass through.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("redis URL %q: want redis://, rediss://, redis-sentinel:// or redis-cluster://", rawURL)
	}
	switch scheme {
	case "redis", "rediss":
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", rawURL, err)
		}
		q := url.Values{}
		if u, err := url.Parse(rawURL); err == nil {
			q = u.Query()
		}
		timeoutDefaults(q, &opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout)
		opt.DisableIdentity = noIdentity
		return redis.NewClient(opt), nil
	case "redis-sentinel", "rediss-sentinel":
		opt, err := failoverOptions(scheme, rest)
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", rawURL, err)
		}
		return redis.NewFailoverClient(opt), nil
	case "redis-cluster", "rediss-cluster":
		u, hosts, err := splitHosts(strings.TrimSuffix(scheme, "-cluster"), rest)
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", rawURL, err)
		}
		q := u.Query()
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		u.RawQuery = q.Encode()
		u.Path = ""
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", rawURL, err)
		}
		timeoutDefaults(q, &opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout)
		opt.DisableIdentity = noIdentity
		return redis.NewClusterClient(opt), nil
	}
	return nil, fmt.Errorf("redis URL %q: unknown scheme %q: want redis, rediss, redis-sentinel or redis-cluster", rawURL, scheme)
}

// noIdentity: clients made here send no CLIENT SETINFO on connecting, so
// the Redis ACL of flaked's users (deploy/redis/acl.conf) needs no CLIENT
// permission; go-redis would ignore the refusal, but Redis 7.2+ would log
// one in ACL LOG for every connection, burying real denials.
const noIdentity = true

// DefaultTimeout is the dial, read and write timeout of clients made by
// NewClient unless the URL sets them (dial_timeout, read_timeout,
// write_timeout): go-redis's own defaults (5 s dial, 3 s read) would hold
// each call to a Redis that stopped answering for seconds, longer than a
// request waits for an ID (--id-wait) and a large part of the lease's
// renewal period (TTL/3), so a node would learn of it late; with 1 s it
// knows within a second and retries within the period, auto mode can fall
// back and /readyz can say so in time.
const DefaultTimeout = time.Second

func timeoutDefaults(q url.Values, dial, read, write *time.Duration) {
	for _, d := range []struct {
		key string
		v   *time.Duration
	}{{"dial_timeout", dial}, {"read_timeout", read}, {"write_timeout", write}} {
		if !q.Has(d.key) {
			*d.v = DefaultTimeout
		}
	}
}

// SentinelOptions returns go-redis's failover options for a
// redis-sentinel:// or rediss-sentinel:// URL (the Sentinels' addresses,
// the master's name, the Sentinels' credentials and TLS), or nil and no
// error for any other URL.
func SentinelOptions(rawURL string) (*redis.FailoverOptions, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !strings.HasSuffix(scheme, "-sentinel") {
		return nil, nil
	}
	opt, err := failoverOptions(scheme, rest)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", rawURL, err)
	}
	return opt, nil
}

// failoverOptions parses the part of a redis-sentinel:// URL after its
// scheme into go-redis's failover options.
func failoverOptions(scheme, rest string) (*redis.FailoverOptions, error) {
	u, hosts, err := splitHosts(strings.TrimSuffix(scheme, "-sentinel"), rest)
	if err != nil {
		return nil, err
	}
	master := strings.Trim(u.Path, "/")
	if master == "" {
		return nil, errors.New("want redis-sentinel://host:port[,host:port]/<master name>")
	}
	q := u.Query()
	q.Set("master_name", master)
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	db := q.Get("db")
	q.Del("db")
	u.Path = "/" + db
	u.RawQuery = q.Encode()
	opt, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, err
	}
	timeoutDefaults(q, &opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout)
	opt.DisableIdentity = noIdentity
	return opt, nil
}

// splitHosts parses "[userinfo@]h1:p1,h2:p2/path?query" into a URL of the
// first host plus the list of all hosts.
func splitHosts(scheme, rest string) (*url.URL, []string, error) {
	userinfo := ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo, rest = rest[:at+1], rest[at+1:]
	}
	hostPart, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hostPart, tail = rest[:i], rest[i:]
	}
	hosts := strings.Split(hostPart, ",")
	for _, h := range hosts {
		if h == "" || !strings.Contains(h, ":") {
			return nil, nil, fmt.Errorf("host %q: want host:port", h)
		}
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		return nil, nil, err
	}
	return u, hosts, nil
}
