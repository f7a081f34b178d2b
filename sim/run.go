package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/simredis"
	"github.com/flaked/flaked/node"
)

// epoch is the layout's epoch; runs start a year after it.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Result is what one run found.
type Result struct {
	IDs     int            // IDs issued and checked
	Faults  map[string]int // faults injected, by kind
	Virtual time.Duration  // simulated time
	Scripts uint64         // script calls Redis ran
	// StraysRefused counts starts with another layout refused (a layout
	// mismatch); StraysIn those let in, each a Failure
	// (KindStrayIn): a stray that started in flake mode (it holds a lease)
	// or issued an ID. Only flaked init makes a registry, and only
	// processes that ran under it restore one. StraysStarted counts strays
	// that started in counter mode without issuing yet (refused at their
	// first segment: counter.lua compares the layout, or NOREGISTRY).
	StraysRefused, StraysIn, StraysStarted int
	// NoRegistry counts starts refused because the namespace had no
	// registry (coord.ErrNoRegistry: Redis lost it, and the process never
	// ran under it), retried by the supervisor.
	NoRegistry int
	// SeqValues and SeqRestores count the sequence client's values and
	// operator restores (Options.Sequences; seq.go).
	SeqValues, SeqRestores int
	Failure                *Failure // nil when every ID was unique and increasing
	// Violations counts failing IDs: every one under Options.CountAll,
	// else those of the batch that failed first.
	Violations int
	// Coverage: the script branches and mode transitions the run reached.
	Coverage Coverage
}

// Failure is the first violation a run found.
type Failure struct {
	Kind   string // "duplicate", "not increasing", "stray let in", "panic"
	ID     uint64
	Parts  flake.Parts
	First  Issue // who issued ID first (or the previous ID of the node)
	Second Issue
	Detail string
}

// Issue is one issued ID and who issued it.
type Issue struct {
	ID   uint64
	Node int
	Run  int // the node's process: 1 for the first, +1 per restart
	At   time.Duration
	Mode string
	// Stray: the process ran with another layout than the fleet's.
	Stray bool
}

func (f *Failure) String() string {
	switch {
	case f.Kind == "panic":
		return "panic: " + f.Detail
	case f.Kind == KindStrayIn && f.ID == 0:
		return fmt.Sprintf("%s: %v: %s", f.Kind, f.Second, f.Detail)
	case f.Detail != "":
		return fmt.Sprintf("%s ID %d (tick %d, sequence %d, machine ID %d in the fleet's layout): %v: %s",
			f.Kind, f.ID, f.Parts.Tick, f.Parts.Sequence, f.Parts.MachineID, f.Second, f.Detail)
	}
	return fmt.Sprintf("%s ID %d (tick %d, sequence %d, machine ID %d in the fleet's layout): %v, then %v",
		f.Kind, f.ID, f.Parts.Tick, f.Parts.Sequence, f.Parts.MachineID, f.First, f.Second)
}

// KindStrayIn is the failure of a process with another layout than the
// fleet's that started: its IDs would collide with the fleet's.
const KindStrayIn = "stray let in"

func (is Issue) String() string {
	s := fmt.Sprintf("node %d process %d in %s mode at %v", is.Node, is.Run, is.Mode, is.At.Round(time.Millisecond))
	if is.Stray {
		s += " (with another layout)"
	}
	return s
}

// run is one schedule being run.
type run struct {
	s       Schedule
	w       *world
	layout  flake.Layout
	fs      *memFS
	redis   *deployment
	slots   []*slot    // per node
	work    *rand.Rand // the workload
	net     *rand.Rand // lost requests and replies
	rewrite *rand.Rand // keys rewritten by hand
	opts    Options
	seen    map[uint64]uint32 // ID -> index in batches
	batches []batch
	res     Result
	dst     [128]uint64 // the IDs of one batch
	log     zerolog.Logger
	mutants map[string]string // script SHA1 -> text the server runs instead
	blocks  bool              // Options.Blocks
	seq     *seqWork          // the sequence client (seq.go), nil without Options.Sequences
	seqOn   bool
	tap     *transitionTap // counts mode transitions from the log
	rules   map[string]int // the replica rules' outcomes (rules.go)
}

