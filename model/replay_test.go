package model

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/simredis"
)

// The model's constants as the replay passes them to the scripts: one tick
// is one second (guard.lua's redisSkewMs, 1 s, is the model's SK = 1), the
// epoch is the Unix epoch, counter values have one sequence bit.
const (
	tickUs    = 1e6
	horizon   = 3
	lead      = 2
	segment   = 2
	counterID = 99
	machines  = 2
	// where each grant's reply carries the replicas count (coord's
	// claimNeedAt and renewNeedAt, fallback's counterNeedAt)
	claimNeedAt, renewNeedAt, counterNeedAt = 10, 5, 6
)

// replayFlags are the -D flags of the simulations: a fleet in flake and
// counter mode at once, bounds wider than the exhaustive checks (a random
// run goes deep rather than wide).
var replayFlags = []string{"-DM=2", "-DH=3", "-DLEAD=2", "-DSEG=2",
	"-DFLAKE", "-DCOUNTER", "-DTMAX=12", "-DMAXTOK=12", "-DMAXF=4"}

// replayConfigs are the fault configurations replayed, each with its
// process slots: two nodes and a clone of node 0's state file; two nodes
// of the fleet's layout beside one of another layout (the stray); and
// three servers (a master and two replicas attaching, detaching,
// resyncing, promoted one after another, a master restarting), where the
// replicas' high-water mark each grant returns is compared too. Each
// server lists its replicas at one address per server (replicas.lua's
// replica_set counts them by address, the model by server).
var replayConfigs = [][]string{
	{"-DCFG_LOSS", "-DP=2", "-DCLONE"},
	{"-DCFG_FAILOVER", "-DP=2", "-DCLONE"},
	{"-DCFG_LOSS", "-DP=3", "-DLAYOUT"},
	{"-DCFG_REPL", "-DWAITSW", "-DREPL_LATE", "-DREPL_RESTART", "-DP=2", "-DCLONE"},
}

// TestReplay_ScriptsMatchModel ties the model to the code: SPIN simulates
// random runs of the model (spin -n SEED), each printing every script call
// and its outcome as the model computes it; the test makes the same calls
// on the real scripts in simredis, with the same faults (time, a lease
// expiring, a restart or failover bringing back the data the model drew),
// and requires the same outcome: granted or refused and why, the machine
// ID, the floor, the reservation, the counter segment. A script that
// drifts from the model (a floor, a refusal, a cap changed) fails here;
// the model's exhaustive checks (scripts/model) then say nothing about it
// until the model is changed too.
//
// The registry rules are replayed too (the fault: Redis losing the
// registry, {ns}:meta and {ns}:layout, while a node of the fleet still
// issues, and a node that never ran under it, or runs another layout,
// coming up then): the registry is made by init.lua; a process sends a
// generation only once it has run under the registry, as coord and
// fallback do (known), and the replay tracks that itself and requires the
// model's knowledge to agree; a knower's call on a Redis that lost the
// registry restores it with its layout, a stranger's is refused
// (NOREGISTRY) and stores no layout. The test requires both to have
// happened, and a stray's LAYOUT refusal, so that it cannot stop covering them.
func TestReplay_ScriptsMatchModel(t *testing.T) {
	redistest.Require(t, "spin")
	pml, err := filepath.Abs("flaked.pml")
	if err != nil {
		t.Fatal(err)
	}
	var total tally
	for _, cfg := range replayConfigs {
		for seed := 1; seed <= 60; seed++ {
			args := append(append([]string{"-T", "-n" + strconv.Itoa(seed), "-u20000"}, cfg...), replayFlags...)
			cmd := exec.Command("spin", append(args, pml)...)
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("spin %s: %v", strings.Join(args, " "), err)
			}
			r := newReplay(t, fmt.Sprintf("spin %s", strings.Join(args, " ")))
			r.wait = slices.Contains(cfg, "-DWAITSW")
			r.run(out)
			total.add(r.tally)
		}
	}
	t.Logf("%d script calls replayed; registry restored by a knower %d times, refused to a stranger (NOREGISTRY) %d times, "+
		"a stray's layout refused %d times; %d replicas marks compared, %d of them on a promoted replica, %d raised by the replicas listed since",
		total.calls, total.restored, total.noRegistry, total.layout, total.marks, total.promoted, total.bySet)
	if total.calls < 500 {
		t.Fatalf("only %d script calls replayed: the simulations no longer print them?", total.calls)
	}
	if total.restored == 0 || total.noRegistry == 0 || total.layout == 0 || total.promoted == 0 || total.bySet == 0 {
		t.Fatalf("the simulations no longer reach a registry restore (%d), a NOREGISTRY refusal (%d), a LAYOUT refusal (%d), "+
			"a mark on a promoted replica (%d) or one raised by the replicas listed since (%d)",
			total.restored, total.noRegistry, total.layout, total.promoted, total.bySet)
	}
}

