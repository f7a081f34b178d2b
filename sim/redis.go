package sim

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/flaked/flaked/internal/simredis"
)

// deployment is the fleet's Redis: three hosts, one the master and two
// its replicas, the master's snapshots on disk and the operator's
// backups, and, when the schedule has them, the Sentinels that watch the
// master and promote a replica (sentinel.go). The master is a simulated
// server, made when its host becomes master; a replica is the data it
// has received and the offset it has acknowledged to the server it
// follows, and becomes a server when it is promoted. A promotion while
// the old master still runs (a split brain, a forced failover) keeps the
// old master's server, which the nodes that still reach it write to until
// it rejoins as a replica and its writes are gone.
type deployment struct {
	w       *world
	rng     *rand.Rand
	s       *Schedule
	hosts   []*host
	m       *host            // the master's host
	srv     *simredis.Server // the master
	saved   *simredis.Data   // the master's last snapshot on disk
	backups []*simredis.Data // older snapshots kept by the operator

	// old is the old master of a promotion while it still runs, nil when
	// there is none.
	old *oldMaster
	// ghosts are replicas a server still lists after their link was cut,
	// until repl-timeout (they acknowledge nothing).
	ghosts map[*simredis.Server][]ghost
	// retired are servers that ran scripts and are gone (coverage);
	// replacedAt is when a replica was promoted in place of each.
	retired    []*simredis.Server
	replacedAt map[*simredis.Server]time.Duration
	// Eviction: keys evicted every evictEvery until evictUntil.
	evictUntil time.Duration
	// infoFault is INFO's fault on every master until infoUntil.
	infoFault simredis.InfoFault
	infoUntil time.Duration
	// skewNext: the next promoted replica's clock is this much behind the
	// old master's (FaultRedisSkew), 0 for none.
	skewNext time.Duration

	sentinels *sentinels // nil without Sentinels
	log       func(format string, args ...any)
}

// host is one machine of the deployment with its redis-server process.
type host struct {
	i     int
	addr  string
	clock *serverClock
	runID string // the process's run_id, new at every restart
	// The process is down (a crash, a reboot) from downAt until downUntil.
	downAt, downUntil time.Duration
	// nodeCut: node i cannot reach this host until nodeCut[i] (a split
	// brain's partition); sentinelCut: no Sentinel can.
	nodeCut     map[int]time.Duration
	sentinelCut time.Duration
	// Its server answers slow later until slowUntil (a stalled disk, a
	// busy CPU).
	slowUntil, slow time.Duration
	// replCut: as a master, cut off from its replicas until then, but for
	// those on its side (sideOf, until sideUntil).
	replCut   time.Duration
	sideOf    *host
	sideUntil time.Duration

	// As a replica: what it has received, the history it holds (the
	// master_replid it synced with), the server it follows (nil: none),
	// the offset of that server it acknowledged, and from when it is
	// online (before: a full sync in progress, listed, acknowledging
	// nothing).
	data    *simredis.Data
	replID  string
	follows *simredis.Server
	acked   int64
	online  time.Duration
	// Its link to the server it follows is cut from cutAt to cutUntil: it
	// stays listed, with the offset it had, until repl-timeout.
	cutAt, cutUntil time.Duration
	// It acknowledges lag late until lagUntil (a slow link, a slow disk).
	lag, lagUntil time.Duration
	// period: it catches up with its master this often.
	period time.Duration
	// linkDown is when it stopped following a master, -1 while it
	// follows one; confAt when what it follows last changed.
	linkDown, confAt time.Duration
	// gen counts changes of what it follows: a catch-up or sync begun
	// before one is dropped.
	gen int
}

// oldMaster is the old master of a promotion, still running: node i
// writes to it until until[i], and it rejoins as a replica at end.
type oldMaster struct {
	srv   *simredis.Server
	h     *host
	until map[int]time.Duration
	end   time.Duration
}

// ghost is a replica a server lists after its link was cut.
type ghost struct {
	addr   string
	offset int64
	until  time.Duration
}

