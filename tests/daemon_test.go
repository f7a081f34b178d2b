package tests

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/testcert"
)

// End-to-end tests of the built daemon over real TCP with real clients.

func goRedis(t *testing.T, d *Daemon, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), Password: password, MaxRetries: -1,
		ReadTimeout: 5 * time.Second, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func redisCLI(t *testing.T, d *Daemon, args ...string) string {
	t.Helper()
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(d.Port)}, args...)
	out, err := exec.Command("redis-cli", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// rawConn sends lines over a plain socket, as nc does, and reads replies.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, d *Daemon) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", d.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

func (r *rawConn) send(t *testing.T, s string) {
	t.Helper()
	r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// line reads one reply line ("" and an error when the server closed).
func (r *rawConn) line() (string, error) {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	s, err := r.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

func TestDaemon_RedisCLI_GoRedis_RawSocket(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL())[0]
	var ids []uint64
	for range 3 {
		v, err := strconv.ParseUint(redisCLI(t, d, "NEXTID"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v)
	}
	parsed := redisCLI(t, d, "PARSE", strconv.FormatUint(ids[0], 10))
	if !strings.Contains(parsed, "flake") {
		t.Fatalf("redis-cli PARSE: %q", parsed)
	}
	c := goRedis(t, d, "")
	v, err := c.Do(ctxT(t), "NEXTID").Uint64()
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, v)
	raw := dialRaw(t, d)
	raw.send(t, "NEXTID\r\nNEXTIDS 2\r\nPING\r\n")
	want := []string{":", "*2", ":", ":", "+PONG"}
	for _, w := range want {
		l, err := raw.line()
		if err != nil || !strings.HasPrefix(l, w) {
			t.Fatalf("inline reply %q, %v; want %q...", l, err, w)
		}
		if w == ":" {
			n, _ := strconv.ParseUint(l[1:], 10, 64)
			ids = append(ids, n)
		}
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatalf("IDs from redis-cli, go-redis and a raw socket are not strictly increasing: %v", ids)
	}
}

func TestDaemon_Pipeline10000_StrictlyIncreasing(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL())[0]
	c := goRedis(t, d, "")
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 10_000)
	for i := range cmds {
		cmds[i] = pipe.Do(ctxT(t), "NEXTID")
	}
	if _, err := pipe.Exec(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var prev uint64
	for i, cmd := range cmds {
		v, err := cmd.Uint64()
		if err != nil || v <= prev {
			t.Fatalf("pipelined reply %d: %d, %v (previous %d)", i, v, err, prev)
		}
		prev = v
	}
}

func TestDaemon_ThreeDaemons_300kIDs_DistinctMachineIDs(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL(), "--machine-ids", "2")
	seen := map[string]string{}
	for _, d := range ds {
		info, err := d.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range strings.Split(info["machine_ids"], ",") {
			if o, ok := seen[m]; ok {
				t.Fatalf("machine ID %s held by %s and %s", m, o, d.Name)
			}
			seen[m] = d.Name
		}
	}
	load := StartLoad(ds, 4, 100)
	load.WaitFor(t, 300_000, time.Minute, "300,000 IDs from three daemons")
	load.Stop()
	if n := load.Check(t, defaultLayout()); n < 300_000 {
		t.Fatalf("%d IDs checked", n)
	}
}

func TestDaemon_RequirePass(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL(), "--requirepass", "s3cret")[0]
	if _, err := goRedis(t, d, "").Do(ctxT(t), "NEXTID").Result(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("NEXTID without AUTH: %v, want NOAUTH", err)
	}
	if _, err := goRedis(t, d, "wrong").Do(ctxT(t), "NEXTID").Result(); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if _, err := goRedis(t, d, "s3cret").Do(ctxT(t), "NEXTID").Uint64(); err != nil {
		t.Fatalf("NEXTID with the password: %v", err)
	}
	if out := redisCLI(t, d, "--no-auth-warning", "-a", "s3cret", "NEXTID"); !regexpDigits(out) {
		t.Fatalf("redis-cli -a: %q", out)
	}
}

func regexpDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// Every limit with bad input: an error reply (and, for protocol abuse, the
// connection closed), while another client goes on being served.
func TestDaemon_BadInput_ErrorsAndKeepsServing(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL(), "--max-batch", "10000")[0]
	good := goRedis(t, d, "")
	cases := []struct {
		name   string
		send   string
		want   string
		closed bool
	}{
		{"huge bulk length", "*1\r\n$999999999999\r\n", "-ERR", true},
		{"1M args", "*1000000\r\n", "-ERR", true},
		{"negative multibulk", "*-5x\r\n", "-ERR", true},
		{"endless line", strings.Repeat("A", 200<<10), "-ERR", true},
		{"NEXTIDS 0", "NEXTIDS 0\r\n", "-ERR", false},
		{"NEXTIDS -1", "NEXTIDS -1\r\n", "-ERR", false},
		{"NEXTIDS 10^9", "NEXTIDS 1000000000\r\n", "-ERR", false},
		{"NEXTIDS text", "NEXTIDS ten\r\n", "-ERR", false},
		{"PARSE garbage", "PARSE !!!\r\n", "-ERR", false},
		{"unknown command", "FLUSHALL\r\n", "-ERR", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := dialRaw(t, d)
			raw.send(t, c.send)
			l, err := raw.line()
			if err != nil || !strings.HasPrefix(l, c.want) {
				t.Fatalf("reply %q, %v; want %s...", l, err, c.want)
			}
			if c.closed {
				if _, err := raw.line(); err == nil {
					t.Fatal("the connection stays open after protocol abuse")
				}
			} else {
				raw.send(t, "PING\r\n")
				if l, err := raw.line(); l != "+PONG" {
					t.Fatalf("after an error reply the connection does not serve: %q, %v", l, err)
				}
			}
			if _, err := good.Do(ctxT(t), "NEXTID").Uint64(); err != nil {
				t.Fatalf("another client is not served after %s: %v", c.name, err)
			}
		})
	}
}

// SIGTERM, then a restart: the same machine ID at once, and IDs above all
// issued before.
func TestDaemon_SIGTERM_RestartReusesMachineID(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL())[0]
	c := goRedis(t, d, "")
	var last uint64
	for range 5000 {
		v, err := c.Do(ctxT(t), "NEXTID").Uint64()
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	before, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Term(); err != nil {
		t.Fatalf("SIGTERM: exit %v\n%s", err, d.Log())
	}
	if !strings.Contains(d.Log(), "stopped cleanly") {
		t.Fatalf("no clean stop in the log:\n%s", d.Log())
	}
	began := time.Now()
	d.MustStart()
	first, err := goRedis(t, d, "").Do(ctxT(t), "NEXTID").Uint64()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	after, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if after["machine_ids"] != before["machine_ids"] {
		t.Fatalf("restart took machine ID %s, had %s", after["machine_ids"], before["machine_ids"])
	}
	if first <= last {
		t.Fatalf("first ID after the restart %d is not above the last before %d", first, last)
	}
	if took > 2*time.Second {
		t.Fatalf("restart to first ID took %v", took)
	}
}

// A second signal exits at once, even while the graceful stop waits (here
// on a Redis that does not answer, to release the lease).
func TestDaemon_SecondSignal_ExitsAtOnce(t *testing.T) {
	srv := redisServer(t, false)
	d := fleet(t, 1, srv.URL())[0]
	srv.Pause()
	defer srv.Resume()
	d.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond) // the graceful stop is now waiting on Redis
	began := time.Now()
	d.Signal(syscall.SIGTERM)
	d.mu.Lock()
	exit := d.exit
	d.mu.Unlock()
	select {
	case err := <-exit:
		if took := time.Since(began); took > time.Second {
			t.Fatalf("exited %v after the second signal", took)
		}
		if exitCode(err) == 0 {
			t.Fatalf("exit status 0 after a second signal (%v); want a non-zero status", err)
		}
		d.mu.Lock()
		d.cmd = nil
		d.down.Store(true)
		d.mu.Unlock()
	case <-time.After(3 * time.Second):
		t.Fatalf("still running 3s after the second signal\n%s", d.Log())
	}
}

// --tls-cert / --tls-key: the listener speaks TLS (rediss://); a plain
// client is refused.
func TestDaemon_TLS(t *testing.T) {
	cert := testcert.SelfSigned(t)
	certFile, keyFile := testcert.WritePEM(t, cert, t.TempDir())
	d := NewDaemon(t, "tls", "", "--tls-cert", certFile, "--tls-key", keyFile)
	d.Args = d.Args[2:] // standalone: drop --redis ""
	d.MustStart()
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
		MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	if _, err := c.Do(ctxT(t), "NEXTID").Uint64(); err != nil {
		t.Fatalf("NEXTID over TLS: %v\n%s", err, d.Log())
	}
	plain := goRedis(t, d, "")
	if _, err := plain.Do(ctxT(t), "NEXTID").Result(); err == nil {
		t.Fatal("a plain-text client was served by the TLS listener")
	}
}