// tally counts what a replay went through.
type tally struct {
	calls      int // script calls
	restored   int // calls of a knower that found the registry (part of it) missing and restored it
	noRegistry int // NOREGISTRY refusals of a stranger
	layout     int // LAYOUT refusals (claims and counters)
	marks      int // grants whose replicas mark was compared (three servers)
	promoted   int // of them, on a promoted replica (the mark it took over from the master it replaced)
	bySet      int // of them, above both the mark before the call and the replicas listed: replica_set's count
}

func (t *tally) add(o tally) {
	t.calls += o.calls
	t.restored += o.restored
	t.noRegistry += o.noRegistry
	t.layout += o.layout
	t.marks += o.marks
	t.promoted += o.promoted
	t.bySet += o.bySet
}

// proc is what the replay knows of one process slot, from the real
// scripts' replies.
type proc struct {
	up                 bool
	known              bool // it has run under the registry: sends a generation
	conn               int
	mid                int // -1: none
	token, lossID, gen string
	held               int64
	sfTok, sfMid       string
	sfFloor            int64
	counterLast        int64 // -1: none
	// stateFile takes what a grant gives (the reservation held, the
	// state file), once WAIT confirmed it (nil: nothing pending)
	stateFile func()
}

type replay struct {
	t     *testing.T
	what  string
	now   int64
	off   [3]int64
	srv   [3]*simredis.Server
	repl  [3]server // three servers: who replicates from whom
	keys  contract.Keys
	procs [3]*proc
	gens  int
	lines []string
	// wait: a grant is used, and the state file written, once WAIT
	// confirmed it (WAITOK)
	wait bool
	// markBefore and listedBefore: {ns}:meta's mark and the replicas
	// listed as the last script call found them
	markBefore, listedBefore int64
	// need is the replicas count the last grant's reply carried, and
	// needSrv its server (-1: none since the model's last NEED); above is
	// whether it exceeds both the mark before the call and the replicas
	// listed (replica_set raised it)
	need, needSrv int64
	above         bool
	tally
}

// server is one server's part in replication (three servers): a replica
// streaming from its master or not, and the master_replid it follows (its
// master_replid2 once promoted).
type server struct {
	replica, streaming bool
	of                 int
	follows            string
	promoted           bool // it was promoted and has not changed since
}

// listed is the replicas server s lists: those streaming from it.
func (r *replay) listed(s int) []simredis.Replica {
	var l []simredis.Replica
	for i, x := range r.repl {
		if x.replica && x.streaming && x.of == s {
			l = append(l, simredis.Replica{Addr: "10.0.0." + strconv.Itoa(10+i) + ":6379", State: "online"})
		}
	}
	return l
}

func newReplay(t *testing.T, what string) *replay {
	r := &replay{t: t, what: what, now: 1, keys: contract.NewKeys("m"), needSrv: -1}
	for i := range r.srv {
		i := i
		r.srv[i] = simredis.New(func() time.Time {
			// mid-tick, so Redis TIME's tick is the model's
			return time.UnixMilli((r.now-r.off[i])*1000 + 500)
		}, rand.New(rand.NewPCG(uint64(i)+1, 7))) // distinct identities per server
	}
	for i := range r.procs {
		r.procs[i] = &proc{mid: -1, counterLast: -1, sfFloor: -1}
	}
	return r
}

