package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flaked/flaked/internal/replwait"
)

// Sentinels in the simulator: a set of Sentinels watching the master on
// virtual time, each following Redis Sentinel's own rules (sentinel.c) as
// far as they decide when a replica can be promoted and what SENTINEL
// MASTER reports:
//
//   - Every 100 ms (its timer), a Sentinel PINGs the master once no reply
//     came for the ping period, min(down-after, 1 s), and no PING went out
//     for half of it. act_ping_time is the oldest PING not answered (0
//     when the last was); last_avail_time the last valid reply. A link
//     whose PING is pending for half of down-after is closed (flag
//     disconnected) and connected again once the master answers; a
//     master whose process stopped closes it at once.
//   - It sees the master subjectively down (s_down) once a PING went
//     unanswered for down-after (or, while disconnected, no valid reply
//     came for as long). While s_down it asks the others every second
//     whether they see it down too; a "yes" counts for 5 s. s_down and
//     yes answers reaching the quorum make it objectively down (o_down).
//   - At o_down it starts a failover (failover_in_progress, a new epoch)
//     and asks the others for their vote; a Sentinel votes for the first
//     that asks in an epoch, whatever it sees. With the votes of a
//     majority of the Sentinels and of the quorum it is the leader: it
//     picks a replica it reaches whose link to a master was not down for
//     more than 10 down-after periods (plus the time the master has been
//     down), the one with the highest offset, and sends it REPLICAOF NO
//     ONE: the promotion. It sees the promotion at the replica's next INFO
//     (within a second), tells the other replicas it reaches to follow
//     the promoted one (and from then answers GET-MASTER-ADDR-BY-NAME
//     with it; one it does not reach, once it does), and once every one
//     is in sync or down to it, unreached for down-after (or
//     failover-timeout passed), switches its configuration to the new
//     master (failover_in_progress ends; the run ID is unknown until its
//     first INFO). Not the leader
//     within min(10 s, failover-timeout): it gives up and may start again
//     after twice failover-timeout.
//   - The others learn the new master from its hello messages (every 2 s,
//     through an instance both reach) and switch too. A node's Sentinel
//     client dials the master the first Sentinel it reaches names, and
//     reconnects when that Sentinel switches (+switch-master) or its
//     connection fails.
//   - SENTINEL FAILOVER (a forced failover) starts one at once, with no
//     down-after wait and no votes: the old master keeps running and
//     takes writes until a Sentinel that switched has seen it for 8 s
//     (four hello periods) and turns it into a replica.
//   - The master's run ID comes from its INFO, every 10 s (every second
//     while it is down or in a failover): for that long after a restart
//     it is the old one.
type sentinels struct {
	d   *deployment
	cfg SentinelConfig
	all []*sentinel
	// nodeOK reports whether node i's network reaches Sentinel s (the
	// run's partitions); onSwitch is told of Sentinel s's +switch-master.
	nodeOK   func(i, s int) bool
	onSwitch func(s int)
}

// sentinel is one Sentinel and its view of the master.
type sentinel struct {
	i         int
	addr      string
	awayUntil time.Duration
	// masterCut: it cannot reach host h until masterCut[h] (Sentinels
	// that disagree). reached[h]: when it last reached host h (its link's
	// last reply), for the replicas its failover waits for.
	masterCut map[int]time.Duration
	reached   map[int]time.Duration

	master *host  // the master in its configuration
	runID  string // the master's run_id from its last INFO ("" before one)
	infoAt time.Duration
	epoch  int // the configuration's epoch
	// The link to the master: act_ping_time (0: none pending),
	// last_ping_time, last_pong_time, last_avail_time, its connection
	// time, and whether it is disconnected.
	act, lastPing, lastPong, lastAvail, connAt time.Duration
	disconnected                               bool
	sdown, odown                               bool
	sdownSince                                 time.Duration
	// Replies of the others to is-master-down-by-addr: when j last said
	// the master is down (-1: it did not), when j replied, and j's vote.
	downAt, repliedAt, askedAt map[int]time.Duration
	vote                       map[int]vote
	// Its own vote and epoch.
	currentEpoch int
	voted        vote
	// failoverStart is failover_start_time: a new failover waits twice
	// failover-timeout after it.
	failoverStart time.Duration
	failover      *failover
	nextHello     time.Duration
	// sawOld: since when it has seen an old master that still reports
	// itself master (it turns it into a replica 8 s later); sawRogue the
	// same of a promoted replica no Sentinel names.
	sawOld, sawRogue time.Duration
}