// slot is one node across its processes: its disk, its machine's clock,
// its network.
type slot struct {
	i        int
	cfg      NodeConfig
	path     string
	wall     time.Duration // the machine's wall-clock offset
	cur      *proc         // the running process, or nil
	runs     int
	backups  [][]byte // old copies of the state file
	netUntil map[string]time.Duration
	delay    time.Duration
	stray    bool // the next process runs with another layout
	// sentinelCut: it cannot reach Sentinel s until sentinelCut[s].
	sentinelCut map[int]time.Duration
}

// proc is one process of a node.
type proc struct {
	slot        *slot
	run         int
	clock       *procClock
	node        *node.Node
	dead        bool
	pausedUntil time.Duration
	last        uint64
	stray       bool // runs with another layout
	conns       map[*simredis.Server]*simredis.Conn
	// pinned is the server its last script ran on: the WAIT after a
	// script goes on the script's connection (internal/replwait).
	pinned *simredis.Server
	// sentinels is what its Waiters ask (nil without Sentinels), check
	// the check in flight, lastMark the mark its last script left.
	sentinels *procSentinels
	check     *sentinelCheck
	lastMark  int
	// ranReplaced: its last script ran on an old master after a replica
	// was promoted in its place, at ranAt.
	ranReplaced bool
	ranAt       time.Duration
	// unwaited: that script granted, and neither its WAIT nor the
	// Sentinels' word has come yet.
	unwaited bool
	// With Sentinels, on is the server its connection goes to (nil: it
	// dials, asking a Sentinel for the master first) and sub the Sentinel
	// it asked, whose +switch-master it follows.
	on  *simredis.Server
	sub int
}

// conn is the process's connection to srv (WAIT waits for its writes).
func (p *proc) conn(srv *simredis.Server) *simredis.Conn {
	c := p.conns[srv]
	if c == nil {
		if p.conns == nil {
			p.conns = map[*simredis.Server]*simredis.Conn{}
		}
		c = &simredis.Conn{}
		p.conns[srv] = c
	}
	return c
}

// Run runs a schedule and checks every ID it issues.
func Run(s Schedule, opts Options) (res Result) {
	r := newRun(s, opts)
	defer func() {
		if p := recover(); p != nil {
			r.res.Failure = &Failure{Kind: "panic", Detail: fmt.Sprint(p)}
			res = r.res
		}
	}()
	r.start()
	r.w.runUntil(s.Duration)
	for _, sl := range r.slots {
		if p := sl.cur; p != nil && p.unwaited && !p.dead {
			r.ruleUnwaited(p)
		}
	}
	r.res.Virtual = r.w.now
	r.res.Scripts = r.redis.scriptCalls()
	r.res.Coverage = Coverage{Branches: r.redis.coverage(), Transitions: r.tap.seen, Rules: r.rules}
	return r.res
}

// Options of Run.
type Options struct {
	// Log receives the nodes' logs (zerolog's JSON lines; nil: none), on
	// virtual time (replays).
	Log io.Writer
	// Mutation re-introduces a bug on purpose (Mutations); "" for none.
	Mutation string
	// Blocks makes every other batch a client's block (NEXTBLOCK;
	// blocks.go) instead of a NextIDs call.
	Blocks bool
	// Sequences adds a client of named sequences (seq.go), on a random
	// stream of its own.
	Sequences bool
	// CountAll goes on after a failure, counting every duplicate and ID
	// out of order (exposure): Failure is the first.
	CountAll bool
}

