package tests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// TestAvailability measures how long a daemon goes without handing out an
// ID through each fault of its table (BENCHMARKS.md, Availability), in
// each mode: one client asks NEXTID every 5 ms (a steady load) and every
// reply is timed. It is a
// benchmark, not a test of speed: it runs only with FLAKED_AVAIL=1
// (scripts/bench availability), prints a table, and fails only on a
// repeated ID. With FLAKED_AVAIL_BASE set to another flaked binary (the
// baseline, built from another commit) each row runs on both, baseline
// first, in the same run. The figures come from protocol constants (lease
// TTL, horizon, reservations), not from CPU speed, so they are absolute.
// FLAKED_AVAIL_WATCH (default 6s) is how long each row watches at least
// after the fault: past the grants a node held, with a long
// --reserve-ahead. FLAKED_AVAIL_FLAGS adds serve flags to the branch's runs (and
// FLAKED_AVAIL_BASE_FLAGS to the baseline's): with the same binary as
// baseline, a row compares two settings. FLAKED_AVAIL_LOG=1 prints each
// measured daemon's log.
//
//	FLAKED_AVAIL=1 FLAKED_AVAIL_BASE=/tmp/flaked-main go test -count=1 -v -timeout 60m -run TestAvailability ./tests/
func TestAvailability(t *testing.T) {
	if os.Getenv("FLAKED_AVAIL") != "1" {
		t.Skip("a benchmark: FLAKED_AVAIL=1 (scripts/bench availability)")
	}
	redistest.Require(t)
	type bin struct {
		name, path string
		flags      []string
	}
	bins := []bin{{"branch", binary, strings.Fields(os.Getenv("FLAKED_AVAIL_FLAGS"))}}
	if base := os.Getenv("FLAKED_AVAIL_BASE"); base != "" {
		bins = append([]bin{{"base", base, strings.Fields(os.Getenv("FLAKED_AVAIL_BASE_FLAGS"))}}, bins...)
	}
	modes := strings.Fields(os.Getenv("FLAKED_AVAIL_MODES"))
	if len(modes) == 0 {
		modes = []string{"flake", "auto", "counter"}
	}
	only := os.Getenv("FLAKED_AVAIL_CASES")
	type row struct {
		situation, mode string
		res             []availResult // one per binary
	}
	var rows []row
	for _, c := range availCases {
		if only != "" && !slices.Contains(strings.Split(only, ","), c.name) {
			continue
		}
		for _, mode := range modes {
			r := row{situation: c.title, mode: mode}
			for _, b := range bins {
				t.Run(c.name+"/"+mode+"/"+b.name, func(t *testing.T) {
					c := c
					c.flags = append(slices.Clone(c.flags), b.flags...)
					res := runAvailability(t, c, mode, b.path)
					t.Logf("%s %s %s: %s", c.name, mode, b.name, res)
					r.res = append(r.res, res)
				})
			}
			rows = append(rows, r)
		}
	}
	fmt.Println()
	var head []string
	for _, b := range bins {
		head = append(head, b.name)
	}
	fmt.Printf("| situation | mode | longest gap (%s) | NEXTID p99 / max (%s) | failed (%s) |\n",
		strings.Join(head, " → "), strings.Join(head, " → "), strings.Join(head, " → "))
	fmt.Println("|---|---|---:|---:|---:|")
	for _, r := range rows {
		var gap, lat, failed []string
		for _, x := range r.res {
			if x.na {
				gap, lat, failed = append(gap, "—"), append(lat, "—"), append(failed, "—")
				continue
			}
			if x.none {
				gap = append(gap, "none in "+seconds(x.gap)) // the error is in the log line
			} else {
				gap = append(gap, seconds(x.gap))
			}
			lat = append(lat, seconds(x.p99)+" / "+seconds(x.max))
			failed = append(failed, fmt.Sprint(x.failed))
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.situation, r.mode,
			strings.Join(gap, " → "), strings.Join(lat, " → "), strings.Join(failed, " → "))
	}
}

// availWatch is FLAKED_AVAIL_WATCH: how long a row watches at least after
// its fault.
var availWatch = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FLAKED_AVAIL_WATCH")); err == nil && d > 0 {
		return d
	}
	return 6 * time.Second
}()