// serverClock is one host's clock: virtual time, off by skew.
type serverClock struct {
	w    *world
	skew time.Duration
}

func (c *serverClock) now() time.Time { return c.w.epoch.Add(c.w.now + c.skew) }

// maxServerSkew bounds how far a host's clock is off virtual time: any
// two within 1 s, the scripts' allowance (guard.lua's redisSkewMs); with
// Sentinels within 1 s less MaxCheckAge, which the Sentinel rule takes
// from that allowance (internal/replwait).
func (d *deployment) maxServerSkew() time.Duration {
	if d.s.Sentinel != nil {
		return 450 * time.Millisecond
	}
	return 500 * time.Millisecond
}

func newDeployment(w *world, rng *rand.Rand, s *Schedule) *deployment {
	d := &deployment{w: w, rng: rng, s: s, ghosts: map[*simredis.Server][]ghost{}, replacedAt: map[*simredis.Server]time.Duration{},
		log: func(string, ...any) {}}
	for i := range 3 {
		h := &host{i: i, addr: "10.0.0." + strconv.Itoa(10+i) + ":6379", clock: &serverClock{w: w},
			nodeCut: map[int]time.Duration{}, linkDown: -1, period: s.ReplicaLag}
		if i > 0 {
			h.clock.skew = d.drawSkew()
			h.runID = d.newID()
		}
		if i == 2 {
			h.period = s.ReplicaLag2
		}
		d.hosts = append(d.hosts, h)
	}
	d.m = d.hosts[0]
	d.srv = simredis.New(d.m.clock.now, rng)
	d.m.runID = d.srv.RunID()
	for _, h := range d.hosts[1:] {
		d.attach(h, d.srv, false)
	}
	d.saved = d.srv.Snapshot()
	return d
}

func (d *deployment) drawSkew() time.Duration {
	m := d.maxServerSkew()
	return time.Duration(d.rng.Int64N(int64(2*m))) - m
}