func (r *replay) fail(format string, a ...any) {
	r.t.Helper()
	tail := r.lines
	if len(tail) > 25 {
		tail = tail[len(tail)-25:]
	}
	r.t.Fatalf("%s: %s\nlast model events:\n  %s", r.what, fmt.Sprintf(format, a...), strings.Join(tail, "\n  "))
}

func (r *replay) do(s int, args ...string) any {
	v, err := r.srv[s].Do(args)
	if err != nil && err.Error() != "redis: nil" {
		r.fail("%v: %v", args, err)
	}
	return v
}

func (r *replay) eval(s int, script string, keys []string, argv []any) []any {
	r.tally.calls++
	listed := r.listed(s)
	r.srv[s].SetReplicaList(listed)
	r.markBefore, r.listedBefore = 0, int64(len(listed))
	if m, ok := r.srv[s].Field(r.keys.Meta, "replicas"); ok {
		r.markBefore, _ = strconv.ParseInt(m, 10, 64)
	}
	cmd := []string{"EVAL", script, strconv.Itoa(len(keys))}
	cmd = append(cmd, keys...)
	for _, a := range argv {
		switch v := a.(type) {
		case float64:
			cmd = append(cmd, strconv.FormatFloat(v, 'f', -1, 64))
		default:
			cmd = append(cmd, fmt.Sprint(v))
		}
	}
	v, err := r.srv[s].Do(cmd)
	if err != nil {
		return []any{"ERR", err.Error()}
	}
	switch x := v.(type) {
	case []any:
		return x
	default:
		return []any{x}
	}
}

// granted records the replicas count a grant on server s carried, for
// the model's NEED that follows.
func (r *replay) granted(s int, need int64) {
	r.need, r.needSrv = need, int64(s)
	r.above = need > r.markBefore && need > r.listedBefore
}

func str(v any) string { return fmt.Sprint(v) }

func num(v any) int64 {
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

func atoi(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("model output: %q is not a number", s)
	}
	return n
}

func layoutName(l string) string {
	if l == "2" {
		return "B"
	}
	return "A"
}

func (r *replay) gen() string { r.gens++; return "g" + strconv.Itoa(r.gens) }