type vote struct{ epoch, leader int }

// failover is one in progress at its leader.
type failover struct {
	epoch   int
	state   int
	since   time.Duration // when the state began
	forced  bool
	promote *host
	// told: the replicas sent REPLICAOF (or already following the
	// promoted one); done: those it saw in sync, or left out.
	told, done map[*host]bool
	end        time.Duration // when it sees them in sync
}

const (
	foWaitStart = iota
	foSelect
	foSendNoOne
	foWaitPromotion
	foReconf
)

const (
	sentinelTick        = 100 * time.Millisecond
	sentinelAskPeriod   = time.Second
	sentinelInfoPeriod  = 10 * time.Second
	sentinelHelloPeriod = 2 * time.Second
	// sentinelMinReconnect: a link is not closed for a pending PING
	// sooner than this after it connected.
	sentinelMinReconnect = 15 * time.Second
)

func newSentinels(d *deployment, cfg SentinelConfig) *sentinels {
	ss := &sentinels{d: d, cfg: cfg}
	for i := range cfg.Count {
		s := &sentinel{i: i, addr: fmt.Sprintf("10.0.1.%d:26379", 10+i), masterCut: map[int]time.Duration{}, reached: map[int]time.Duration{},
			master: d.m, runID: d.m.runID, epoch: 0, downAt: map[int]time.Duration{}, repliedAt: map[int]time.Duration{},
			askedAt: map[int]time.Duration{}, vote: map[int]vote{}, failoverStart: -time.Hour, nextHello: time.Duration(i) * 700 * time.Millisecond}
		ss.all = append(ss.all, s)
	}
	return ss
}

// start runs the Sentinels' timer.
func (ss *sentinels) start() {
	var tick func()
	tick = func() {
		ss.tick()
		ss.d.w.atMid(ss.d.w.now+sentinelTick, tick)
	}
	ss.d.w.atMid(time.Duration(ss.d.rng.Int64N(int64(sentinelTick))), tick)
}

func (ss *sentinels) downAfter() time.Duration { return ss.cfg.DownAfter }

func (ss *sentinels) pingPeriod() time.Duration { return min(ss.cfg.DownAfter, time.Second) }

// reaches reports whether Sentinel s reaches host h now.
func (ss *sentinels) reaches(s *sentinel, h *host) bool {
	now := ss.d.w.now
	return s.awayUntil <= now && ss.d.up(h) && h.sentinelCut <= now && s.masterCut[h.i] <= now
}

// running reports whether h runs as a master now (the master, or the old
// master while it runs): what its INFO says of its role.
func (ss *sentinels) running(h *host) bool {
	d := ss.d
	return h == d.m || d.old != nil && d.old.h == h
}

func (ss *sentinels) tick() {
	now := ss.d.w.now
	for _, s := range ss.all {
		if s.awayUntil > now {
			continue
		}
		back := s.awayUntil > 0
		if back { // back from a restart: new links, its failover lost
			s.awayUntil = 0
			ss.newLink(s)
			s.failover = nil
			s.runID = ""
		}
		for _, h := range ss.d.hosts {
			if back || ss.reaches(s, h) { // a new link counts as a reply (createInstanceLink)
				s.reached[h.i] = now
			}
		}
		ss.tickMaster(s)
	}
	for _, s := range ss.all {
		if s.awayUntil <= now && now >= s.nextHello {
			s.nextHello = now + sentinelHelloPeriod
			ss.hello(s)
		}
	}
	ss.fixReplicas()
}