func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.3g ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// availCase is one situation. start cases measure from a daemon's process
// start (a new fleet, a restart after kill -9); the others inject the
// fault into a daemon serving the load.
type availCase struct {
	name, title string
	aof         bool     // Redis with AOF (appendfsync always): a restart loses nothing
	proxy       bool     // the daemon reaches Redis through a fault proxy
	flags       []string // extra serve flags
	// replicated: a master with two replicas and three Sentinels
	// (startReplicaSet), the daemon reaching it through the Sentinels
	// (f.rs; f.srv is the master), its counter in use (seedCounter).
	replicated bool
	// loaded: the daemon also serves NEXTIDS 16 every millisecond from
	// two connections (about 20,000 IDs/s, most of a machine ID's 25,600)
	// from its first ID on; every ID of it is checked.
	loaded bool
	// start: the gap is from the process start of the daemon (run by
	// fault, which returns right after) to its first ID.
	start bool
	// init: how the registry is made on the fresh Redis. "" (the
	// default): as a new fleet's, no loss floor, before anything is
	// measured (initRegistry). initBefore: the binary's flaked init, before
	// the measure starts (a binary without the command has no figure for
	// the row). initTimed: the binary's flaked init inside the measured
	// gap (a binary without the command, which made its own registry at
	// the first claim, is measured from its start).
	init string
	// modes the situation applies to (nil: every mode).
	modes []string
	// fromHeal: the gap is measured from the end of the fault, not its
	// start (what the node does once it can reach Redis again), and a
	// node that gets no ID at all is a figure of the row, not an error.
	fromHeal bool
	// fault injects the fault and returns when it is over.
	fault func(t *testing.T, f *availFixture)
}

const (
	initBefore = "before"
	initTimed  = "timed"
)

type availFixture struct {
	srv   *redistest.Server
	proxy *faultproxy.Proxy
	rs    *replicaSet
	d     *Daemon
}

