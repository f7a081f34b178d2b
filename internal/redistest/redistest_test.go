package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/idtest"
)

func TestStandalone(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{Password: "s3cret"})
	ctx := idtest.Context(t, 10*time.Second)
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}

	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	if opt.Addr != s.Addr() || opt.Password != "s3cret" {
		t.Fatalf("ParseURL(%q) = addr %s password %q", s.URL(), opt.Addr, opt.Password)
	}
	viaURL := redis.NewClient(opt)
	defer viaURL.Close()
	if got, err := viaURL.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET via URL = %q, %v", got, err)
	}

	s.Flush(t)
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Flush: %v, want redis.Nil", err)
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprintf("aof=%v", aof), func(t *testing.T) {
			t.Parallel()
			s := Start(t, Options{AOF: aof})
			port := s.Port()
			ctx := idtest.Context(t, 20*time.Second)
			c := s.Client(t)
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			s.Kill()
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("PING succeeded on a killed server")
			}
			s.Restart(t)
			if s.Port() != port {
				t.Fatalf("port changed on restart: %d -> %d", port, s.Port())
			}
			got, err := c.Get(ctx, "k").Result()
			switch {
			case aof && (err != nil || got != "v"):
				t.Fatalf("with AOF: GET after restart = %q, %v; want v", got, err)
			case !aof && !errors.Is(err, redis.Nil):
				t.Fatalf("without AOF: GET after restart = %q, %v; want redis.Nil", got, err)
			}

			// A clean Stop and a second Restart work too.
			s.Stop()
			s.Restart(t)
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING after Stop+Restart: %v", err)
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	opt := &redis.Options{Addr: s.Addr(), DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := idtest.Context(t, 10*time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	s.Pause()
	start := time.Now()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded on a paused server")
	} else {
		t.Logf("PING while paused failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}

	s.Resume()
	if err := poll(5*time.Second, func(ctx context.Context) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestPausedServerIsCleanedUp(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{AOF: true})
	s.Pause()
	s.Stop() // SIGTERM to a stopped process: must still exit, within bounds
	s.Restart(t)
	s.Pause() // left paused: the cleanup must still kill it
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	if p := FreePort(t); p <= 0 || p > 65535 {
		t.Fatalf("FreePort = %d", p)
	}
	if ps := freePorts(t, 4); len(ps) != 4 || ps[0] == ps[1] || ps[2] == ps[3] {
		t.Fatalf("freePorts = %v", ps)
	}
	// An address nothing listens on, and free to listen on.
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on FreeAddr %s: %v", addr, err)
	}
	l.Close()
}

func TestCluster(t *testing.T) {
	t.Parallel()
	cl := StartCluster(t, 3)
	if len(cl.Servers()) != 3 || len(cl.Addrs()) != 3 {
		t.Fatalf("servers %d, addrs %v", len(cl.Servers()), cl.Addrs())
	}
	ctx := idtest.Context(t, 20*time.Second)
	c := cl.Client(t)

	// Keys in different slots, and so (with 3 masters) on different nodes.
	for i := range 30 {
		k := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	nodes := 0
	for _, s := range cl.Servers() {
		n, err := s.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			nodes++
		}
	}
	if nodes != 3 {
		t.Fatalf("30 keys landed on %d of 3 nodes", nodes)
	}

	// A script over hash-tagged keys in one slot.
	script := `redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])`
	for want := int64(1); want <= 2; want++ {
		got, err := c.Eval(ctx, script, []string{"{gen}:last", "{gen}:seq"}, "x").Int64()
		if err != nil || got != want {
			t.Fatalf("EVAL = %d, %v; want %d", got, err, want)
		}
	}

	// The URL parses back to the same addresses.
	opt, err := redis.ParseClusterURL(cl.URL())
	if err != nil {
		t.Fatalf("ParseClusterURL(%q): %v", cl.URL(), err)
	}
	if fmt.Sprint(opt.Addrs) != fmt.Sprint(cl.Addrs()) {
		t.Fatalf("ParseClusterURL(%q).Addrs = %v, want %v", cl.URL(), opt.Addrs, cl.Addrs())
	}
	viaURL := redis.NewClusterClient(opt)
	defer viaURL.Close()
	if got, err := viaURL.Get(ctx, "key-7").Result(); err != nil || got != "7" {
		t.Fatalf("GET via URL = %q, %v", got, err)
	}
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	sn := StartSentinel(t)
	ctx := idtest.Context(t, 40*time.Second)

	opt, err := redis.ParseFailoverURL(sn.URL())
	if err != nil {
		t.Fatalf("ParseFailoverURL(%q): %v", sn.URL(), err)
	}
	if opt.MasterName != sn.MasterName() || fmt.Sprint(opt.SentinelAddrs) != fmt.Sprint(sn.SentinelAddrs()) {
		t.Fatalf("ParseFailoverURL(%q) = master %q sentinels %v", sn.URL(), opt.MasterName, opt.SentinelAddrs)
	}

	oldMaster, oldReplica := sn.Master(), sn.Replica()
	c := sn.Client(t)
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET before failover: %v", err)
	}

	start := time.Now()
	sn.Failover(t)
	t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))

	newMaster := sn.Master()
	if newMaster != oldReplica || sn.Replica() != oldMaster {
		t.Fatalf("after Failover master is %s, want former replica %s", newMaster.Addr(), oldReplica.Addr())
	}
	nc := newMaster.Client(t)
	if role, err := Role(ctx, nc); err != nil || role != "master" {
		t.Fatalf("ROLE of new master = %q, %v", role, err)
	}
	if got, err := nc.Get(ctx, "before").Result(); err != nil || got != "1" {
		t.Fatalf("GET before on new master = %q, %v (replication lost it)%s", got, err, logs(oldMaster, oldReplica, sn.sentinel))
	}

	// The failover client follows the switch. Right after it, a pooled
	// connection may still point at the old master (which keeps accepting
	// writes until the sentinel demotes it), so write until a write lands.
	err = poll(10*time.Second, func(ctx context.Context) error {
		if err := c.Set(ctx, "after", "2", 0).Err(); err != nil {
			return err
		}
		if got, err := nc.Get(ctx, "after").Result(); err != nil || got != "2" {
			return fmt.Errorf("write via failover client not on new master: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSentinelKillMaster(t *testing.T) {
	t.Parallel()
	sn := StartSentinel(t)
	ctx := idtest.Context(t, 40*time.Second)
	oldReplica := sn.Replica()
	c := sn.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	start := time.Now()
	sn.KillMaster(t)
	t.Logf("promotion after kill took %v", time.Since(start).Round(time.Millisecond))
	if sn.Master() != oldReplica {
		t.Fatalf("master is %s, want %s", sn.Master().Addr(), oldReplica.Addr())
	}
	err := poll(10*time.Second, func(ctx context.Context) error {
		return c.Set(ctx, "k2", "v2", 0).Err()
	})
	if err != nil {
		t.Fatalf("write after KillMaster: %v", err)
	}
	if got, err := oldReplica.Client(t).Get(ctx, "k2").Result(); err != nil || got != "v2" {
		t.Fatalf("GET k2 on new master = %q, %v", got, err)
	}
}

// fakeTB records Fatalf/Skip instead of ending the real test.
type fakeTB struct {
	*testing.T
	fatal, skip string
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Skip(args ...any) {
	f.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeTB in its own goroutine, as Fatalf ends it.
func run(t *testing.T, fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestRequire(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if testing.Short() {
		// -short is asked for: it skips even under CI=true.
		t.Setenv("CI", "true")
		f := run(t, func(tb testing.TB) { Require(tb) })
		if f.fatal != "" || !strings.Contains(f.skip, "-short: needs redis-server") {
			t.Fatalf("-short with CI=true: skip %q, fatal %q; want a skip", f.skip, f.fatal)
		}
		return
	}
	t.Setenv("CI", "")
	f := run(t, func(tb testing.TB) { Require(tb) })
	if f.fatal != "" || !strings.Contains(f.skip, "apt-get install -y redis-server redis-sentinel redis-tools") {
		t.Fatalf("without CI: skip %q, fatal %q; want a skip with the install hint", f.skip, f.fatal)
	}
	t.Setenv("CI", "true")
	f = run(t, func(tb testing.TB) { Require(tb, "redis-sentinel") })
	if f.skip != "" || !strings.Contains(f.fatal, "redis-sentinel not found") {
		t.Fatalf("with CI=true: skip %q, fatal %q; want a failure", f.skip, f.fatal)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	Require(t)
	t.Parallel()
	f := run(t, func(tb testing.TB) { Start(tb, Options{Args: []string{"no-such-directive yes"}}) })
	if !strings.Contains(f.fatal, "did not come up") || !strings.Contains(f.fatal, "no-such-directive") {
		t.Fatalf("Fatalf message does not show the log:\n%s", f.fatal)
	}
	t.Logf("failure message:\n%s", f.fatal)
}