// newLink is a new link to the master (createInstanceLink): a PING counts
// as pending from now until the first reply.
func (ss *sentinels) newLink(s *sentinel) {
	now := ss.d.w.now
	s.act, s.lastPing, s.lastPong, s.lastAvail, s.connAt = now, 0, now, now, now
	s.disconnected = true
	s.sdown, s.odown = false, false
}

func (ss *sentinels) tickMaster(s *sentinel) {
	now, m := ss.d.w.now, s.master
	reach := ss.reaches(s, m)
	if !s.disconnected && !ss.d.up(m) {
		s.disconnected = true // the process stopped: the connection is reset
	}
	if s.disconnected && reach {
		s.disconnected, s.connAt = false, now
		ss.ping(s, reach)
	}
	infoPeriod := sentinelInfoPeriod
	if s.sdown || s.failover != nil {
		infoPeriod = time.Second
	}
	if !s.disconnected && reach && (s.runID == "" || now-s.infoAt >= infoPeriod) {
		s.runID, s.infoAt = m.runID, now
	}
	period := ss.pingPeriod()
	if !s.disconnected && now-s.lastPong > period && now-s.lastPing > period/2 {
		ss.ping(s, reach)
	}
	da := ss.downAfter()
	if !s.disconnected && now-s.connAt > sentinelMinReconnect && s.act != 0 && now-s.act > da/2 && now-s.lastPong > da/2 {
		s.disconnected = true
	}
	var elapsed time.Duration
	if s.act != 0 {
		elapsed = now - s.act
	} else if s.disconnected {
		elapsed = now - s.lastAvail
	}
	down := elapsed > da
	if down != s.sdown {
		s.sdownSince = now
		ss.d.log("sentinel %s: %s s_down %v", s.addr, m.addr, down)
	}
	s.sdown = down
	// Ask the others (their "down" counts for 5 s).
	for _, j := range ss.all {
		if j == s {
			continue
		}
		if now-s.repliedAt[j.i] > 5*sentinelAskPeriod {
			delete(s.downAt, j.i)
			delete(s.vote, j.i)
		}
	}
	if s.sdown {
		ss.ask(s, false)
	}
	count := 0
	if s.sdown {
		count = 1
		for _, at := range s.downAt {
			if at >= 0 {
				count++
			}
		}
	}
	s.odown = s.sdown && count >= ss.cfg.Quorum
	if s.odown && s.failover == nil && now-s.failoverStart >= 2*ss.cfg.FailoverTimeout {
		ss.startFailover(s, false)
	}
	if s.failover != nil {
		ss.step(s)
	}
}

// ping sends a PING; the master answers at once when reached.
func (ss *sentinels) ping(s *sentinel, reach bool) {
	now := ss.d.w.now
	s.lastPing = now
	if s.act == 0 {
		s.act = now
	}
	if reach {
		s.lastAvail, s.act, s.lastPong = now, 0, now
	}
}

// ask sends is-master-down-by-addr to the others: each answers whether it
// sees s's master down itself and, when s runs a failover, gives its vote.
func (ss *sentinels) ask(s *sentinel, forced bool) {
	now := ss.d.w.now
	for _, j := range ss.all {
		if j == s || j.awayUntil > now {
			continue
		}
		if !forced && now-s.askedAt[j.i] < sentinelAskPeriod {
			continue
		}
		s.askedAt[j.i], s.repliedAt[j.i] = now, now
		same := j.master == s.master
		if same && j.sdown {
			s.downAt[j.i] = now
		} else {
			s.downAt[j.i] = -1
		}
		if s.failover != nil && same {
			s.vote[j.i] = ss.voteFor(j, s.failover.epoch, s.i)
		}
	}
}