var availCases = []availCase{
	{name: "new-fleet", title: "a new fleet: `flaked init`, then the first ID", start: true, init: initTimed,
		fault: func(t *testing.T, f *availFixture) { mustLaunch(t, f.d) }},
	{name: "new-fleet-init", title: "a new fleet's first ID, from its start after `flaked init`", start: true, init: initBefore,
		fault: func(t *testing.T, f *availFixture) { mustLaunch(t, f.d) }},
	{name: "new-fleet-ttl60", title: "a new fleet: `flaked init`, then the first ID, `--lease-ttl 60s`", start: true,
		init: initTimed, flags: []string{"--lease-ttl", "60s"},
		fault: func(t *testing.T, f *availFixture) { mustLaunch(t, f.d) }},
	{name: "redis-empty-ttl60", title: "Redis restarted empty under load, `--lease-ttl 60s`",
		flags: []string{"--lease-ttl", "60s"},
		fault: func(t *testing.T, f *availFixture) { f.srv.Restart(t) }},
	{name: "redis-restart", title: "Redis restarted (AOF: nothing lost, Redis cannot tell)", aof: true,
		fault: func(t *testing.T, f *availFixture) { f.srv.Restart(t) }},
	{name: "node-kill", title: "the node restarted after kill -9", start: true,
		fault: func(t *testing.T, f *availFixture) {
			f.d.Kill()
			mustLaunch(t, f.d)
		}},
	{name: "redis-slow", title: "every Redis reply delayed 1.5 s for 10 s", proxy: true,
		fault: func(t *testing.T, f *availFixture) {
			f.proxy.SetDelay(1500 * time.Millisecond)
			time.Sleep(10 * time.Second)
			f.proxy.SetDelay(0)
		}},
	// The layout has one machine ID to lease (--bits-machine 1: two IDs,
	// the higher one the counter's), held by the daemon measured. A second
	// daemon, on Redis directly, waits for it; the first is cut off from
	// Redis (packets held) past its lease, so the second takes the ID over,
	// then the cut heals: the space is full and the first has none.
	{name: "full-space", title: "cut off past its lease in a full machine-ID space, then healed (from the heal)",
		proxy: true, fromHeal: true, flags: []string{"--bits-machine", "1"}, modes: []string{"flake", "auto"},
		fault: func(t *testing.T, f *availFixture) {
			rdb := f.srv.Client(t)
			lease := "{flaked}:lease:0"
			holder, err := rdb.Get(context.Background(), lease).Result()
			if err != nil {
				t.Fatalf("the measured daemon holds no lease on machine ID 0: %v", err)
			}
			// In auto mode, so it waits for the ID in counter mode (a flake
			// node finding the space full does not start).
			other := NewDaemon(t, "avail-full-space-other", f.srv.URL(), "--mode", "auto", "--bits-machine", "1")
			other.Bin = f.d.Bin
			mustLaunch(t, other)
			f.proxy.Blackhole()
			// Until the other daemon holds the lease (the default TTL is 10 s).
			poll.Until(t, 60*time.Second, "the other daemon taking machine ID 0 over", func() bool {
				h, err := rdb.Get(context.Background(), lease).Result()
				return err == nil && h != holder
			})
			f.proxy.Heal()
		}},
	{name: "redis-paused", title: "Redis paused 7 s (SIGSTOP)",
		fault: func(t *testing.T, f *availFixture) {
			f.srv.Pause()
			time.Sleep(7 * time.Second)
			f.srv.Resume()
		}},
	// Replicas: a master with two replicas and three Sentinels (quorum 2,
	// down-after 500 ms), the daemon on the Sentinels' URL.
	{name: "replica-away", title: "one of two replicas away 30 s (its link held)", replicated: true,
		fault: func(t *testing.T, f *availFixture) {
			f.rs.checkLinks(t)
			f.rs.links[0].Blackhole()
			time.Sleep(30 * time.Second)
			f.rs.links[0].Heal()
		}},
	{name: "replica-resync", title: "a full resync of one replica (restarted without its data)", replicated: true,
		fault: func(t *testing.T, f *availFixture) {
			f.rs.resync(t, 0)
			f.rs.waitReplicas(t, f.rs.master, 2)
		}},
	{name: "replica-lag", title: "one replica's link 0.3 s behind for 15 s", replicated: true,
		fault: func(t *testing.T, f *availFixture) {
			f.rs.checkLinks(t)
			f.rs.links[0].SetDelay(300 * time.Millisecond)
			time.Sleep(15 * time.Second)
			f.rs.links[0].SetDelay(0)
			f.rs.checkLinks(t)
		}},
	// A daemon of the same mode keeps writing to the old master through a
	// proxy of its own (as through a VIP that has not moved) while the
	// master is cut off from its replicas and the Sentinels for 5 s; the
	// Sentinels promote a replica, the measured daemon follows them, and
	// after the cut the other one's proxy moves to the new master.
	{name: "failover-split", title: "a Sentinel failover, the old master still reached by another node for 5 s", replicated: true,
		fault: func(t *testing.T, f *availFixture) {
			p := faultproxy.Start(t, f.rs.master.Addr())
			var mode string
			for i, a := range f.d.Args {
				if a == "--mode" && i+1 < len(f.d.Args) {
					mode = f.d.Args[i+1]
				}
			}
			other := NewDaemon(t, f.d.Name+"-old-master", "redis://"+p.Addr(), "--mode", mode)
			other.Bin = f.d.Bin
			other.MustStart()
			if err := firstID(other, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			load := startAvailLoad(other)
			defer load.Stop()
			start := time.Now()
			f.rs.partition()
			next := f.rs.waitPromoted(t, 20*time.Second)
			time.Sleep(max(0, 5*time.Second-time.Since(start)))
			f.rs.heal()
			p.Redirect(next)
		}},
	// The master's host lost: the Sentinels promote a replica and keep
	// the dead master on their list, so a grant they do not vouch for
	// waits for a replica that will not answer.
	{name: "failover-master-dead", title: "a Sentinel failover, the old master killed and gone for 30 s", replicated: true,
		fault: func(t *testing.T, f *availFixture) {
			f.rs.master.Kill()
			f.rs.waitPromoted(t, 20*time.Second)
			time.Sleep(30 * time.Second)
		}},
	// A fleet made with flaked init (its loss
	// floor puts the first IDs a horizon ahead of the clock) under load,
	// a replica gone 15 s after the start.
	{name: "replica-away-loaded", title: "one of two replicas away 30 s, 15 s after `flaked init`, under load (about 20,000 IDs/s)",
		replicated: true, loaded: true, init: initBefore,
		fault: func(t *testing.T, f *availFixture) {
			time.Sleep(13 * time.Second)
			f.rs.checkLinks(t)
			f.rs.links[0].Blackhole()
			time.Sleep(30 * time.Second)
			f.rs.links[0].Heal()
		}},
	// The node is started 1 s into the outage, and started again a
	// second after it exits (as systemd's Restart=always does), for a
	// minute at most: measured from its first start.
	{name: "replica-away-new-node", title: "a node started while one of two replicas is away 30 s", replicated: true, start: true,
		fault: func(t *testing.T, f *availFixture) {
			f.rs.checkLinks(t)
			f.rs.links[0].Blackhole()
			heal := time.AfterFunc(30*time.Second, f.rs.links[0].Heal)
			t.Cleanup(func() { heal.Stop() })
			time.Sleep(time.Second)
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
				mustLaunch(t, f.d)
				if f.d.listensOrExits(60*time.Second) || time.Now().After(deadline) {
					return
				}
			}
		}},
}