// run replays one simulation's events.
func (r *replay) run(out []byte) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "EV ") {
			continue
		}
		r.lines = append(r.lines, line)
		f := strings.Fields(line)[1:]
		n := func(i int) int64 { return atoi(r.t, f[i]) }
		switch f[0] {
		case "OFF":
			for i := range f[1:] {
				r.off[i] = n(i + 1)
			}
		case "TIME":
			r.now = n(1)
		case "INIT": // init.lua on server f[1], f[2] ticks before the run
			now := r.now
			r.now -= n(2)
			r.init(int(n(1)))
			r.now = now
		case "START":
			p := r.procs[n(1)]
			p.up, p.conn, p.mid, p.counterLast = true, int(n(2)), -1, -1
			// coord.Registry.Claim with a state file of the namespace
			// and layout: written after a claim under the registry
			p.known = p.sfTok != ""
		case "CLONE":
			p, o := r.procs[n(1)], r.procs[n(2)]
			p.sfTok, p.sfMid, p.sfFloor = o.sfTok, o.sfMid, o.sfFloor
		case "KILL", "STOP":
			p := r.procs[n(1)]
			p.up, p.mid, p.known, p.stateFile = false, -1, false, nil
		case "ISSUE", "USE": // the generator's use of a grant: no script call
		case "WAIT": // WAIT is the node's (internal/replwait): the replicas' SYNC is replayed
		case "WAITOK", "WAITFAIL":
			p := r.procs[n(1)]
			if f[0] == "WAITOK" && p.stateFile != nil {
				p.stateFile()
			}
			p.stateFile = nil
		case "CONN":
			r.procs[n(1)].conn = int(n(2))
		case "EXPIRE":
			r.do(int(n(1)), "DEL", r.keys.Lease(f[2]))
		case "SYNC": // the data of server f[1] replicated to f[2]
			r.srv[n(2)].Load(r.srv[n(1)].Snapshot())
		case "RESTART":
			s := r.srv[n(1)]
			s.Restart(s.Snapshot())
			x := int(n(1))
			r.repl[x].promoted = false
			for i := range r.repl {
				if r.repl[i].replica && r.repl[i].of == x {
					r.repl[i].streaming = false // its replicas lose their stream
				}
			}
		case "PROMOTE":
			s := int(n(1))
			r.srv[s].Load(r.srv[1-s].Snapshot())
			r.srv[s].Promote(nil)
		case "ATTACH": // server f[1] replicates from master f[2]: a full copy and its replid
			x, s := int(n(1)), int(n(2))
			if !r.repl[x].replica {
				for i := range r.repl {
					if r.repl[i].replica && r.repl[i].of == x {
						r.repl[i].streaming = false // a master turned replica: its replicas lose their stream
					}
				}
			}
			r.srv[x].Load(r.srv[s].Snapshot())
			r.repl[x] = server{replica: true, streaming: true, of: s, follows: r.srv[s].ReplID()}
		case "DETACH":
			r.repl[n(1)].streaming = false
		case "PROMOTED": // a replica becomes master with what it holds: master_replid2 the replid it followed
			x := int(n(1))
			r.srv[x].PromoteReplica(r.srv[x].Snapshot(), r.srv[x].RunID(), r.repl[x].follows)
			r.repl[x] = server{promoted: true}
		case "NEED": // the replicas count the last grant on f[1] carried, as the model's replicas.lua computes it
			if r.needSrv != n(1) {
				r.fail("the model's grant on server %d returns a replicas count, the replay saw no grant there", n(1))
			}
			if r.need != n(2) {
				r.fail("the script's replicas count is %d, the model's %d", r.need, n(2))
			}
			r.tally.marks++
			if r.repl[n(1)].promoted {
				r.tally.promoted++
			}
			if r.above {
				r.tally.bySet++
			}
			r.needSrv = -1
		case "DATA": // a key of the data a loss brought back
			s, id := int(n(1)), f[2]
			if f[3] == "0" {
				r.do(s, "DEL", r.keys.Lease(id))
			} else {
				r.do(s, "SET", r.keys.Lease(id), "t"+f[3])
			}
			if f[4] == "-2" {
				r.do(s, "HDEL", r.keys.Reserved, id)
			} else {
				r.do(s, "HSET", r.keys.Reserved, id, f[4])
			}
		case "DATAX":
			s := int(n(1))
			if f[2] == "-2" {
				r.do(s, "DEL", r.keys.Counter)
			} else {
				v := n(2) // tick * SEQ + seq, one sequence bit (counter.lua keeps the pair)
				r.do(s, "HSET", r.keys.Counter, "tick", strconv.FormatInt(v>>1, 10), "seq", strconv.FormatInt(v&1, 10))
			}
			if f[3] == "0" {
				r.do(s, "DEL", r.keys.Meta)
			}
			if f[4] == "0" {
				r.do(s, "DEL", r.keys.Layout)
			}
		case "CLAIM":
			r.claim(f)
		case "RENEW":
			r.renew(f)
		case "RELEASE":
			r.release(f)
		case "COUNTER":
			r.counter(f)
		default:
			r.fail("unknown model event %q", line)
		}
	}
}

// init runs init.lua on server s as flaked init does (coord.Init) for the
// fleet's layout A, at the model's time.
func (r *replay) init(s int) {
	keys, argv := contract.InitArgs{
		Keys: r.keys, Generation: r.gen(), Layout: layoutName("1"), EpochUs: 0, TickUs: tickUs,
		Horizon: horizon, EventsMaxLen: 100, Host: "h", PID: 1,
	}.KeysArgv()
	if res := r.eval(s, contract.Init, keys, argv); str(res[0]) != "OK" {
		r.fail("init: %v", res)
	}
}