func newRun(s Schedule, opts Options) *run {
	lay, err := s.Layout()
	if err != nil {
		panic(err)
	}
	w := &world{epoch: epoch.AddDate(1, 0, 0), limit: s.Duration + time.Hour}
	r := &run{
		s: s, w: w, layout: lay, fs: newMemFS(),
		work:    rand.New(rand.NewPCG(s.Seed, 0x3011)),
		net:     rand.New(rand.NewPCG(s.Seed, 0x4e7)),
		rewrite: rand.New(rand.NewPCG(s.Seed, 0x7e3)),
		opts:    opts,
		seen:    make(map[uint64]uint32, 8192),
		res:     Result{Faults: map[string]int{}},
		blocks:  opts.Blocks,
	}
	// The log goes to the transition counter (info and up: what it reads)
	// and to opts.Log (everything).
	r.tap = &transitionTap{seen: map[string]int{}}
	level, out := zerolog.InfoLevel, io.Writer(r.tap)
	if opts.Log != nil {
		level, out = zerolog.DebugLevel, zerolog.MultiLevelWriter(r.tap, opts.Log)
	}
	r.log = zerolog.New(out).Level(level).Hook(zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) {
		e.Str("t", w.now.Round(time.Millisecond).String())
	}))
	if opts.Mutation != "" {
		m, err := FindMutation(opts.Mutation)
		if err != nil {
			panic(err)
		}
		r.mutants = m.mutants() // a Go mutation's switch is the caller's (Mutation.Enable)
	}
	r.rules = map[string]int{}
	r.redis = newDeployment(w, rand.New(rand.NewPCG(s.Seed, 0x4ed15)), &r.s)
	if opts.Log != nil {
		r.redis.log = func(format string, args ...any) { r.log.Debug().Msgf("deployment: "+format, args...) }
	}
	if s.Sentinel != nil {
		ss := newSentinels(r.redis, *s.Sentinel)
		ss.nodeOK = func(i, k int) bool {
			sl := r.slots[i]
			return sl.netUntil[FaultPartition] <= w.now && sl.sentinelCut[k] <= w.now
		}
		ss.onSwitch = r.switched
		r.redis.sentinels = ss
	}
	r.seqOn = opts.Sequences
	for i, c := range s.Nodes {
		r.slots = append(r.slots, &slot{i: i, cfg: c, path: fmt.Sprintf("/node%d/flaked.state", i), netUntil: map[string]time.Duration{},
			sentinelCut: map[int]time.Duration{}})
	}
	return r
}

func (r *run) start() {
	w := r.w
	// flaked init, then the deployment as it is configured (an INFO
	// refused at 0 refuses the nodes, not the init run before).
	if err := r.initRegistry(); err != nil {
		panic(fmt.Sprintf("sim: %v", err))
	}
	for _, f := range r.s.Faults {
		if f.At == 0 { // the deployment as it is configured: before any node starts
			r.inject(f)
		}
	}
	for _, sl := range r.slots {
		sl := sl
		w.at(time.Duration(sl.i)*7*time.Millisecond, nil, func() { r.startProc(sl) })
	}
	for _, f := range r.s.Faults {
		f := f
		switch {
		case f.At == 0:
		case midFault(f.Kind):
			w.atMid(f.At, func() { r.inject(f) })
		default:
			w.at(f.At, nil, func() { r.inject(f) })
		}
	}
	d := r.redis
	for _, h := range d.hosts {
		r.everyMid(h.period, func() { d.catchUp(h) })
	}
	if d.sentinels != nil {
		d.sentinels.start()
	} else {
		// Without Sentinels an operator points a replica left following
		// no master (or an old one) at the master after a while.
		r.everyMid(time.Second, func() {
			for _, h := range d.replicas() {
				if h.follows != d.srv && d.up(h) && r.w.now-h.confAt >= r.s.ReattachAfter && (d.old == nil || h != d.old.h) {
					d.attach(h, d.srv, true)
				}
			}
		})
	}
	r.every(r.s.SaveEvery, func() { r.redis.save() })
	r.every(5*time.Second, func() {
		r.redis.backup()
		for _, sl := range r.slots {
			if b, ok := r.fs.files[sl.path]; ok {
				sl.backups = append(sl.backups, b)
			}
		}
	})
	r.nextWork()
	if r.seqOn {
		r.startSeq()
	}
}