// runInit runs bin's flaked init on url: false when bin has no such
// command (a binary from before it), and the test fails when it does
// but cannot make the registry.
func runInit(t *testing.T, bin, url string, serveFlags []string) bool {
	args := []string{"init", "--redis", url}
	for i := 0; i+1 < len(serveFlags); i++ { // the serve flags init shares
		switch serveFlags[i] {
		case "--max-lead", "--reserve-ahead", "--max-skew":
			args = append(args, serveFlags[i], serveFlags[i+1])
		}
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil && strings.Contains(string(out), "unknown command") {
		t.Logf("%s has no init command: %s", bin, out)
		return false
	}
	if err != nil {
		t.Fatalf("flaked init: %v: %s", err, out)
	}
	return true
}

func mustLaunch(t *testing.T, d *Daemon) {
	if err := d.startNoWait(); err != nil {
		t.Fatal(err)
	}
}

// availResult is what one run measured, from the fault on.
type availResult struct {
	na       bool          // the binary cannot run the situation
	none     bool          // no ID at all after the fault (a fromHeal case)
	gap      time.Duration // longest time without an ID
	p99, max time.Duration // NEXTID latency
	requests int
	failed   int // error replies and timeouts
	lastErr  string
}

func (r availResult) String() string {
	s := fmt.Sprintf("gap %v, p99 %v, max %v, %d requests, %d failed", r.gap.Round(time.Millisecond),
		r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond), r.requests, r.failed)
	if r.lastErr != "" {
		s += " (last: " + r.lastErr + ")"
	}
	return s
}

// reply is one NEXTID request.
type reply struct {
	start, end time.Time
	id         uint64
	err        error
}

// availLoad asks NEXTID every 5 ms on one connection, each request with a
// 5 s read timeout (a client's usual), and keeps every reply.
type availLoad struct {
	mu      sync.Mutex
	replies []reply
	stop    chan struct{}
	done    chan struct{}
}

func startAvailLoad(d *Daemon) *availLoad {
	l := &availLoad{stop: make(chan struct{}), done: make(chan struct{})}
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second,
		ReadTimeout: 5 * time.Second, DisableIdentity: true, Protocol: 2})
	go func() {
		defer close(l.done)
		defer c.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			r := reply{start: time.Now()}
			r.id, r.err = c.Do(context.Background(), "NEXTID").Uint64()
			r.end = time.Now()
			l.mu.Lock()
			l.replies = append(l.replies, r)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *availLoad) Stop() []reply {
	close(l.stop)
	<-l.done
	return l.replies
}

// lastOK is when the last successful reply came, or zero.
func (l *availLoad) lastOK() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.replies) - 1; i >= 0; i-- {
		if l.replies[i].err == nil {
			return l.replies[i].end
		}
	}
	return time.Time{}
}

// steadySince is how long IDs have come without a gap over 500 ms.
func (l *availLoad) steadySince(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := now
	for i := len(l.replies) - 1; i >= 0; i-- {
		r := l.replies[i]
		if r.err != nil {
			continue
		}
		if next.Sub(r.end) > 500*time.Millisecond {
			break
		}
		next = r.end
	}
	return now.Sub(next)
}

func waitListening(t *testing.T, d *Daemon, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", d.Addr(), 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not listen within %v\n%s", d.Name, within, d.Log())
}