// registryCall wraps a script call that may restore or refuse a missing
// registry: it checks the process's knowledge against the model's (f, the
// 0/1 it printed), returns the generation to send, and after the call
// (done, given the script's first reply item) checks what happened to the
// registry: a knower restored a missing one with its layout; a stranger
// was refused NOREGISTRY exactly when part of it was missing, and stored
// no layout.
func (r *replay) registryCall(p *proc, s int, f, layout string) (gen string, done func(res []any) string) {
	if want := f == "1"; p.known != want {
		r.fail("the process knows the registry: %v by the replay's tracking (coord, fallback), %v by the model", p.known, want)
	}
	missing := r.do(s, "EXISTS", r.keys.Meta, r.keys.Layout) != int64(2)
	before, _ := r.do(s, "GET", r.keys.Layout).(string)
	if p.known {
		gen = r.gen()
	}
	return gen, func(res []any) string {
		got := str(res[0])
		if got == "ERR" && strings.Contains(str(res[1]), "NOREGISTRY") {
			got = "NOREG"
		}
		stored, _ := r.do(s, "GET", r.keys.Layout).(string)
		switch {
		case got == "NOREG" && (p.known || !missing):
			r.fail("NOREGISTRY to a process that knows the registry (%v) or with the registry present (%v): %v", p.known, !missing, res)
		case got == "NOREG" && stored != before:
			r.fail("a refused stranger changed the stored layout from %q to %q", before, stored)
		case got == "NOREG":
			r.tally.noRegistry++
		case got == "ERR":
			r.fail("%v", res)
		case missing && !p.known:
			r.fail("a stranger was not refused on a namespace without its registry: %v", res)
		case missing:
			if stored != layout || r.do(s, "EXISTS", r.keys.Meta) != int64(1) {
				r.fail("a knower of layout %s left the registry missing or another layout (%q): %v", layout, stored, res)
			}
			r.tally.restored++
		}
		if got == "LAYOUT" {
			r.tally.layout++
		}
		return got
	}
}

// claim: CLAIM p s m layout known (NOREG | LAYOUT | OK floor token)
func (r *replay) claim(f []string) {
	p, s, m := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2])), f[3]
	gen, done := r.registryCall(p, s, f[5], layoutName(f[4]))
	pref, local := "", int64(-1)
	if p.sfMid != "" {
		pref, local = p.sfMid, p.sfFloor
	}
	prev := ""
	if p.sfTok != "" {
		prev = "t" + p.sfTok
	}
	tok := ""
	if f[6] == "OK" {
		tok = f[8]
	}
	keys, argv := contract.ClaimArgs{
		Keys: r.keys, Token: "t" + tok, Layout: layoutName(f[4]), Generation: gen,
		Horizon: horizon, Now: 1 << 40, LeaseTTLMs: 1 << 40, EventsMaxLen: 100,
		Preferred: pref, LocalFloor: local, MaxWait: -1, EpochUs: 0, TickUs: tickUs,
		CounterID: counterID, Host: "h", PID: 1, Addr: "a", Version: "v", Mode: "flake",
		PrevToken: prev, Node: "n", MinID: 0, MaxID: machines - 1,
		Candidates: []int{int(atoi(r.t, m))},
	}.KeysArgv()
	res := r.eval(s, contract.Claim, keys, argv)
	got := done(res)
	if got != f[6] {
		r.fail("claim: the script says %v, the model %s", res, f[6])
	}
	if got != "OK" {
		return
	}
	if str(res[1]) != m || str(res[2]) != f[7] {
		r.fail("claim: the script gave ID %v floor %v, the model ID %s floor %s", res[1], res[2], m, f[7])
	}
	p.mid, p.token, p.held, p.gen, p.lossID = int(atoi(r.t, m)), "t"+tok, num(res[2]), str(res[3]), str(res[9])
	r.granted(s, num(res[claimNeedAt]))
	p.stateFile = func() { p.sfTok, p.sfMid, p.sfFloor = tok, m, num(res[2]) }
	if !r.wait {
		p.stateFile()
		p.stateFile = nil
	}
	p.known = true // coord.Registry.known: set at an OK reply
}