// every runs f every period, on the world.
func (r *run) every(period time.Duration, f func()) {
	var tick func()
	tick = func() {
		f()
		r.w.at(r.w.now+period, nil, tick)
	}
	r.w.at(period, nil, tick)
}

// everyMid runs f every period as the deployment's own timer (world.atMid).
func (r *run) everyMid(period time.Duration, f func()) {
	var tick func()
	tick = func() {
		f()
		r.w.atMid(r.w.now+period, tick)
	}
	r.w.atMid(period, tick)
}

// nextWork schedules the next batch of IDs: a node asks for 1-8 IDs every
// 50 ms on average, and now and then for a burst of up to 128, more than
// a tick's sequence holds, so generators run ahead of their clocks.
func (r *run) nextWork() {
	gap := time.Duration(r.work.ExpFloat64() * float64(50*time.Millisecond))
	i, n := r.work.IntN(len(r.slots)), 1+r.work.IntN(8)
	if r.work.IntN(20) == 0 {
		n = 16 + r.work.IntN(113)
	}
	r.w.at(r.w.now+gap, nil, func() {
		if p := r.slots[i].cur; p != nil && p.node != nil && !p.dead && p.pausedUntil <= r.w.now {
			r.issue(p, n)
		}
		if !r.w.halted {
			r.nextWork()
		}
	})
}

// batch is one NextIDs call: who issued its IDs, when, in which mode.
type batch struct {
	p    *proc
	at   time.Duration
	mode string
}

func (b batch) issue(id uint64) Issue {
	return Issue{ID: id, Node: b.p.slot.i, Run: b.p.run, At: b.at, Mode: b.mode, Stray: b.p.stray}
}

// issue asks p's node for n IDs, as a client with a 2 s timeout would,
// and checks them.
func (r *run) issue(p *proc, n int) {
	if r.blocks && len(r.batches)%2 == 1 {
		r.issueBlock(p, n)
		return
	}
	r.w.deadline = r.w.now + 2*time.Second
	dst := r.dst[:n]
	got, _ := p.node.NextIDs(context.Background(), dst)
	r.w.deadline = 0
	if got == 0 {
		return
	}
	r.batches = append(r.batches, batch{p: p, at: r.w.now, mode: p.node.Mode().String()})
	for _, id := range dst[:got] {
		r.check(id, uint32(len(r.batches)-1))
	}
}

// check checks one ID of batch bi: unique, and above its process's last.
func (r *run) check(id uint64, bi uint32) {
	r.res.IDs++
	b := r.batches[bi]
	if b.p.stray {
		// Whether or not this ID collides: the stray's layout must never
		// be stored, so it must never issue.
		r.res.StraysIn++
		r.fail(&Failure{Kind: KindStrayIn, ID: id, Parts: r.layout.Decompose(id), Second: b.issue(id),
			Detail: "a process with another layout than the fleet's issued it"})
		return
	}
	if prev, ok := r.seen[id]; ok {
		r.fail(&Failure{Kind: "duplicate", ID: id, Parts: r.layout.Decompose(id), First: r.batches[prev].issue(id), Second: b.issue(id)})
		return
	}
	r.seen[id] = bi
	p := b.p
	if id <= p.last {
		r.fail(&Failure{Kind: "not increasing", ID: id, Parts: r.layout.Decompose(id),
			First: r.batches[r.seen[p.last]].issue(p.last), Second: b.issue(id)})
		return
	}
	p.last = id
	r.checkShape(id, b)
}