// voteFor is Sentinel j's vote when asked by leader for epoch: the first
// that asks in an epoch gets it.
func (ss *sentinels) voteFor(j *sentinel, epoch, leader int) vote {
	if epoch > j.currentEpoch {
		j.currentEpoch = epoch
	}
	if j.voted.epoch < epoch && j.currentEpoch <= epoch {
		j.voted = vote{epoch: j.currentEpoch, leader: leader}
		if leader != j.i {
			j.failoverStart = ss.d.w.now + time.Duration(ss.d.rng.Int64N(int64(time.Second)))
		}
	}
	return j.voted
}

func (ss *sentinels) startFailover(s *sentinel, forced bool) {
	now := ss.d.w.now
	s.currentEpoch++
	s.failover = &failover{epoch: s.currentEpoch, state: foWaitStart, since: now, forced: forced}
	s.failoverStart = now + time.Duration(ss.d.rng.Int64N(int64(time.Second)))
	ss.d.log("sentinel %s: failover of %s started (epoch %d%s)", s.addr, s.master.addr, s.currentEpoch,
		map[bool]string{true: ", forced", false: ""}[forced])
	if s.sdown {
		ss.ask(s, true)
	}
}

// leader is the leader of epoch as s counts the votes (its own for the
// most voted, else for itself), or -1 without a majority of the
// Sentinels and the quorum (sentinelGetLeader).
func (ss *sentinels) leader(s *sentinel, epoch int) int {
	counts := map[int]int{}
	for _, v := range s.vote {
		if v.epoch == epoch {
			counts[v.leader]++
		}
	}
	most := func() (int, int) {
		winner, n := -1, 0
		for _, j := range ss.all {
			if counts[j.i] > n {
				winner, n = j.i, counts[j.i]
			}
		}
		return winner, n
	}
	winner, _ := most()
	if winner < 0 {
		winner = s.i
	}
	if mine := ss.voteFor(s, epoch, winner); mine.epoch == epoch {
		counts[mine.leader]++
	}
	winner, n := most()
	if n < len(ss.all)/2+1 || n < ss.cfg.Quorum {
		return -1
	}
	return winner
}

// step runs s's failover state machine.
func (ss *sentinels) step(s *sentinel) {
	now, f, d := ss.d.w.now, s.failover, ss.d
	abort := func(why string) {
		d.log("sentinel %s: failover aborted: %s", s.addr, why)
		s.failover = nil
	}
	switch f.state {
	case foWaitStart:
		if !f.forced && ss.leader(s, f.epoch) != s.i {
			if now-s.failoverStart > min(10*time.Second, ss.cfg.FailoverTimeout) {
				abort("not elected")
			}
			return
		}
		f.state, f.since = foSelect, now
	case foSelect:
		h := ss.selectReplica(s)
		if h == nil {
			abort("no good replica")
			return
		}
		f.promote, f.state, f.since = h, foSendNoOne, now
	case foSendNoOne:
		if f.promote == d.m { // a master already: taken as it is
			f.state, f.since = foWaitPromotion, now
			return
		}
		if s.master != d.m {
			// Another Sentinel's failover replaced the master first (a
			// forced one needs no votes). Sentinel would promote a second
			// master and turn it back into a replica once it learns the
			// other's configuration; the simulator gives up instead.
			abort("the master was replaced meanwhile")
			return
		}
		if !ss.reaches(s, f.promote) {
			if now-f.since > ss.cfg.FailoverTimeout {
				abort("the replica is unreachable")
			}
			return
		}
		ss.promote(s, f.promote)
		f.state, f.since = foWaitPromotion, now+time.Duration(d.rng.Int64N(int64(time.Second)))
	case foWaitPromotion:
		if now < f.since { // its next INFO shows the role
			return
		}
		f.state, f.since = foReconf, now
	case foReconf:
		if ss.reconfigure(s) {
			return
		}
		if f.end == 0 { // their INFO says so within a second
			f.end = now + time.Duration(d.rng.Int64N(int64(time.Second)))
		}
		if now >= f.end {
			ss.switchTo(s, f.promote, f.epoch)
		}
	}
}

