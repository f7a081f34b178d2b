package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// What the replica fault tests share: a master whose replicas each reach
// it through a fault proxy of their own (so one replica's link can be cut,
// held or slowed), and one daemon per mode, each under load, with a probe
// that times every reply so the longest stretch without an ID can be read
// per mode.

// replicaSet is a master, its replicas, each reaching the master through
// a fault proxy of its own (links[i]), and three Sentinels (quorum 2,
// down-after 500 ms) reaching it through front: cutting front and the
// links partitions the master from everything but the nodes that reach it
// directly.
type replicaSet struct {
	master    *redistest.Server
	front     *faultproxy.Proxy
	replicas  []*redistest.Server
	links     []*faultproxy.Proxy
	sentinels *redistest.Sentinels
}

// noSyncDelay: without it a full sync waits 5 s for more replicas to join.
const noSyncDelay = "repl-diskless-sync-delay 0"

// startReplicaSet starts a master, n replicas and the Sentinels, and waits
// until the master lists every replica online, acknowledging writes, and
// every Sentinel knows them and the other Sentinels.
func startReplicaSet(t testing.TB, n int) *replicaSet {
	t.Helper()
	redistest.Require(t, "redis-server", "redis-sentinel")
	rs := &replicaSet{master: redistest.Start(t, redistest.Options{Args: []string{noSyncDelay}})}
	rs.front = faultproxy.Start(t, rs.master.Addr())
	for range n {
		link := faultproxy.Start(t, rs.master.Addr())
		r := redistest.Start(t, redistest.Options{Args: []string{noSyncDelay, "replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
		rs.links = append(rs.links, link)
		rs.replicas = append(rs.replicas, r)
	}
	rs.waitReplicas(t, rs.master, n)
	// A long failover timeout: a Sentinel makes a replica that follows
	// another address than the master's it knows (here: its own link
	// rather than front) follow that address once a failover timeout has
	// passed, which would route every replica through front and take
	// their links out of the tests' reach. A failover itself does not
	// wait for it.
	rs.sentinels = redistest.StartSentinels(t, rs.front.Addr(), n, redistest.SentinelsOptions{FailoverTimeout: 10 * time.Minute})
	return rs
}

// checkLinks fails unless every replica still follows the master through
// its own link (the faults on links[i] reach replica i).
func (rs *replicaSet) checkLinks(t testing.TB) {
	t.Helper()
	for i, r := range rs.replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: time.Second})
		info, err := c.Info(ctxT(t), "replication").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := "master_port:" + strconv.Itoa(rs.links[i].Port()); !strings.Contains(info, want) {
			t.Fatalf("replica %d does not follow the master through its link (%s): %s", i, want, info)
		}
	}
}

// url is how nodes reach the fleet's Redis: through the Sentinels.
func (rs *replicaSet) url() string { return rs.sentinels.URL() }

// initRegistry makes the fleet's registry (initRegistry) with the
// replicas high-water mark at the replicas the master lists, as flaked
// init records it: serve refuses a Sentinel deployment whose replicas the
// mark does not count.
func (rs *replicaSet) initRegistry(t testing.TB, flags ...string) {
	t.Helper()
	initRegistry(t, append([]string{"--redis", rs.url()}, flags...)...)
	c := redis.NewClient(&redis.Options{Addr: rs.master.Addr(), DialTimeout: time.Second})
	defer c.Close()
	if _, err := coord.SetReplicaMark(ctxT(t), c, "", len(rs.replicas), "test"); err != nil {
		t.Fatal(err)
	}
	seedCounter(t, c)
}

// seedCounter sets the counter behind Redis TIME, as a fleet's counter is
// once it has been in use a while: a counter made anew (its first use, or
// after a loss) starts its lead (13 s) ahead of Redis TIME and holds its
// reach only once the clock has caught up with its values (docs/modes.md),
// which would take longer than these tests warm up.
func seedCounter(t testing.TB, c *redis.Client) {
	t.Helper()
	now, err := c.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	key := contract.NewKeys(coord.DefaultNamespace).Counter
	if err := c.HSet(ctxT(t), key, "tick", defaultLayout().Tick(now)-1, "seq", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// waitReplicas waits until m lists n replicas online that acknowledge a
// write (the first ACK after a sync comes up to a second later).
func (rs *replicaSet) waitReplicas(t testing.TB, m *redistest.Server, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), DialTimeout: time.Second})
	defer c.Close()
	poll.UntilNil(t, 30*time.Second, fmt.Sprintf("%d replicas of %s online and acknowledging", n, m.Addr()), func() error {
		mk, err := coord.SplitBrainCheck(context.Background(), c, "")
		if err == nil && (mk.Online != n || !ackedWrite(c, n)) {
			err = fmt.Errorf("%d of %d replicas online and acknowledging: %v", mk.Online, n, mk.Replicas)
		}
		return err
	})
}