// checkShape checks that an ID fits the fleet's width and, unless a stray
// issued it, carries a machine ID of the fleet's region.
func (r *run) checkShape(id uint64, b batch) {
	l := r.layout
	parts := l.Decompose(id)
	// The region's machine IDs from its definition, not from the code
	// under test (CounterMachineID is what the counter-fleet-wide
	// mutation breaks).
	lo := l.Region << (l.BitsMachineID - l.BitsRegion)
	hi := lo + 1<<(l.BitsMachineID-l.BitsRegion) - 1
	switch {
	case id > l.MaxID():
		r.fail(&Failure{Kind: "too wide", ID: id, Parts: parts, Second: b.issue(id),
			Detail: fmt.Sprintf("above the %d-bit layout's largest ID %d", l.BitsID(), l.MaxID())})
	case !b.p.stray && (parts.MachineID < lo || parts.MachineID > hi):
		r.fail(&Failure{Kind: "outside the region", ID: id, Parts: parts, Second: b.issue(id),
			Detail: fmt.Sprintf("region %d leases machine IDs %d..%d", l.Region, lo, hi)})
	}
}

func (r *run) fail(f *Failure) {
	r.res.Violations++
	if r.res.Failure == nil {
		r.res.Failure = f
		if !r.opts.CountAll {
			r.w.halt()
		}
	}
}

// startProc starts a new process of the node; if the node does not start
// (no machine ID free, Redis away), the supervisor tries again a second
// later, as systemd's Restart=on-failure would.
func (r *run) startProc(sl *slot) {
	if sl.cur != nil && !sl.cur.dead {
		return
	}
	sl.runs++
	p := &proc{slot: sl, run: sl.runs}
	p.clock = &procClock{w: r.w, p: p, wall: sl.wall, slack: r.s.Slack}
	sl.cur = p
	c := sl.cfg
	rnd := rand.NewChaCha8(seed32(r.s.Seed, uint64(sl.i), uint64(p.run)))
	lay := r.layout
	if sl.stray {
		p.stray = true
		st := lay.Settings()
		st.BitsSequence, st.BitsMachineID = st.BitsSequence-1, st.BitsMachineID+1
		lay, _ = st.Layout()
	}
	opts := node.Options{
		Redis: simredis.NewClient(func(ctx context.Context, args []string) (any, error) { return r.call(ctx, p, args) }),
		Registry: coord.Options{
			Namespace: namespace, Layout: lay, LeaseTTL: r.s.LeaseTTL, MaxSkew: r.s.MaxSkew,
			Owner:       coord.Owner{Host: fmt.Sprintf("node%d", sl.i), PID: p.run},
			MinReplicas: r.s.MinReplicas,
		},
		Counter:       fallback.Options{MinSegment: c.MinSegment, MaxSegment: c.MaxSegment, MaxLead: c.CounterLead},
		StateFile:     sl.path,
		StateFS:       r.fs.view(p),
		Mode:          c.Mode,
		MachineIDs:    c.MachineIDs,
		MaxLead:       c.MaxLead,
		ReserveAhead:  c.ReserveAhead,
		CheckInterval: c.CheckInterval,
		RetryInterval: c.RetryInterval,
		RecoverAfter:  c.RecoverAfter,
		Clock:         p.clock,
		Rand:          rnd,
		Logger:        r.log.With().Int("node", sl.i).Int("run", p.run).Logger(),
	}
	if r.redis.sentinels != nil {
		p.sentinels = newProcSentinels()
		opts.Registry.Sentinels = p.sentinels
	}
	n, err := node.New(context.Background(), opts)
	switch {
	case sl.stray && err == nil && n.Mode() == node.ModeFlake:
		// A failure at once, not only if its IDs happen to collide: a
		// claim accepted the stray's layout.
		r.res.StraysIn++
		r.fail(&Failure{Kind: KindStrayIn, Second: Issue{Node: sl.i, Run: p.run, At: r.w.now, Mode: n.Mode().String(), Stray: true},
			Detail: fmt.Sprintf("it leased machine IDs with layout %v; the fleet's is %v", lay, r.layout)})
	case sl.stray && err == nil:
		r.res.StraysStarted++ // check fails it at its first ID
	}
	// A layout mismatch: flake mode's claim, or counter mode's check.
	mismatch := errors.Is(err, coord.ErrLayoutMismatch) || errors.Is(err, fallback.ErrLayoutMismatch)
	if sl.stray && mismatch {
		r.res.StraysRefused++
	}
	if errors.Is(err, coord.ErrNoRegistry) {
		r.res.NoRegistry++
	}
	if err == nil || mismatch {
		sl.stray = false // it runs, or the operator sees why not and fixes the flags
	}
	if err != nil {
		if errors.Is(err, node.ErrInvalidOptions) || errors.Is(err, coord.ErrInvalidOptions) ||
			errors.Is(err, fallback.ErrInvalidOptions) {
			panic(fmt.Sprintf("sim: node %d options: %v", sl.i, err))
		}
		r.log.Debug().Err(err).Int("node", sl.i).Msg("start failed; retrying in 1s")
		p.dead = true
		r.w.at(r.w.now+time.Second, nil, func() { r.startProc(sl) })
		return
	}
	p.node = n
}

