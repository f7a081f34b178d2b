package model

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
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
)

// replayFlags are the -D flags of the simulations: a fleet in flake and
// counter mode at once, bounds wider than the exhaustive checks (a random
// run goes deep rather than wide).
var replayFlags = []string{"-DM=2", "-DP=2", "-DH=3", "-DLEAD=2", "-DSEG=2",
	"-DFLAKE", "-DCOUNTER", "-DCLONE", "-DTMAX=12", "-DMAXTOK=12", "-DMAXF=4"}

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
func TestReplay_ScriptsMatchModel(t *testing.T) {
	redistest.Require(t, "spin")
	pml, err := filepath.Abs("flaked.pml")
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, cfg := range []string{"-DCFG_LOSS", "-DCFG_FAILOVER"} {
		for seed := 1; seed <= 60; seed++ {
			args := append([]string{"-T", "-n" + strconv.Itoa(seed), "-u20000", cfg}, replayFlags...)
			cmd := exec.Command("spin", append(args, pml)...)
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("spin %s: %v", strings.Join(args, " "), err)
			}
			r := newReplay(t, fmt.Sprintf("spin %s", strings.Join(args, " ")))
			steps += r.run(out)
		}
	}
	t.Logf("%d script calls replayed", steps)
	if steps < 500 {
		t.Fatalf("only %d script calls replayed: the simulations no longer print them?", steps)
	}
}

// proc is what the replay knows of one process slot, from the real
// scripts' replies.
type proc struct {
	up                 bool
	conn               int
	mid                int // -1: none
	token, lossID, gen string
	held               int64
	sfTok, sfMid       string
	sfFloor            int64
	counterLast        int64 // -1: none
}

type replay struct {
	t     *testing.T
	what  string
	now   int64
	off   [2]int64
	srv   [2]*simredis.Server
	keys  contract.Keys
	procs [3]*proc
	gens  int
	calls int
	lines []string
}

func newReplay(t *testing.T, what string) *replay {
	r := &replay{t: t, what: what, now: 1, keys: contract.NewKeys("m")}
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
	r.calls++
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

// run replays one simulation's events and returns the script calls made.
func (r *replay) run(out []byte) int {
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
			r.off = [2]int64{n(1), n(2)}
		case "TIME":
			r.now = n(1)
		case "START":
			p := r.procs[n(1)]
			p.up, p.conn, p.mid, p.counterLast = true, int(n(2)), -1, -1
		case "CLONE":
			p, o := r.procs[n(1)], r.procs[n(2)]
			p.sfTok, p.sfMid, p.sfFloor = o.sfTok, o.sfMid, o.sfFloor
		case "KILL", "STOP":
			p := r.procs[n(1)]
			p.up, p.mid = false, -1
		case "CONN":
			r.procs[n(1)].conn = int(n(2))
		case "EXPIRE":
			r.do(int(n(1)), "DEL", r.keys.Lease(f[2]))
		case "SYNC": // the data of server f[1] replicated to f[2]
			r.srv[n(2)].Load(r.srv[n(1)].Snapshot())
		case "RESTART":
			s := r.srv[n(1)]
			s.Restart(s.Snapshot())
		case "PROMOTE":
			s := int(n(1))
			r.srv[s].Load(r.srv[1-s].Snapshot())
			r.srv[s].Promote(nil)
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
	return r.calls
}

// claim: CLAIM p s m layout (LAYOUT | OK floor settle token)
func (r *replay) claim(f []string) {
	p, s, m := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2])), f[3]
	pref, local := "", int64(-1)
	if p.sfMid != "" {
		pref, local = p.sfMid, p.sfFloor
	}
	prev := ""
	if p.sfTok != "" {
		prev = "t" + p.sfTok
	}
	tok := ""
	if f[5] == "OK" {
		tok = f[8]
	}
	keys, argv := contract.ClaimArgs{
		Keys: r.keys, Token: "t" + tok, Layout: layoutName(f[4]), Generation: r.gen(),
		Horizon: horizon, Now: 1 << 40, LeaseTTLMs: 1 << 40, EventsMaxLen: 100,
		Preferred: pref, LocalFloor: local, MaxWait: -1, EpochUs: 0, TickUs: tickUs,
		CounterID: counterID, Host: "h", PID: 1, Addr: "a", Version: "v", Mode: "flake",
		PrevToken: prev, Node: "n", MinID: 0, MaxID: machines - 1,
		Candidates: []int{int(atoi(r.t, m))},
	}.KeysArgv()
	res := r.eval(s, contract.Claim, keys, argv)
	got := str(res[0])
	if got != f[5] {
		r.fail("claim: the script says %v, the model %s", res, f[5])
	}
	if got != "OK" {
		return
	}
	if str(res[1]) != m || str(res[2]) != f[6] || str(res[8]) != f[7] {
		r.fail("claim: the script gave ID %v floor %v settle %v, the model ID %s floor %s settle %s",
			res[1], res[2], res[8], m, f[6], f[7])
	}
	p.mid, p.token, p.held, p.gen, p.lossID = int(atoi(r.t, m)), "t"+tok, num(res[2]), str(res[3]), str(res[10])
	p.sfTok, p.sfMid, p.sfFloor = tok, m, num(res[2])
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
	p.held = num(res[1])
	p.sfFloor = p.held
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

// counter: COUNTER p s min layout (OK first last | AHEAD | SETTLE | ERR)
func (r *replay) counter(f []string) {
	p, s := r.procs[atoi(r.t, f[1])], int(atoi(r.t, f[2]))
	minv := atoi(r.t, f[3])
	keys, argv := contract.CounterArgs{
		Keys: r.keys, Size: segment, EpochUs: 0, TickUs: tickUs, SeqBits: 1, Lead: lead,
		MinTick: max(minv, 0) >> 1, MinSeq: max(minv, 0) & 1, Layout: layoutName(f[4]), EventsMaxLen: 100, CounterID: counterID,
		Host: "h", PID: 1, Generation: r.gen(),
	}.KeysArgv()
	res := r.eval(s, contract.Counter, keys, argv)
	got := str(res[0])
	if got != f[5] {
		r.fail("counter: the script says %v, the model %s", res, strings.Join(f[5:], " "))
	}
	if got == "OK" {
		first, last := num(res[1])<<1|num(res[2]), num(res[3])<<1|num(res[4]) // one sequence bit
		if strconv.FormatInt(first, 10) != f[6] || strconv.FormatInt(last, 10) != f[7] {
			r.fail("counter: the script handed out %v..%v, the model %s..%s", first, last, f[6], f[7])
		}
		p.counterLast = last
	}
}
