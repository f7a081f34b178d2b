package redisurl

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every URL form makes the client it names, with 1 s timeouts unless the
// URL sets them: a Redis that does not answer must be noticed while a node
// still has reserved ticks.
func TestNewClient_URLForms(t *testing.T) {
	for _, tc := range []struct {
		url, want string
	}{
		{"redis://127.0.0.1:6379/0", "*redis.Client"},
		{"rediss://u:p@127.0.0.1:6380", "*redis.Client"},
		{"redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster?db=1", "*redis.Client"},
		{"redis-cluster://127.0.0.1:7000,127.0.0.1:7001", "*redis.ClusterClient"},
	} {
		c, err := NewClient(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if got := typeName(c); got != tc.want {
			t.Fatalf("%s: %s, want %s", tc.url, got, tc.want)
		}
		c.Close()
	}
	// Timeouts default to 1 s (shorter than a reservation lasts) unless the
	// URL sets them.
	for _, tc := range []struct {
		url        string
		dial, read time.Duration
	}{
		{"redis://127.0.0.1:6379/0", time.Second, time.Second},
		{"redis://127.0.0.1:6379/0?read_timeout=5s&dial_timeout=2s", 2 * time.Second, 5 * time.Second},
		{"redis-sentinel://127.0.0.1:26379/mymaster?read_timeout=4s", time.Second, 4 * time.Second},
	} {
		c, err := NewClient(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		o := c.(*redis.Client).Options()
		if o.DialTimeout != tc.dial || o.ReadTimeout != tc.read || o.WriteTimeout != time.Second {
			t.Errorf("%s: dial %v read %v write %v, want %v %v 1s", tc.url, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, tc.dial, tc.read)
		}
		c.Close()
	}
	cc, err := NewClient("redis-cluster://127.0.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	if o := cc.(*redis.ClusterClient).Options(); o.ReadTimeout != time.Second || o.DialTimeout != time.Second {
		t.Errorf("cluster: dial %v read %v, want 1s", o.DialTimeout, o.ReadTimeout)
	}
	cc.Close()
	for _, bad := range []string{"localhost:6379", "http://x:1", "redis-sentinel://127.0.0.1:1", "redis-cluster://nohost"} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func typeName(c redis.UniversalClient) string {
	switch c.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "?"
}