// seed32 makes a ChaCha8 seed from a few numbers.
func seed32(xs ...uint64) (s [32]byte) {
	for i, x := range xs {
		for b := range 8 {
			s[(i*8+b)%32] ^= byte(x >> (8 * b))
		}
	}
	return s
}

// call is one Redis command of process p, through its network: the
// request leaves with the first command of a pipeline (a round trip and
// the node's delay each way), the replies come back after the last. The
// commands of one pipeline go on one connection, to the server its first
// command reached, and so does the WAIT the Waiter sends after a script
// (internal/replwait): a grant delayed across the end of a split brain
// runs on the old master and waits there (seed 491 of the split-brain
// exposure gave a duplicate while its WAIT went to the promoted replica).
// A Waiter's Sentinel check goes out with its script's pipeline: the
// Sentinels answer it as the request reaches the network, a round trip
// before the grant's reply.
func (r *run) call(ctx context.Context, p *proc, args []string) (any, error) {
	sl, d := p.slot, r.redis
	if p.unwaited && !isServerRead(args) && !strings.EqualFold(args[0], "WAIT") {
		r.ruleUnwaited(p)
	}
	pl := simredis.PipelineOf(ctx)
	first, last := pl == nil || pl.Next == 0, pl == nil || pl.Next == len(pl.Cmds)-1
	check := first && r.checkDue(p, pl, args)
	if check {
		p.check = &sentinelCheck{sent: r.w.now}
	}
	answer := func() {
		if check {
			check = false
			p.check.views = d.sentinels.views(sl.i)
			p.sentinels.answer(ctx, p.check.views)
		}
	}
	now := r.w.now
	switch {
	case p.dead:
		answer()
		return nil, errors.New("redis: client is closed")
	case sl.netUntil[FaultPartition] > now:
		answer()
		return nil, errors.New("dial tcp 10.0.0.1:6379: connect: connection refused")
	}
	leg := r.s.RTT / 2
	if sl.netUntil[FaultDelay] > now {
		leg += sl.delay
	}
	if first {
		r.w.pass(p, leg)
	}
	answer()
	srv, h := r.route(p)
	if srv == nil {
		return nil, errors.New("redis: all sentinels specified in configuration are unreachable")
	}
	switch {
	case pl != nil:
		if pinned, ok := pl.Server.(*simredis.Server); ok {
			srv, h = pinned, d.hostOf(pinned)
		} else {
			pl.Server = srv
			if isScript(args) {
				p.pinned = srv
			}
		}
	case strings.EqualFold(args[0], "WAIT") && p.pinned != nil:
		srv, h = p.pinned, d.hostOf(p.pinned)
	}
	if !d.live(srv) || h.nodeCut[sl.i] > r.w.now {
		p.on = nil // go-redis closes the connection; the next call dials again
		return nil, errors.New("dial tcp 10.0.0.1:6379: connect: connection refused")
	}
	lossy := sl.netUntil[FaultLossy] > now
	if lossy && r.net.IntN(6) == 0 {
		p.on = nil
		return nil, errors.New("read tcp 10.0.0.2:40000->10.0.0.1:6379: i/o timeout")
	}
	slow := time.Duration(0)
	if h.slowUntil > r.w.now {
		slow = h.slow
		r.w.pass(p, slow)
	}
	isWait := strings.EqualFold(args[0], "WAIT") && len(args) == 3
	if isWait {
		took, acked := d.wait(srv, args)
		r.w.pass(p, took)
		acked()
	}
	if !d.live(srv) {
		p.on = nil
		return nil, errors.New("read tcp 10.0.0.2:40000->10.0.0.1:6379: read: connection reset by peer")
	}
	d.list(srv)
	var before markState
	if isScript(args) {
		before = markOf(srv)
	}
	v, err := srv.DoConn(p.conn(srv), r.mutate(args))
	if isWait {
		r.ruleWait(p, args, v)
	}
	if isScript(args) {
		p.ranReplaced, p.ranAt = srv != d.srv, r.w.now
		p.unwaited = p.ranReplaced && err == nil && granted(v)
		r.ruleMark(p, srv, before)
		if p.check != nil && pl != nil && pl.Next == 0 {
			p.check.reply, p.check.err = v, err
		}
	}
	if slow > 0 {
		r.w.pass(p, slow)
	}
	if last {
		r.w.pass(p, leg)
	}
	if lossy && r.net.IntN(6) == 0 {
		p.on = nil
		err = errors.New("read tcp 10.0.0.2:40000->10.0.0.1:6379: i/o timeout")
		v = nil
	}
	if last && pl != nil && p.check != nil && isServerRead(pl.Cmds[len(pl.Cmds)-1]) {
		r.ruleCheck(p, v, err)
	}
	return v, err
}

