package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// Faults of the deployment, each refused before a node starts: the nodes'
// user may read INFO replication only (guard.lua's INFO server replication
// memory is refused), INFO renamed away or to another name, and
// maxmemory-policy allkeys-lru. serve exits 1 naming the check and the
// fix; flaked doctor exits 1 naming it too, and 0 on a healthy server.
func TestRedisUnsafe_RefusedAtStart_DoctorNamesIt(t *testing.T) {
	redistest.Require(t)
	healthy := redistest.Start(t, redistest.Options{})
	if code, out := flakedCmd(t, "doctor", "--redis", healthy.URL()); code != 0 || strings.Contains(out, "unsafe") {
		t.Fatalf("doctor on a healthy redis-server: exit %d\n%s", code, out)
	}
	err := healthy.Client(t).Do(ctxT(t), "ACL", "SETUSER", "narrow", "on", ">pw", "~{flaked}:*", "-@all", "+eval", "+evalsha",
		"+get", "+set", "+del", "+exists", "+pexpire", "+hget", "+hmget", "+hset", "+hdel", "+sadd", "+srem",
		"+srandmember", "+xadd", "+time", "+info|replication").Err()
	if err != nil {
		t.Fatal(err)
	}
	narrowURL := (&url.URL{Scheme: "redis", Host: healthy.Addr(), User: url.UserPassword("narrow", "pw")}).String()
	renamed := redistest.Start(t, redistest.Options{Args: []string{`rename-command INFO ""`}})
	renamedTo := redistest.Start(t, redistest.Options{Args: []string{"rename-command INFO hidden-info"}})
	allkeys := redistest.Start(t, redistest.Options{Args: []string{"maxmemory 64mb", "maxmemory-policy allkeys-lru"}})
	for _, c := range []struct {
		name, url string
		words     []string
	}{
		{"INFO replication only", narrowURL, []string{"identity", "+info"}},
		{"INFO renamed away", renamed.URL(), []string{"identity", "rename-command INFO"}},
		{"INFO renamed", renamedTo.URL(), []string{"identity", "rename-command INFO"}},
		{"allkeys-lru", allkeys.URL(), []string{"eviction", "allkeys-lru", "noeviction"}},
	} {
		code, out := runServe(t, redistest.FreePort(t), "--redis", c.url, "--no-state-file")
		if code != 1 || !containsAll(out, c.words) {
			t.Errorf("serve, %s: exit %d\n%s\nwant 1 naming %q", c.name, code, out, c.words)
		}
		code, out = flakedCmd(t, "doctor", "--redis", c.url)
		if code != 1 || !containsAll(out, append(c.words, "unsafe")) {
			t.Errorf("doctor, %s: exit %d\n%s\nwant 1 naming %q", c.name, code, out, c.words)
		}
	}
	// The opt-in runs where INFO is renamed, saying what it loses.
	d := NewDaemon(t, "none", renamed.URL(), "--redis-identity", "none")
	d.InitRegistry()
	d.MustStart()
	d.WaitReady(t, 20*time.Second)
	if !strings.Contains(d.Log(), "redis-identity=none") {
		t.Errorf("no warning of what --redis-identity=none loses:\n%s", d.Log())
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// unsafeMetric reads flaked_redis_unsafe{check} from d's /metrics.
func unsafeMetric(d *Daemon, check string) (string, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", d.Metrics))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	prefix := `flaked_redis_unsafe{check="` + check + `"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s in /metrics", prefix)
}

func waitMetric(t *testing.T, ds []*Daemon, check, want string) {
	t.Helper()
	poll.UntilNil(t, 10*time.Second, fmt.Sprintf("flaked_redis_unsafe{check=%q} = %s on every daemon", check, want), func() error {
		for _, d := range ds {
			if v, err := unsafeMetric(d, check); err != nil || v != want {
				return fmt.Errorf("%s: flaked_redis_unsafe{check=%q} = %q (%v), want %s", d.Name, check, v, err, want)
			}
		}
		return nil
	})
}

// grants are what the fleet's scripts wrote that grant IDs: the
// reservations and the counter.
func grants(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	res, err := rdb.HGetAll(ctxT(t), "{flaked}:reserved").Result()
	if err != nil {
		t.Fatal(err)
	}
	ctr, _ := rdb.HGetAll(ctxT(t), "{flaked}:counter").Result()
	return fmt.Sprint(res, " counter ", ctr)
}

// Fault: a cache moves into the fleet's running Redis, CONFIG SET
// maxmemory-policy allkeys-lru. Every writing script refuses from its next
// call: no reservation is raised and no counter segment handed out while
// it lasts (the nodes issue what they already hold), each node says so
// within its watch interval (error log, flaked_redis_unsafe{check=
// "eviction"} 1, INFO redis_unsafe:eviction), and set back, granting
// resumes. Flake, counter and auto nodes; every ID checked: 0 duplicates.
func TestRedisEviction_SetLive_StopsGrantingThenResumes(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	initRegistry(t, "--redis", srv.URL())
	var ds []*Daemon
	for _, mode := range []string{"flake", "counter", "auto"} {
		d := NewDaemon(t, mode, srv.URL(), "--mode", mode, "--lease-ttl", "3s", "--redis-watch-interval", "200ms")
		d.MustStart()
		ds = append(ds, d)
	}
	for _, d := range ds {
		d.WaitReady(t, 20*time.Second)
	}
	load := StartLoad(ds, 2, 50)
	load.WaitFor(t, int64(scale(20_000)), 20*time.Second, "before")

	if err := rdb.ConfigSet(ctxT(t), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, ds, "eviction", "1")
	before := grants(t, rdb) // every script that started before the switch has ended by now
	time.Sleep(time.Second)
	if after := grants(t, rdb); after != before {
		t.Fatalf("granted under allkeys-lru:\n%s\nthen\n%s", before, after)
	}
	for _, d := range ds {
		info, err := d.Info(ctxT(t))
		if err != nil || info["redis_unsafe"] != "eviction" {
			t.Errorf("%s: INFO redis_unsafe = %q (%v), want eviction", d.Name, info["redis_unsafe"], err)
		}
		if l := d.Log(); !strings.Contains(l, `"level":"error"`) || !strings.Contains(l, "allkeys-lru") {
			t.Errorf("%s: no error log naming allkeys-lru:\n%s", d.Name, l)
		}
	}

	if err := rdb.ConfigSet(ctxT(t), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, ds, "eviction", "0")
	load.WaitFor(t, int64(scale(20_000)), 20*time.Second, "after")
	load.Stop()
	if load.Check(t, defaultLayout()) == 0 {
		t.Fatal("no IDs")
	}
}

// Fault: a Redis shared with a cache under maxmemory-policy volatile-lru,
// then volatile-random, memory full: the cache writes thousands of keys a
// second with a TTL, Redis evicts keys with a TTL, the leases among them
// (volatile-random evicts them often). An evicted lease reads as an
// expired one: its owner re-asserts it while nobody raised its
// reservation, or a node waiting for a machine ID takes it over above its
// reservation (and the owner, fenced, claims again). Flake, counter and
// auto nodes; every ID checked: 0 duplicates.
func TestRedisEviction_VolatileUnderCacheLoad_NoDuplicates(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"maxmemory-policy volatile-lru"}})
	rdb := srv.Client(t)
	// Three leasable machine IDs (0-2; 3 is the counter's), held by the
	// first three nodes: the last auto node runs in counter mode and keeps
	// trying to claim, so an evicted lease can be taken over.
	initRegistry(t, "--redis", srv.URL(), "--bits-machine", "2")
	var ds []*Daemon
	for _, mode := range []string{"flake", "flake", "auto", "counter", "auto"} {
		d := NewDaemon(t, mode+strconv.Itoa(len(ds)), srv.URL(), "--mode", mode, "--lease-ttl", "2s", "--bits-machine", "2")
		d.MustStart()
		if len(ds) < 3 {
			d.WaitReady(t, 20*time.Second)
		}
		ds = append(ds, d)
	}
	for _, d := range ds {
		d.WaitReady(t, 20*time.Second)
	}
	stop := fillCache(t, srv)
	load := StartLoad(ds, 2, 50)
	load.WaitFor(t, int64(scale(20_000)), 20*time.Second, "volatile-lru")
	if err := rdb.ConfigSet(ctxT(t), "maxmemory-policy", "volatile-random").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	load.WaitFor(t, int64(scale(20_000)), 20*time.Second, "volatile-random")
	written := stop()
	load.Stop()
	evicted := redisInfo(t, rdb, "stats", "evicted_keys")
	takeovers, _ := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	kinds := map[string]int{}
	for _, m := range takeovers {
		kinds[fmt.Sprint(m.Values["type"])]++
	}
	t.Logf("cache wrote %d keys, Redis evicted %s keys; fleet events %v", written, evicted, kinds)
	if n, _ := strconv.Atoi(evicted); n == 0 {
		t.Fatal("nothing evicted: the test did not fill memory")
	}
	def := defaultLayout()
	layout, err := flake.NewLayout(def.BitsSequence, 2, def.TimeUnit, def.StartTime)
	if err != nil {
		t.Fatal(err)
	}
	if load.Check(t, layout) == 0 {
		t.Fatal("no IDs")
	}
}

// flaked doctor passes (exit 0) a Sentinel deployment (a master, a
// replica, a sentinel) reached through the sentinel, and a 3-master
// Cluster.
func TestDoctor_SentinelAndCluster_ExitZero(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	sentinelURL := "redis-sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName()
	code, out := flakedCmd(t, "doctor", "--redis", sentinelURL)
	if code != 0 || !strings.Contains(out, "down-after-milliseconds") || !strings.Contains(out, "(replica)") {
		t.Errorf("doctor on Sentinel: exit %d\n%s\nwant 0, the sentinel's timings and the replica's clock", code, out)
	}
	c := redistest.StartCluster(t, 3)
	code, out = flakedCmd(t, "doctor", "--redis", "redis-cluster://"+strings.Join(c.Addrs(), ","))
	if code != 0 || strings.Count(out, "ok     identity") != 3 {
		t.Errorf("doctor on a Cluster: exit %d\n%s\nwant 0 and the identity of each of 3 masters", code, out)
	}
}