// resync makes replica i sync from scratch, as after a replica restarted
// without its data (a new disk, a host replaced) or fell out of the
// backlog: it is killed and started again with its data directory
// emptied. It returns at once; the sync runs on.
func (rs *replicaSet) resync(t testing.TB, i int) {
	t.Helper()
	r := rs.replicas[i]
	r.Kill()
	entries, _ := filepath.Glob(filepath.Join(r.Dir(), "*.rdb"))
	for _, e := range entries {
		if err := os.Remove(e); err != nil {
			t.Fatal(err)
		}
	}
	r.Restart(t)
}

// waitPromoted waits until every Sentinel reports one of the replicas as
// the master and it answers ROLE as one, and returns its address.
func (rs *replicaSet) waitPromoted(t testing.TB, within time.Duration) string {
	t.Helper()
	var next string
	poll.UntilNil(t, within, "a replica promoted", func() error {
		addr, err := rs.sentinels.Master(context.Background())
		if err != nil {
			return err
		}
		if addr == rs.front.Addr() {
			return fmt.Errorf("the sentinels still report the old master")
		}
		next = addr
		return nil
	})
	rs.sentinels.WaitMaster(t, next, within)
	c := redis.NewClient(&redis.Options{Addr: next, DialTimeout: time.Second})
	defer c.Close()
	poll.UntilNil(t, within, next+" a master", func() error {
		role, err := redistest.Role(context.Background(), c)
		if err == nil && role != "master" {
			err = fmt.Errorf("%s answers ROLE %s", next, role)
		}
		return err
	})
	return next
}

// fullSyncs is the master's count of full syncs (INFO stats sync_full).
func fullSyncs(t testing.TB, m *redistest.Server) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), DialTimeout: time.Second})
	defer c.Close()
	info, err := c.Info(ctxT(t), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "sync_full:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("INFO stats has no sync_full")
	return 0
}

// partition cuts the master off from its replicas and the Sentinels (and
// the nodes that reach it through them), leaving the nodes that reach it
// directly; heal undoes it.
func (rs *replicaSet) partition() {
	rs.front.Blackhole()
	for _, l := range rs.links {
		l.Blackhole()
	}
}

func (rs *replicaSet) heal() {
	rs.front.Heal()
	for _, l := range rs.links {
		l.Heal()
	}
}

// modeFleet is daemons of the given modes on one Redis URL, each under
// load from a few connections (for the duplicate check) and timed by a
// probe (for the gaps).
type modeFleet struct {
	members []*member
	load    *Load
	more    []*Load // of daemons added later (add)
}

// member is one daemon of a modeFleet and its probe.
type member struct {
	mode  string
	d     *Daemon
	probe *probe
}

// fleetModes are the modes every replica fault runs, one daemon each.
var fleetModes = []string{"flake", "counter", "auto"}

// startModeFleet starts one daemon per mode on url (the registry made by
// the caller), named after its mode (and its place when a mode repeats),
// waits until each served an ID, and starts the load and the probes.
func startModeFleet(t *testing.T, url string, modes []string, extra ...string) *modeFleet {
	t.Helper()
	f := &modeFleet{}
	var ds []*Daemon
	for i, m := range modes {
		name := m
		if slices.Contains(modes[:i], m) || slices.Contains(modes[i+1:], m) {
			name += strconv.Itoa(i)
		}
		d := NewDaemon(t, name, url, append([]string{"--mode", m}, extra...)...)
		d.MustStart()
		if err := firstID(d, 30*time.Second); err != nil {
			t.Fatalf("%s served no ID: %v\n%s", d.Name, err, d.Log())
		}
		f.members = append(f.members, &member{mode: m, d: d})
		ds = append(ds, d)
	}
	f.load = startLoad(ds, 2, 0, fleetLoad)
	for i, m := range f.members {
		m.probe = startProbe(m.d, 1000+i)
	}
	return f
}

// add starts one more daemon in the fleet, under load and probed, once it
// served its first ID.
func (f *modeFleet) add(t *testing.T, name, url, mode string, extra ...string) *member {
	t.Helper()
	m := f.launch(t, name, url, mode, extra...)
	if err := firstID(m.d, 30*time.Second); err != nil {
		t.Fatalf("%s served no ID: %v\n%s", name, err, m.d.Log())
	}
	return m
}

// launch starts one more daemon in the fleet, under load and probed from
// its start on, without waiting for it to listen: a node started during a
// fault, which may exit.
func (f *modeFleet) launch(t *testing.T, name, url, mode string, extra ...string) *member {
	t.Helper()
	d := NewDaemon(t, name, url, append([]string{"--mode", mode}, extra...)...)
	mustLaunch(t, d)
	d.down.Store(false)
	m := &member{mode: mode, d: d, probe: startProbe(d, 2000+len(f.members))}
	f.members = append(f.members, m)
	f.more = append(f.more, startLoad([]*Daemon{d}, 2, 3000+10*len(f.members), fleetLoad))
	return m
}