// route is the server p's next command goes to: without Sentinels, the
// one its node reaches (deployment.route); with Sentinels, the one its
// connection goes to, dialled when it has none: go-redis's Sentinel client
// asks the first Sentinel it reaches (starting from the node's own) for
// the master's address and subscribes to that one's +switch-master. nil
// when no Sentinel answers.
func (r *run) route(p *proc) (*simredis.Server, *host) {
	d := r.redis
	ss := d.sentinels
	if ss == nil {
		return d.route(p.slot.i)
	}
	if o := d.old; o != nil && r.w.now >= o.end {
		d.endOld()
	}
	if p.on == nil || !d.live(p.on) {
		p.on = nil
		i := p.slot.i
		for k := range ss.all {
			s := ss.all[(i+k)%len(ss.all)]
			if !ss.nodeReaches(i, s) {
				continue
			}
			p.sub = s.i
			h := ss.masterAddr(s)
			switch {
			case h == d.m:
				p.on = d.srv
			case d.old != nil && h == d.old.h:
				p.on = d.old.srv
			default:
				return nil, nil // the address a Sentinel gave is not a master: refused, or READONLY
			}
			break
		}
		if p.on == nil {
			return nil, nil
		}
	}
	return p.on, d.hostOf(p.on)
}

// switched is a Sentinel's +switch-master: the nodes whose client
// subscribed to it, and reach it, close their connections to any other
// master.
func (r *run) switched(s int) {
	d := r.redis
	for _, sl := range r.slots {
		if p := sl.cur; p != nil && p.sub == s && p.on != nil && p.on != d.srv && d.sentinels.nodeReaches(sl.i, d.sentinels.all[s]) {
			p.on = nil
		}
	}
}

// isScript reports whether args run a script.
func isScript(args []string) bool {
	return strings.EqualFold(args[0], "EVALSHA") || strings.EqualFold(args[0], "EVAL")
}