// reconfigure tells the replicas of s's failover to follow the promoted
// one and reports whether the failover stays in progress
// (sentinelFailoverReconfNextSlave, sentinelFailoverDetectEnd): until
// failover-timeout, while a replica (not the promoted one, not the old
// master) is neither in sync with the promoted one nor subjectively down,
// unreached by s for longer than down-after. A replica s does not reach
// is sent REPLICAOF once it does. One in four told does not follow (its
// REPLICAOF lost on the way): it is left out of this failover and
// pointed at the master failover-timeout later (fixReplicas).
func (ss *sentinels) reconfigure(s *sentinel) bool {
	now, f, d := ss.d.w.now, s.failover, ss.d
	if now-f.since >= ss.cfg.FailoverTimeout {
		return false
	}
	if f.told == nil {
		f.told, f.done = map[*host]bool{}, map[*host]bool{}
	}
	open := false
	for _, o := range d.replicas() {
		if o == f.promote || o == s.master || d.old != nil && o == d.old.h || f.done[o] {
			continue
		}
		reached := ss.reaches(s, o)
		sdown := !reached && now-s.reached[o.i] > ss.downAfter()
		switch {
		case f.told[o] || o.follows == d.srv:
			f.told[o] = true
			if o.follows == d.srv && now >= o.online && reached {
				f.done[o] = true
				continue
			}
		case !reached:
		case d.rng.IntN(4) == 0:
			d.log("sentinel %s: %s does not follow the promoted replica", s.addr, o.addr)
			o.confAt = now
			f.done[o] = true
			continue
		default:
			partial := o.replID == f.promote.replID && o.data != nil && o.data.Offset() <= d.srv.Offset()
			d.attach(o, d.srv, !partial)
			f.told[o] = true
			continue
		}
		open = open || !sdown
	}
	return open
}

// selectReplica is the replica s would promote (sentinelSelectSlave).
func (ss *sentinels) selectReplica(s *sentinel) *host {
	now, d := ss.d.w.now, ss.d
	maxDown := 10 * ss.downAfter()
	if s.sdown {
		maxDown += now - s.sdownSince
	}
	var best *host
	for _, h := range d.hosts {
		// An old master is not a replica; the master is one to a Sentinel
		// that does not name it (a replica another's unfinished failover
		// promoted, reporting role master).
		if h == s.master || !ss.reaches(s, h) || ss.running(h) && h != d.m {
			continue
		}
		if since := d.linkDownSince(h); since >= 0 && h != d.m && now-since > maxDown {
			continue
		}
		if best == nil || d.offsetOf(h) > d.offsetOf(best) || d.offsetOf(h) == d.offsetOf(best) && h.runID < best.runID {
			best = h
		}
	}
	return best
}

// promote is the leader's REPLICAOF NO ONE to h. The old master keeps
// running while its process runs, written to by the nodes that reach it
// until their Sentinel switches (or a Sentinel turns it into a replica).
func (ss *sentinels) promote(s *sentinel, h *host) {
	d := ss.d
	old := d.m
	p := promotion{stay: true}
	if d.up(old) { // the nodes connected to it go on writing to it (run.route)
		p.keep, p.end = true, d.w.limit
	} else {
		p.back = old.downUntil
	}
	d.promote(h, p)
	d.log("sentinel %s promoted %s", s.addr, h.addr)
}

// switchTo makes s's configuration name master h from epoch on; the nodes
// subscribed to s reconnect to it.
func (ss *sentinels) switchTo(s *sentinel, h *host, epoch int) {
	d := ss.d
	s.master, s.epoch, s.runID, s.failover, s.sawOld = h, epoch, "", nil, 0
	s.failoverStart = -time.Hour // a new master may fail over at once (sentinelResetMaster)
	s.downAt, s.vote = map[int]time.Duration{}, map[int]vote{}
	ss.newLink(s)
	s.nextHello = d.w.now
	if epoch > s.currentEpoch {
		s.currentEpoch = epoch
	}
	if ss.onSwitch != nil {
		ss.onSwitch(s.i)
	}
}