// fleetLoad is what each connection of a modeFleet sends: 16 IDs every
// 4 ms or so, at most 8,000 IDs/s per daemon with its two connections. Two
// daemons in counter mode then take about half of what counter mode
// issues fleet-wide (one machine ID's 25,600 IDs/s), which leaves room
// for every counter node to hold its reach (docs/modes.md).
var fleetLoad = pacedNextIDs(16, 4*time.Millisecond)

// pacedNextIDs is NEXTIDS batch with a pause after each reply: a steady
// load (about batch IDs per pause per connection) that keeps a flake
// node at its tick's sequence limit without taking the machine's CPUs.
func pacedNextIDs(batch int, pause time.Duration) Request {
	req := nextIDs(batch)
	send := req.Send
	req.Send = func(ctx context.Context, c *redis.Client, r *rand.Rand) ([]uint64, error) {
		ids, err := send(ctx, c, r)
		time.Sleep(pause)
		return ids, err
	}
	return req
}

// stop ends the load and probes and checks every ID they got (the probes'
// too): no duplicate, increasing per connection and daemon incarnation.
func (f *modeFleet) stop(t *testing.T) {
	t.Helper()
	f.load.Stop()
	for _, l := range f.more {
		f.load.Absorb(l)
	}
	for _, m := range f.members {
		m.probe.stop()
		f.load.add(record{daemon: m.d.Name, mayCounter: m.mode != "flake", inc: m.probe.inc, conn: m.probe.conn, ids: m.probe.ids()})
	}
	f.load.Check(t, defaultLayout())
}

// gaps is the longest stretch without an ID within [from, to] per daemon,
// by name.
func (f *modeFleet) gaps(from, to time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, m := range f.members {
		out[m.d.Name] = m.probe.gap(from, to)
	}
	return out
}

// report logs each daemon's gap within [from, to] and, when it is over
// limit, its probe's last error.
func (f *modeFleet) report(t *testing.T, what string, from, to time.Time) map[string]time.Duration {
	t.Helper()
	g := f.gaps(from, to)
	var parts []string
	for _, m := range f.members {
		parts = append(parts, fmt.Sprintf("%s %v", m.d.Name, g[m.d.Name].Round(time.Millisecond)))
	}
	t.Logf("%s: longest gap per daemon: %s", what, strings.Join(parts, ", "))
	return g
}

// probe asks one daemon for NEXTID every 5 ms on one connection and keeps
// every reply with its time: the longest stretch without an ID is what a
// client waited.
type probe struct {
	d    *Daemon
	conn int
	inc  int64

	mu      sync.Mutex
	replies []reply
	stopCh  chan struct{}
	done    chan struct{}
}

func startProbe(d *Daemon, conn int) *probe {
	p := &probe{d: d, conn: conn, inc: d.inc.Load(), stopCh: make(chan struct{}), done: make(chan struct{})}
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second,
		ReadTimeout: 5 * time.Second, DisableIdentity: true, Protocol: 2})
	go func() {
		defer close(p.done)
		defer c.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-tick.C:
			}
			r := reply{start: time.Now()}
			r.id, r.err = c.Do(context.Background(), "NEXTID").Uint64()
			r.end = time.Now()
			p.mu.Lock()
			p.replies = append(p.replies, r)
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *probe) stop() {
	close(p.stopCh)
	<-p.done
}

// ids are the IDs the probe got, in order.
func (p *probe) ids() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []uint64
	for _, r := range p.replies {
		if r.err == nil {
			out = append(out, r.id)
		}
	}
	return out
}

// gap is the longest stretch within [from, to] without a reply carrying an
// ID: from from (or the last ID before it) to the first ID, between IDs,
// and from the last ID to to.
func (p *probe) gap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, longest := from, time.Duration(0)
	for _, r := range p.replies {
		if r.err != nil || r.end.Before(from) {
			continue
		}
		if r.end.After(to) {
			break
		}
		longest = max(longest, r.end.Sub(prev))
		prev = r.end
	}
	return max(longest, to.Sub(prev))
}

// lastError is the last error reply the probe got, "" for none.
func (p *probe) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range slices.Backward(p.replies) {
		if r.err != nil {
			return r.err.Error()
		}
	}
	return ""
}

// listensOrExits waits until d listens (true) or its process exits
// (false: it may be launched again), giving up after within (true: the
// caller goes on with what it has).
func (d *Daemon) listensOrExits(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		d.mu.Lock()
		select {
		case <-d.exit:
			d.cmd = nil
			d.mu.Unlock()
			return false
		default:
		}
		d.mu.Unlock()
		if c, err := net.DialTimeout("tcp", d.Addr(), 100*time.Millisecond); err == nil {
			c.Close()
			d.down.Store(false)
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