// newID is a run_id: 40 hex digits.
func (d *deployment) newID() string {
	var b [20]byte
	for i := range b {
		b[i] = byte(d.rng.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// replicas are the hosts that are not the master, in host order.
func (d *deployment) replicas() []*host {
	var out []*host
	for _, h := range d.hosts {
		if h != d.m {
			out = append(out, h)
		}
	}
	return out
}

// hostOf is the host of server srv (the master's or the old master's).
func (d *deployment) hostOf(srv *simredis.Server) *host {
	if d.old != nil && srv == d.old.srv {
		return d.old.h
	}
	return d.m
}

// up reports whether h's process runs.
func (d *deployment) up(h *host) bool { return h.downUntil <= d.w.now }

// live reports whether srv is a running master: the master, or the old
// master while it runs.
func (d *deployment) live(srv *simredis.Server) bool {
	return srv != nil && (srv == d.srv || d.old != nil && srv == d.old.srv) && d.up(d.hostOf(srv))
}

// route is the server node i reaches now, and its host; the old master
// rejoins as a replica once its time is up.
func (d *deployment) route(i int) (*simredis.Server, *host) {
	if o := d.old; o != nil {
		if d.w.now >= o.end {
			d.endOld()
		} else if d.w.now < o.until[i] {
			return o.srv, o.h
		}
	}
	return d.srv, d.m
}

// attach makes h follow srv: a partial sync (it continues the history it
// holds: online at once with srv's data) or a full one (listed, not
// acknowledging, until the sync is done; its data is then srv's).
func (d *deployment) attach(h *host, srv *simredis.Server, full bool) {
	if until := d.cutOff(h, d.hostOf(srv)); until > d.w.now {
		// A partition keeps it from that master: it connects once it heals.
		d.detach(h, false)
		gen := h.gen
		d.w.atMid(until, func() {
			if h.gen == gen && d.live(srv) && h != d.m {
				d.attach(h, srv, full)
			}
		})
		return
	}
	h.gen++
	h.follows, h.cutUntil, h.lagUntil, h.linkDown, h.confAt = srv, 0, 0, -1, d.w.now
	d.log("%s follows %s (%s sync)", h.addr, d.hostOf(srv).addr, map[bool]string{true: "full", false: "partial"}[full])
	if !full {
		d.sync(h)
		return
	}
	h.online, h.acked = d.w.now+d.syncTime(), 0
	gen := h.gen
	d.w.atMid(h.online, func() {
		if h.gen == gen && h.follows == srv && d.up(h) {
			d.sync(h)
		}
	})
}

// cutOff is until when a partition keeps replica h from master m (0:
// none).
func (d *deployment) cutOff(h, m *host) time.Duration {
	if m.replCut > d.w.now && !(h.sideOf == m && h.sideUntil > d.w.now) {
		return m.replCut
	}
	return 0
}

// syncTime is how long a full sync takes: the master's fork and RDB, the
// transfer, the replica's load.
func (d *deployment) syncTime() time.Duration {
	return 50*time.Millisecond + time.Duration(d.rng.Int64N(int64(2*time.Second)))
}

// sync brings h up to date with the server it follows, now.
func (d *deployment) sync(h *host) {
	snap := h.follows.Snapshot()
	h.data, h.acked, h.replID, h.online = snap, snap.Offset(), h.follows.ReplID(), d.w.now
}

// detach ends h's link to what it follows. A link closed (the replica's
// process stopped, or it was told to follow another) ends the listing at
// once; a cut one leaves a ghost until repl-timeout.
func (d *deployment) detach(h *host, cut bool) {
	if h.follows != nil && cut {
		from := d.w.now
		if h.cutUntil > d.w.now {
			from = h.cutAt
		}
		d.ghosts[h.follows] = append(d.ghosts[h.follows], ghost{addr: h.addr, offset: h.acked, until: from + d.s.ReplTimeout})
	}
	h.gen++
	h.follows, h.cutUntil, h.lagUntil, h.confAt = nil, 0, 0, d.w.now
	if h.linkDown < 0 {
		h.linkDown = d.w.now
	}
}

// down stops h's process until until.
func (d *deployment) down(h *host, until time.Duration) {
	if h.downUntil <= d.w.now {
		h.downAt = d.w.now
	}
	h.downUntil = max(h.downUntil, until)
}

// linkDownSince is how long h's replication link has been down (Sentinel's
// master_link_down_time) as of when, or -1 while it is up: since it
// stopped following, since the master it follows stopped, since its link
// was cut, or since its own process stopped.
func (d *deployment) linkDownSince(h *host) time.Duration {
	now := d.w.now
	switch {
	case h.follows == nil:
		return h.linkDown
	case !d.up(h):
		return h.downAt
	case h.cutUntil > now:
		return h.cutAt
	case !d.live(h.follows):
		if h.follows == d.srv || d.old != nil && h.follows == d.old.srv {
			return d.hostOf(h.follows).downAt
		}
		if h.linkDown >= 0 {
			return h.linkDown
		}
		return h.confAt
	}
	return -1
}

// linked reports whether h receives and acknowledges its master's
// writes now.
func (d *deployment) linked(h *host) bool {
	now := d.w.now
	return h.follows != nil && d.live(h.follows) && d.up(h) && h.cutUntil <= now && now >= h.online
}

// catchUp brings h up to date if it is linked: now, or lag later.
func (d *deployment) catchUp(h *host) {
	if !d.linked(h) {
		return
	}
	if h.lagUntil <= d.w.now {
		d.sync(h)
		return
	}
	snap, srv, gen := h.follows.Snapshot(), h.follows, h.gen
	d.w.atMid(d.w.now+h.lag, func() {
		if h.gen == gen && d.linked(h) {
			h.data, h.acked, h.replID = snap, snap.Offset(), srv.ReplID()
		}
	})
}

// list sets what srv lists as its replicas: those following it (a cut
// one until repl-timeout, one in a full sync in state wait_bgsave), and
// its ghosts.
func (d *deployment) list(srv *simredis.Server) {
	now := d.w.now
	var out []simredis.Replica
	for _, h := range d.hosts {
		switch {
		case h.follows != srv || !d.up(h):
		case h.cutUntil > now:
			if now-h.cutAt < d.s.ReplTimeout {
				out = append(out, simredis.Replica{Addr: h.addr, State: "online", Offset: h.acked})
			}
		case now < h.online:
			out = append(out, simredis.Replica{Addr: h.addr, State: "wait_bgsave"})
		default:
			out = append(out, simredis.Replica{Addr: h.addr, State: "online", Offset: h.acked})
		}
	}
	gs := d.ghosts[srv]
	for i := 0; i < len(gs); i++ {
		if gs[i].until <= now {
			gs = slices.Delete(gs, i, i+1)
			i--
			continue
		}
		out = append(out, simredis.Replica{Addr: gs[i].addr, State: "online", Offset: gs[i].offset})
	}
	d.ghosts[srv] = gs
	srv.SetReplicaList(out)
}

// wait is WAIT numreplicas timeout on srv, for a simulation that owns
// time: the replicas linked to srv acknowledge what it has after a
// millisecond, or their lag; WAIT returns once numreplicas did, or at the
// timeout. It returns how long that takes; the replicas that acknowledged
// by then are up to date.
func (d *deployment) wait(srv *simredis.Server, args []string) (time.Duration, func()) {
	n, _ := strconv.Atoi(args[1])
	ms, _ := strconv.Atoi(args[2])
	timeout := time.Duration(ms) * time.Millisecond
	if n <= 0 {
		return 0, func() {}
	}
	type ack struct {
		h  *host
		at time.Duration
	}
	var acks []ack
	for _, h := range d.hosts {
		if h.follows == srv && d.linked(h) {
			at := time.Millisecond
			if h.lagUntil > d.w.now {
				at = max(at, h.lag)
			}
			acks = append(acks, ack{h, at})
		}
	}
	slices.SortFunc(acks, func(a, b ack) int { return int(a.at - b.at) })
	took := timeout
	if len(acks) >= n && acks[n-1].at <= timeout {
		took = acks[n-1].at
	}
	snap := srv.Snapshot()
	return took, func() {
		var by []string
		for _, a := range acks {
			if a.at <= took && a.h.follows == srv && d.linked(a.h) {
				a.h.data, a.h.acked, a.h.replID = snap, snap.Offset(), srv.ReplID()
				by = append(by, a.h.addr)
			}
		}
		d.log("WAIT %d on %s: acknowledged by %v after %v", n, d.hostOf(srv).addr, by, took)
	}
}

// save writes a snapshot.
func (d *deployment) save() { d.saved = d.srv.Snapshot() }

// backup keeps a copy of the last snapshot.
func (d *deployment) backup() {
	d.backups = append(d.backups, d.saved)
}

// oldest is the oldest backup (or nothing, before the first).
func (d *deployment) oldest() *simredis.Data {
	if len(d.backups) == 0 {
		return nil
	}
	return d.backups[0]
}

// promotion says how a replica is promoted.
type promotion struct {
	// keep: the old master keeps running for the nodes that reach it
	// (until), and rejoins as a replica at end; otherwise it is down
	// (crashed) until back, then rejoins as a replica.
	keep  bool
	until map[int]time.Duration
	end   time.Duration
	back  time.Duration
	// follow: the other replica follows the promoted one; stay: it keeps
	// following the old master (acknowledging its writes while it runs);
	// neither: it stays detached.
	follow, stay bool
}

// promote makes h master in place of the master. What h had not received
// is lost. Its clock is its own: within the skew every host keeps, unless
// a skewed failover set it behind the old master's.
func (d *deployment) promote(h *host, p promotion) {
	if d.old != nil { // one old master at a time: the older one rejoins now
		d.endOld()
	}
	old, oldHost := d.srv, d.m
	d.replacedAt[old] = d.w.now
	oldDown := d.w.now // when the replicas of a stopped old master lost it
	if !d.up(oldHost) {
		oldDown = oldHost.downAt
	}
	if d.skewNext > 0 {
		h.clock.skew, d.skewNext = oldHost.clock.skew-d.skewNext, 0
	}
	replID2 := h.replID // PSYNC2: the history it followed
	d.detach(h, h.cutUntil > d.w.now)
	srv := simredis.New(h.clock.now, d.rng)
	data := h.data
	srv.PromoteReplica(data, h.runID, replID2)
	if d.infoUntil > d.w.now {
		srv.SetInfoFault(d.infoFault)
		until := d.infoUntil
		d.w.atMid(until, func() { srv.SetInfoFault(simredis.InfoOK) })
	}
	d.srv, d.m, d.saved = srv, h, data
	d.log("promoted %s (run_id %.8s, offset %d of the old master's %d); old master %s %s", h.addr, h.runID, data.Offset(), old.Offset(), oldHost.addr,
		map[bool]string{true: "keeps running", false: "down"}[p.keep])
	for _, o := range d.hosts {
		if o == h || o == oldHost {
			continue
		}
		switch {
		case p.stay:
			if !p.keep && o.follows == old {
				o.linkDown = oldDown
			}
		case p.follow && d.up(o):
			// Its history continues in the promoted replica's unless it
			// received more than the promoted one: then a full sync.
			partial := o.replID == h.replID && o.data.Offset() <= data.Offset()
			d.attach(o, srv, !partial)
		case o.follows == old:
			d.detach(o, p.keep) // cut off from a running old master: it lists o until repl-timeout
		}
	}
	if p.keep {
		o := &oldMaster{srv: old, h: oldHost, until: p.until, end: p.end}
		d.old = o
		d.w.atMid(p.end, func() {
			if d.old == o {
				d.endOld()
			}
		})
		return
	}
	d.retired = append(d.retired, old)
	d.crashed(oldHost, old, p.back)
}

// crashed makes oldHost, whose server was old, a stopped host that comes
// back at back as a replica of the master then (a full sync: what it had
// that the master lacks is gone).
func (d *deployment) crashed(oldHost *host, old *simredis.Server, back time.Duration) {
	oldHost.data, oldHost.replID = old.Snapshot(), old.ReplID()
	d.down(oldHost, back)
	oldHost.follows, oldHost.linkDown = nil, d.w.now
	oldHost.gen++
	gen := oldHost.gen
	d.w.atMid(back, func() {
		if oldHost.gen == gen && oldHost != d.m {
			oldHost.runID = d.newID()
			d.attach(oldHost, d.srv, true)
		}
	})
}

// endOld ends the old master: its writes since the promotion are gone,
// it follows the master with a full sync, and so do the replicas that
// followed it.
func (d *deployment) endOld() {
	o := d.old
	d.old = nil
	d.retired = append(d.retired, o.srv)
	d.log("old master %s rejoins as a replica", o.h.addr)
	if d.up(o.h) {
		o.h.data, o.h.replID = o.srv.Snapshot(), o.srv.ReplID()
		d.attach(o.h, d.srv, true)
	} else {
		d.crashed(o.h, o.srv, o.h.downUntil)
	}
	for _, h := range d.hosts {
		if h.follows == o.srv && h != d.m {
			d.attach(h, d.srv, true)
		}
	}
}

// revert turns the master back into a replica of the old master, which
// becomes the master again: the promotion did not stand (a failover its
// leader left unfinished), and the writes it took are gone.
func (d *deployment) revert() {
	o := d.old
	rogue, rh := d.srv, d.m
	d.old = nil
	d.srv, d.m = o.srv, o.h
	d.retired = append(d.retired, rogue)
	rh.data, rh.replID = rogue.Snapshot(), rogue.ReplID()
	d.attach(rh, d.srv, true)
}

// offsetOf is how much of the replication stream h holds: the master's
// offset, or a replica's data's.
func (d *deployment) offsetOf(h *host) int64 {
	if h == d.m {
		return d.srv.Offset()
	}
	return h.data.Offset()
}

// restart restarts the master with data (nil: none): a new run_id and
// replication ID, so its replicas, which lost their link, reconnect within
// a few seconds with a full sync.
//
// What it starts from is what its persistence holds from then on: a later
// restart from the last snapshot never brings back data from before this
// restart (an operator restores a backup by putting it in the snapshot's
// place, and a server started empty saves its empty data).
func (d *deployment) restart(data *simredis.Data) {
	d.srv.Restart(data)
	d.saved = d.srv.Snapshot()
	d.m.runID = d.srv.RunID()
	for _, h := range d.hosts {
		if h.follows != d.srv || h == d.m {
			continue
		}
		d.detach(h, false)
		gen, srv := h.gen, d.srv
		d.w.atMid(d.w.now+time.Duration(d.rng.Int64N(int64(3*time.Second))), func() {
			if h.gen == gen && d.srv == srv && d.up(h) {
				d.attach(h, srv, true)
			}
		})
	}
}

// pick returns the replica a promotion takes: the up replica with the
// most data (which = 0) or another up one (which = 1), nil when none is up.
func (d *deployment) pick(which int) *host {
	var up []*host
	for _, h := range d.replicas() {
		if d.up(h) && h.data != nil && (d.old == nil || h != d.old.h) {
			up = append(up, h)
		}
	}
	if len(up) == 0 {
		return nil
	}
	slices.SortStableFunc(up, func(a, b *host) int { return int(b.data.Offset() - a.data.Offset()) })
	return up[min(which, len(up)-1)]
}

// failover is the failover of a deployment without Sentinels: an
// operator's or a script's REPLICAOF NO ONE on a replica while the master
// is down. The old master's host comes back as a replica later.
func (d *deployment) failover(f Fault) {
	h := d.pick(f.Replica)
	if h == nil {
		d.log("failover: no replica up")
		return
	}
	d.promote(h, promotion{follow: f.Follow, back: d.w.now + time.Second + time.Duration(d.rng.Int64N(int64(20*time.Second)))})
}

// splitBrain promotes a replica while the old master, cut off from it and
// from Sentinel but not from the nodes in reach, goes on accepting their
// writes for dur; the other replica stays with it (f.Stay), follows the
// promoted one, or neither. The old master keeps listing the replica
// promoted (with the offset it had) until repl-timeout, as Redis does.
func (d *deployment) splitBrain(f Fault, reach map[int]bool) {
	h := d.pick(f.Replica)
	if h == nil {
		d.log("split brain: no replica up")
		return
	}
	end := d.w.now + f.For
	until := map[int]time.Duration{}
	for i, in := range reach {
		if in {
			until[i] = end
		}
	}
	h.cutAt, h.cutUntil = d.w.now, end
	old := d.m
	old.replCut = max(old.replCut, end)
	if f.Stay {
		for _, o := range d.replicas() {
			if o != h {
				o.sideOf, o.sideUntil = old, end
			}
		}
	}
	d.promote(h, promotion{keep: true, until: until, end: end, follow: f.Follow && !f.Stay, stay: f.Stay})
}

// coverage is what the deployment's servers counted of the scripts'
// branches.
func (d *deployment) coverage() []uint64 {
	c := d.srv.Coverage(nil)
	for _, s := range d.retired {
		c = s.Coverage(c)
	}
	if d.old != nil {
		c = d.old.srv.Coverage(c)
	}
	return c
}

// scriptCalls counts the script calls every server ran.
func (d *deployment) scriptCalls() uint64 {
	n := d.srv.Stats().ScriptCalls
	for _, s := range d.retired {
		n += s.Stats().ScriptCalls
	}
	if d.old != nil {
		n += d.old.srv.Stats().ScriptCalls
	}
	return n
}

func (h *host) String() string { return fmt.Sprintf("%s (run_id %.8s)", h.addr, h.runID) }