// masterAddr is what s answers to SENTINEL GET-MASTER-ADDR-BY-NAME: the
// replica it promoted once its failover reconfigures the others, else
// the master of its configuration.
func (ss *sentinels) masterAddr(s *sentinel) *host {
	if f := s.failover; f != nil && f.state >= foReconf {
		return f.promote
	}
	return s.master
}

// hello spreads s's configuration to the Sentinels that share an instance
// with it; and a Sentinel that switched turns an old master that still
// reports itself master into a replica once it has seen it for 8 s.
func (ss *sentinels) hello(s *sentinel) {
	d := ss.d
	for _, j := range ss.all {
		if j == s || j.awayUntil > d.w.now || j.epoch >= s.epoch {
			continue
		}
		for _, h := range d.hosts {
			if ss.reaches(s, h) && ss.reaches(j, h) {
				d.log("sentinel %s learns master %s from %s", j.addr, s.master.addr, s.addr)
				ss.switchTo(j, s.master, s.epoch)
				break
			}
		}
	}
}

// fixReplicas: a Sentinel with the current configuration turns an old
// master into a replica 8 s after it first sees it, and points a replica
// that follows another master (or none) at the master once its
// configuration has not changed for failover-timeout.
func (ss *sentinels) fixReplicas() {
	d, now := ss.d, ss.d.w.now
	named := false // does a Sentinel name the master, or promote it?
	for _, s := range ss.all {
		named = named || s.awayUntil <= now && (s.master == d.m || s.failover != nil && s.failover.promote == d.m && s.failover.state >= foWaitPromotion)
	}
	for _, s := range ss.all {
		if o := d.old; o != nil && !named && s.awayUntil <= now && s.master == o.h && ss.reaches(s, d.m) {
			// A replica promoted by a failover its leader left unfinished
			// (it went away): no Sentinel names it, so they turn it back
			// into a replica once they have seen it report role master for
			// 8 s.
			if s.sawRogue == 0 {
				s.sawRogue = now
			} else if now-s.sawRogue >= 4*sentinelHelloPeriod {
				d.log("sentinel %s turns %s, promoted by an unfinished failover, back into a replica", s.addr, d.m.addr)
				d.revert()
				return
			}
		} else {
			s.sawRogue = 0
		}
		if s.awayUntil > now || s.master != d.m {
			continue
		}
		if o := d.old; o != nil && ss.reaches(s, o.h) {
			if s.sawOld == 0 {
				s.sawOld = now
			} else if now-s.sawOld >= 4*sentinelHelloPeriod {
				d.log("sentinel %s turns old master %s into a replica", s.addr, o.h.addr)
				d.endOld()
			}
		} else {
			s.sawOld = 0
		}
		for _, h := range d.replicas() {
			if h.follows != d.srv && d.up(h) && ss.reaches(s, h) && now-h.confAt >= ss.cfg.FailoverTimeout &&
				(d.old == nil || h != d.old.h) {
				d.attach(h, d.srv, true)
			}
		}
	}
}

// nodeReaches reports whether node i reaches Sentinel s now.
func (ss *sentinels) nodeReaches(i int, s *sentinel) bool {
	return s.awayUntil <= ss.d.w.now && (ss.nodeOK == nil || ss.nodeOK(i, s.i))
}

// flags is SENTINEL MASTER's flags field, in sentinel.c's order.
func (s *sentinel) flags() string {
	var f []string
	if s.sdown {
		f = append(f, "s_down")
	}
	if s.odown {
		f = append(f, "o_down")
	}
	f = append(f, "master")
	if s.disconnected {
		f = append(f, "disconnected")
	}
	if s.failover != nil {
		f = append(f, "failover_in_progress")
	}
	return strings.Join(f, ",")
}

