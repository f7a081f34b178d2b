package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// confLines are the directives of a Redis config file (comments and blank
// lines dropped).
func confLines(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// No deploy file relies on min-replicas-to-write / min-replicas-max-lag for
// a split brain: they do not make it safe (docs/guarantees.md, "Split brain"); the
// wait after each grant does, and needs the node user's +wait.
func TestRedis_NoMinReplicas_NodeMayWait(t *testing.T) {
	files := []string{"../docker-compose.yml"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".go") && !strings.HasPrefix(p, "go.") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for i, line := range strings.Split(string(readFile(t, f)), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if strings.Contains(code, "min-replicas") {
				t.Errorf("%s:%d sets %q: min-replicas-* is not the split-brain protection", f, i+1, strings.TrimSpace(code))
			}
		}
	}
	node := ""
	for _, l := range confLines(t, "redis/acl.conf") {
		if strings.HasPrefix(l, "user flaked-node ") {
			node = l
		}
	}
	if !strings.Contains(node+" ", " +wait ") {
		t.Errorf("redis/acl.conf: the node user may not WAIT: %q", node)
	}
}

// The shipped redis.conf (master and replica) and sentinel.conf, run: a
// master, a replica and a sentinel on loopback, and the built daemon on the
// sentinel URL. Its grants are vouched for by the Sentinel or acknowledged
// by the replica (the fleet's replicas high-water mark is 1); after a
// Sentinel failover it issues on, from the promoted replica, with no
// duplicate among the IDs.
func TestRedis_ShippedConfs_SentinelFailover(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	conf := confLines(t, "redis/redis.conf")
	master := redistest.Start(t, redistest.Options{Args: conf})
	replica := redistest.Start(t, redistest.Options{Args: append(conf, "replicaof 127.0.0.1 "+strconv.Itoa(master.Port()))})
	waitOnline(t, master.Client(t), 1)

	sentAddr := redistest.FreeAddr(t)
	var sconf []string
	for _, l := range confLines(t, "redis/sentinel.conf") {
		f := strings.Fields(l)
		switch {
		case f[0] == "port":
			l = "port " + port(t, sentAddr)
		case len(f) > 3 && f[1] == "monitor":
			l = fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", f[2], master.Port()) // one sentinel here
		case len(f) > 3 && f[1] == "down-after-milliseconds":
			l = "sentinel down-after-milliseconds " + f[2] + " 1000"
		}
		sconf = append(sconf, l)
	}
	startSentinel(t, sentAddr, sconf)

	// The fleet's registry first, through Sentinel as the nodes reach Redis.
	if out, err := exec.Command(flakedBin, "init", "--redis", "redis-sentinel://"+sentAddr+"/flaked").CombinedOutput(); err != nil {
		t.Fatalf("flaked init through Sentinel: %v\n%s", err, out)
	}
	listen := redistest.FreeAddr(t)
	d := exec.Command(flakedBin, "serve", "--redis", "redis-sentinel://"+sentAddr+"/flaked", "--listen", listen,
		"--metrics-addr", redistest.FreeAddr(t), "--no-state-file", "--mode", "flake")
	var stderr bytes.Buffer
	d.Stderr = &stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(d.Process.Pid, syscall.SIGKILL)
		_ = d.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: listen, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	seen := map[int64]bool{}
	take := func(n int, within time.Duration, what string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for got := 0; got < n; {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ids, err := c.Do(ctx, "NEXTIDS", 100).Int64Slice()
			cancel()
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d of %d IDs: %v\n%s", what, got, n, err, stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for _, id := range ids {
				if seen[id] {
					t.Fatalf("%s: duplicate ID %d", what, id)
				}
				seen[id] = true
			}
			got += len(ids)
		}
	}
	take(20_000, 30*time.Second, "before the failover")
	m, err := coord.SplitBrainCheck(context.Background(), master.Client(t), "")
	if err != nil || m.Mark != 1 || m.Problem() != "" {
		t.Fatalf("the master after grants: %+v %q, %v; want mark 1, no problem", m, m.Problem(), err)
	}
	// Each grant is safe by the Sentinels' vouch (every Sentinel names the
	// master, up) or by the replica's acknowledgement (a WAIT the master
	// ran): the daemon's INFO says which held for its last lease grant.
	info, err := c.Do(context.Background(), "INFO", "flaked").Text()
	if err != nil {
		t.Fatal(err)
	}
	safeBy := ""
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "lease_grant_safe_by:"); ok {
			safeBy = v
		}
	}
	t.Logf("the last lease grant was safe by the %s", safeBy)
	switch safeBy {
	case "sentinels":
	case "replicas":
		if n := commandCalls(t, master.Client(t), "wait"); n == 0 {
			t.Fatal("grants safe by the replicas, but the master ran no WAIT")
		}
	default:
		t.Fatalf("the daemon's last lease grant: safe by %q, want sentinels or replicas\n%s", safeBy, info)
	}

	sc := redis.NewSentinelClient(&redis.Options{Addr: sentAddr})
	defer sc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := sc.Failover(context.Background(), "flaked").Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		addr, err := sc.GetMasterAddrByName(context.Background(), "flaked").Result()
		if err == nil && net.JoinHostPort(addr[0], addr[1]) == replica.Addr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica was not promoted: %v %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	take(20_000, time.Minute, "after the failover")
	t.Logf("%d IDs, no duplicate", len(seen))
}

// startSentinel runs redis-sentinel with lines as its config (it rewrites
// the file) until the test ends.
func startSentinel(t *testing.T, addr string, lines []string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sentinel.conf")
	lines = append([]string{"bind 127.0.0.1", "dir " + strconv.Quote(dir), "logfile " + strconv.Quote(filepath.Join(dir, "sentinel.log"))}, lines...)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-sentinel", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := c.Replicas(context.Background(), "flaked").Result()
		if err == nil && len(r) == 1 && r[0]["master-link-status"] == "ok" {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
			t.Fatalf("sentinel does not see the replica: %v %v\n%s", r, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitOnline waits until the master lists n online replicas.
func waitOnline(t *testing.T, rdb redis.UniversalClient, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := coord.SplitBrainCheck(context.Background(), rdb, "")
		if err == nil && m.Online == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d replicas not online: %+v %v", n, m, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commandCalls is how many times the server ran cmd (INFO commandstats).
func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(v[:strings.IndexByte(v, ',')])
			return n
		}
	}
	return 0
}