// renew: RENEW p s (OK reservation redis-tick | LOST kind)
func (r *replay) renew(f []string) {
	p, s := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2]))
	keys, argv := contract.RenewArgs{
		Keys: r.keys, Token: p.token, Want: 1 << 40, Held: p.held, LeaseTTLMs: 1 << 40,
		EventsMaxLen: 100, Mode: "flake", Host: "h", PID: 1, Addr: "a", Version: "v",
		Layout: "A", Generation: p.gen, Horizon: horizon, EpochUs: 0, TickUs: tickUs,
		Node: "n", LossID: p.lossID, FleetHorizon: horizon, MachineIDs: []int{p.mid},
	}.KeysArgv()
	res := r.eval(s, contract.Renew, keys, argv)
	got := str(res[0])
	if got != f[3] {
		r.fail("renew: the script says %v, the model %s %s", res, f[3], f[4])
	}
	if got == "LOST" {
		kind := str(res[4])
		want := map[string][]string{"loss": {"loss"}, "layout": {"layout"}, "expired": {"expired"}, "held": {"held", "fenced"}}[f[4]]
		ok := false
		for _, k := range want {
			ok = ok || k == kind
		}
		if !ok {
			r.fail("renew: the script lost the lease as %q (%v), the model as %s", kind, res[2], f[4])
		}
		p.mid = -1
		return
	}
	if str(res[1]) != f[4] {
		r.fail("renew: the script granted %v, the model %s", res[1], f[4])
	}
	held := num(res[1])
	p.stateFile = func() { p.held, p.sfFloor = held, held }
	if !r.wait {
		p.stateFile()
		p.stateFile = nil
	}
	r.granted(s, num(res[renewNeedAt]))
}

// release: RELEASE p s last
func (r *replay) release(f []string) {
	p, s := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2]))
	last := atoi(r.t, f[3])
	keys, argv := contract.ReleaseArgs{
		Keys: r.keys, Token: p.token, LastTick: last, EventsMaxLen: 100, Host: "h", PID: 1, Addr: "a",
		Generation: p.gen, EpochUs: 0, TickUs: tickUs, MachineIDs: []int{p.mid},
	}.KeysArgv()
	res := r.eval(s, contract.Release, keys, argv)
	if str(res[0]) == "ERR" {
		r.fail("release: %v", res)
	}
	p.sfFloor = last
}

// counter: COUNTER p s min layout known (OK first last | AHEAD | LAYOUT | NOREG)
func (r *replay) counter(f []string) {
	p, s := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2]))
	minv := atoi(r.t, f[3])
	gen, done := r.registryCall(p, s, f[5], layoutName(f[4]))
	keys, argv := contract.CounterArgs{
		Keys: r.keys, Size: segment, EpochUs: 0, TickUs: tickUs, SeqBits: 1, Lead: lead,
		MinTick: max(minv, 0) >> 1, MinSeq: max(minv, 0) & 1, Layout: layoutName(f[4]), EventsMaxLen: 100, CounterID: counterID,
		Host: "h", PID: 1, Generation: gen,
	}.KeysArgv()
	res := r.eval(s, contract.Counter, keys, argv)
	got := done(res)
	if got != f[6] {
		r.fail("counter: the script says %v, the model %s", res, strings.Join(f[6:], " "))
	}
	if got == "OK" {
		first, last := num(res[1])<<1|num(res[2]), num(res[3])<<1|num(res[4]) // one sequence bit
		if strconv.FormatInt(first, 10) != f[7] || strconv.FormatInt(last, 10) != f[8] {
			r.fail("counter: the script handed out %v..%v, the model %s..%s", first, last, f[7], f[8])
		}
		p.counterLast = last
		p.known = true // fallback.Counter.known: set at a segment
		r.granted(s, num(res[counterNeedAt]))
	}
}