// views are the answers of every Sentinel to node i's SENTINEL MASTER,
// now.
func (ss *sentinels) views(i int) []replwait.SentinelView {
	now := ss.d.w.now
	out := make([]replwait.SentinelView, 0, len(ss.all))
	for _, s := range ss.all {
		v := replwait.SentinelView{Sentinel: s.addr}
		if !ss.nodeReaches(i, s) {
			v.Err = fmt.Errorf("SENTINEL MASTER sim: dial tcp %s: i/o timeout", s.addr)
			out = append(out, v)
			continue
		}
		v.MasterAddr, v.RunID, v.Flags, v.DownAfter, v.Known = s.master.addr, s.runID, s.flags(), ss.downAfter(), len(ss.all)
		// Every server but the one it names is a replica it knows (as
		// selectReplica may pick any of them): Sentinel keeps a replica
		// it once saw until SENTINEL RESET, which the run never sends.
		v.Replicas = len(ss.d.hosts) - 1
		// A Sentinel's ID is its address here; it knows every other one.
		v.ID = s.addr
		for _, o := range ss.all {
			if o != s {
				v.Others = append(v.Others, o.addr)
			}
		}
		var pending time.Duration
		if s.act != 0 {
			pending = now - s.act
		}
		v.Age = max(pending, now-s.lastAvail)
		out = append(out, v)
	}
	return out
}

// forceFailover is SENTINEL FAILOVER on Sentinel s, which the operator
// runs on one Sentinel at a time: not while another's failover is in
// progress (the model's FIPOK; two forced failovers at once promote two
// replicas in one epoch, and docs/guarantees.md names it).
func (ss *sentinels) forceFailover(s *sentinel) {
	inProgress := false
	for _, o := range ss.all {
		inProgress = inProgress || o.failover != nil
	}
	if s.awayUntil > ss.d.w.now || inProgress || s.master != ss.d.m || ss.selectReplica(s) == nil {
		ss.d.log("sentinel %s: SENTINEL FAILOVER refused", s.addr)
		return
	}
	ss.startFailover(s, true)
}

// procSentinels is what a node of a Sentinel deployment is given as its
// Sentinels (coord.Options.Sentinels). The Waiter asks Views on a
// goroutine of its own, beside the script; the run answers it on its one
// goroutine when the script's pipeline reaches the network (run.call), so
// that the answer is a function of the seed. The second check a Waiter
// sends after a grant's reply, when the first one's bound leaves the
// grant out, it asks on the process's own goroutine: the run arms recheck
// for it as it counts the first check (run.ruleCheck, which decides as
// the Waiter does), and Views runs it.
type procSentinels struct {
	req     chan chan []replwait.SentinelView
	known   replwait.ReplicaMemory // as coord.SentinelSet's, per process
	recheck func() []replwait.SentinelView
}

func newProcSentinels() *procSentinels {
	return &procSentinels{req: make(chan chan []replwait.SentinelView, 1)}
}

// Views asks the run for the Sentinels' answers and waits for them.
func (p *procSentinels) Views(ctx context.Context) []replwait.SentinelView {
	if f := p.recheck; f != nil {
		p.recheck = nil
		return p.known.Fill(f())
	}
	reply := make(chan []replwait.SentinelView, 1)
	select {
	case p.req <- reply:
	case <-ctx.Done():
		return nil
	}
	select {
	case v := <-reply:
		return p.known.Fill(slices.Clone(v))
	case <-ctx.Done():
		return nil
	}
}

// answer gives the pending Views call its answer: the run calls it where
// a Waiter's check reaches the Sentinels.
func (p *procSentinels) answer(ctx context.Context, views []replwait.SentinelView) {
	select {
	case reply := <-p.req:
		reply <- views
	case <-ctx.Done():
	}
}