// granted reports whether a script's reply v is a grant ({"OK", ...}).
func granted(v any) bool {
	reply, ok := v.([]any)
	return ok && len(reply) > 0 && reply[0] == "OK"
}

// isServerRead reports whether args are the Waiter's read of the server
// that ran its script ({ns}:meta's server field).
func isServerRead(args []string) bool {
	return len(args) == 3 && strings.EqualFold(args[0], "HGET") && args[1] == metaKey && args[2] == "server"
}

// checkDue reports whether the pipeline args starts is a Waiter's grant
// whose Sentinel check is in flight: its first script call (EVALSHA; the
// EVAL after NOSCRIPT sends no second check) followed by the read of
// {ns}:meta's server field, from a process given Sentinels.
func (r *run) checkDue(p *proc, pl *simredis.Pipeline, args []string) bool {
	return p.sentinels != nil && pl != nil && len(pl.Cmds) == 2 && strings.EqualFold(args[0], "EVALSHA") &&
		isServerRead(pl.Cmds[1])
}

// inject applies one fault.
func (r *run) inject(f Fault) {
	r.res.Faults[f.Kind]++
	now := r.w.now
	d := r.redis
	if d.sentinels == nil || !r.injectSentinelRedis(f) {
		r.injectDeployment(f)
		if f.Kind == FaultFailover {
			d.failover(f)
		}
	}
	r.injectReplicas(f)
	switch f.Kind {
	case FaultRestartSaved:
		d.restart(d.saved)
	case FaultRestartClean:
		d.save() // SHUTDOWN saves first: nothing is lost
		d.restart(d.saved)
	case FaultRestartEmpty:
		d.restart(nil)
	case FaultRestoreOld:
		d.restart(d.oldest())
	case FaultRedisDown:
		d.down(d.m, now+f.For)
	case FaultRedisSlow:
		d.m.slowUntil, d.m.slow = max(d.m.slowUntil, now+f.For), f.Delay
	}
	if f.Node >= len(r.slots) {
		return
	}
	sl := r.slots[f.Node]
	switch f.Kind {
	case FaultPartition, FaultLossy:
		sl.netUntil[f.Kind] = max(sl.netUntil[f.Kind], now+f.For)
	case FaultDelay:
		sl.netUntil[f.Kind], sl.delay = max(sl.netUntil[f.Kind], now+f.For), f.Delay
	case FaultPause:
		if p := sl.cur; p != nil && !p.dead {
			// Events due meanwhile run a moment after the pause ends, so
			// the first request after it may come before them.
			p.pausedUntil = max(p.pausedUntil, now+f.For)
		}
	case FaultClockStep:
		sl.wall += f.Delay
		if p := sl.cur; p != nil {
			p.clock.wall = sl.wall
		}
	case FaultDiskFull:
		r.fs.failing[sl.path] = true
		r.w.at(now+f.For, nil, func() { delete(r.fs.failing, sl.path) })
	case FaultCrash, FaultStop:
		p := sl.cur
		if p == nil || p.dead {
			return
		}
		if f.Kind == FaultStop && p.node != nil {
			r.w.deadline = now + 10*time.Second
			_ = p.node.Close(context.Background())
			r.w.deadline = 0
		}
		p.dead = true
		sl.cur = nil
		r.w.at(r.w.now+f.For, nil, func() {
			r.prepareDisk(sl, f)
			sl.wall -= f.Back
			sl.stray = f.Layout
			r.startProc(sl)
		})
	}
}

// prepareDisk sets the state file a restarted node finds.
func (r *run) prepareDisk(sl *slot, f Fault) {
	switch f.State {
	case StateNone:
		delete(r.fs.files, sl.path)
	case StateCopy:
		if b, ok := r.fs.files[r.slots[f.From].path]; ok {
			r.fs.files[sl.path] = b
		}
	case StateBackup:
		if len(sl.backups) > 0 {
			r.fs.files[sl.path] = sl.backups[0]
		}
	}
}