// runAvailability runs one situation in one mode on one binary.
func runAvailability(t *testing.T, c availCase, mode, bin string) availResult {
	if c.modes != nil && !slices.Contains(c.modes, mode) {
		return availResult{na: true} // a counter node leases no machine ID of its own
	}
	f := &availFixture{}
	if c.replicated {
		f.rs = startReplicaSet(t, 2)
		f.srv = f.rs.master
	} else {
		f.srv = redistest.Start(t, redistest.Options{AOF: c.aof})
	}
	url := f.srv.URL()
	if c.replicated {
		url = f.rs.url()
	}
	if c.proxy {
		f.proxy = faultproxy.Start(t, f.srv.Addr())
		url = "redis://" + f.proxy.Addr()
	}
	f.d = NewDaemon(t, "avail-"+c.name+"-"+mode, url, append([]string{"--mode", mode}, c.flags...)...)
	f.d.Bin = bin
	switch c.init {
	case "":
		if c.replicated {
			f.rs.initRegistry(t, c.flags...)
		} else {
			initRegistry(t, append([]string{"--redis", url}, c.flags...)...)
		}
	case initBefore:
		if !runInit(t, bin, url, c.flags) {
			return availResult{na: true}
		}
	}
	var load *availLoad
	var t0, over time.Time
	if c.start {
		if c.name == "node-kill" {
			// A node that has served IDs, so its state file and Redis hold
			// a reservation made ahead.
			f.d.MustStart()
			if err := firstID(f.d, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			warm := startAvailLoad(f.d)
			time.Sleep(2 * time.Second)
			warm.Stop()
		}
		t0 = time.Now()
		if c.init == initTimed {
			runInit(t, bin, url, c.flags)
		}
		c.fault(t, f)
		waitListening(t, f.d, 60*time.Second)
		load = startAvailLoad(f.d)
		over = t0
	} else {
		mustLaunch(t, f.d)
		waitListening(t, f.d, 60*time.Second)
		if err := firstID(f.d, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		load = startAvailLoad(f.d)
		if c.loaded {
			f.d.down.Store(false) // launched without Start, which sets it
			heavy := startLoad([]*Daemon{f.d}, 2, 0, pacedNextIDs(16, time.Millisecond))
			defer func() {
				heavy.Stop()
				heavy.Check(t, defaultLayout())
			}()
		}
		time.Sleep(2 * time.Second)
		t0 = time.Now()
		c.fault(t, f)
		over = time.Now()
		if c.fromHeal {
			t0 = over
		}
	}
	// Until IDs have come steadily for 3 s, at least availWatch after the
	// fault, at most 39 s more.
	for {
		now := time.Now()
		if now.Sub(over) > availWatch+39*time.Second || (now.Sub(over) > availWatch && load.steadySince(now) > 3*time.Second) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	watched := time.Now()
	replies := load.Stop()
	f.d.Kill()
	if os.Getenv("FLAKED_AVAIL_LOG") == "1" {
		t.Logf("%s's log:\n%s", f.d.Name, f.d.Log())
	}

	seen := map[uint64]bool{}
	var res availResult
	var lat []time.Duration
	prev := t0
	after := false // an ID ended at or after t0
	for _, r := range replies {
		if r.err == nil {
			if seen[r.id] {
				t.Errorf("ID %d issued twice", r.id)
			}
			seen[r.id] = true
			after = after || !r.end.Before(t0)
		}
		if r.start.Before(t0) {
			if r.err == nil {
				// A request that straddles t0 counts from its end; one
				// that ended before t0 (a fromHeal case's last ID before
				// the cut) does not move the gap's start back before t0.
				if r.end.After(prev) {
					prev = r.end
				}
			}
			continue
		}
		res.requests++
		lat = append(lat, r.end.Sub(r.start))
		if r.err != nil {
			res.failed++
			res.lastErr = r.err.Error()
			var ne net.Error
			if errors.As(r.err, &ne) && ne.Timeout() {
				res.lastErr = "timeout"
			}
			continue
		}
		res.gap = max(res.gap, r.end.Sub(prev))
		prev = r.end
	}
	if after {
		// The stretch from the last ID to the end of the watch is a gap
		// too: a node that issued a while after the fault and then
		// stopped has not recovered.
		res.gap = max(res.gap, watched.Sub(prev))
	}
	if !after {
		if !c.fromHeal {
			t.Errorf("no ID after the fault\n%s", f.d.Log())
		}
		res.none = true
		res.gap = over.Add(availWatch + 39*time.Second).Sub(t0)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p99 = lat[len(lat)*99/100]
		res.max = lat[len(lat)-1]
	}
	return res
}
