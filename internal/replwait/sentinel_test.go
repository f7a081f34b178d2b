package replwait_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/replwait"
)

func up(addr string) replwait.SentinelView {
	others := []string{}
	for _, o := range []string{"s1", "s2", "s3"} {
		if o != addr {
			others = append(others, "id-"+o)
		}
	}
	return replwait.SentinelView{Sentinel: addr, ID: "id-" + addr, Others: others, MasterAddr: "10.0.0.1:6379", RunID: "run1",
		Flags: "master", DownAfter: 5 * time.Second, Known: 3, Age: 200 * time.Millisecond}
}

// Each way a Sentinel check fails to prove that no promotion can have
// happened yet refuses: a Sentinel that did not answer or is missing (it
// may be the leader, seeing the master down), one naming another master,
// one seeing it down or in a failover, a PING pending for nearly
// down-after (which a second check, after the grant's reply, does not
// need: Up). The window is the earliest Sentinel's bound, never past
// MaxCheckAge after the send.
func TestWindowOf(t *testing.T) {
	const sent = 10 * time.Second
	three := func(f func(v []replwait.SentinelView)) []replwait.SentinelView {
		v := []replwait.SentinelView{up("s1"), up("s2"), up("s3")}
		if f != nil {
			f(v)
		}
		return v
	}
	for _, c := range []struct {
		name  string
		views []replwait.SentinelView
		until time.Duration // 0: refused
		why   string
	}{
		{"all up", three(nil), sent + replwait.MaxCheckAge, ""},
		{"short down-after", three(func(v []replwait.SentinelView) {
			v[1].DownAfter = 100 * time.Millisecond
			v[1].Age = 40 * time.Millisecond
		}),
			sent + 100*time.Millisecond - time.Millisecond - 40*time.Millisecond, ""},
		{"none", nil, 0, "no Sentinel answered"},
		{"one unreachable", three(func(v []replwait.SentinelView) { v[2].Err = errors.New("dial: refused") }), 0, "s3: dial: refused"},
		{"one unknown to us", three(nil)[:2], 0, "2 of the 3 Sentinels answered"},
		{"one reached twice, one not", append(three(nil)[:2], func() replwait.SentinelView { v := up("s1"); v.Sentinel = "s1-by-name"; return v }()),
			0, "2 of the 3 Sentinels answered"},
		{"one the others do not count", three(func(v []replwait.SentinelView) {
			for i := range v {
				v[i].Known, v[i].Others = 2, v[i].Others[:1]
			}
			v[0].Others = []string{"id-s2", "id-s4"}
		}), 0, "3 of the 4 Sentinels answered"},
		{"no ID", three(func(v []replwait.SentinelView) { v[1].ID = "" }), 0, "no Sentinel ID"},
		{"another master", three(func(v []replwait.SentinelView) { v[0].RunID = "run2" }), 0, "names master"},
		{"sees it down", three(func(v []replwait.SentinelView) { v[1].Flags = "master,s_down" }), 0, "as master,s_down"},
		{"failover", three(func(v []replwait.SentinelView) { v[1].Flags = "master,failover_in_progress" }), 0, "failover_in_progress"},
		{"disconnected", three(func(v []replwait.SentinelView) { v[1].Flags = "master,disconnected" }), 0, "disconnected"},
		{"ping pending too long", three(func(v []replwait.SentinelView) { v[1].Age = 5 * time.Second }), 0, "pending"},
		{"no down-after", three(func(v []replwait.SentinelView) { v[1].DownAfter = 0 }), 0, "no down-after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := replwait.WindowOf(sent, c.views, "run1")
			if w.Until != c.until || !strings.Contains(w.Why, c.why) || (c.until == 0) != (w.Why != "") {
				t.Fatalf("WindowOf = %+v, want until %v, why containing %q", w, c.until, c.why)
			}
			// Up: every Sentinel names the master up with no failover,
			// which a check sent after the grant's reply needs alone.
			if up := c.until > 0 || c.why == "pending"; w.Up != up {
				t.Fatalf("WindowOf = %+v, want Up %v", w, up)
			}
		})
	}
	if w := replwait.WindowOf(sent, three(nil), ""); w.Until != 0 {
		t.Fatalf("no run ID: %+v", w)
	}
}

// stepClock's Monotonic reads step later at each call; its timers are
// the process's.
type stepClock struct{ now, step *atomic.Int64 }

func (c stepClock) Now() time.Time                                  { return time.Now() }
func (c stepClock) Monotonic() time.Duration                        { return time.Duration(c.now.Add(c.step.Load())) }
func (c stepClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

type fakeSentinels struct {
	views func() []replwait.SentinelView
	calls atomic.Int64
}

func (f *fakeSentinels) Views(context.Context) []replwait.SentinelView {
	f.calls.Add(1)
	return f.views()
}

// serverGrant is a granting script that leaves the server's identity in
// {t}:meta as guard.lua does, and asks for ARGV[1] replicas.
var serverGrant = redis.NewScript(`redis.call('HSET', KEYS[2], 'server', 'run1:repl1'); redis.call('SET', KEYS[1], ARGV[1]); return {'OK', tonumber(ARGV[1]), ''}`)

// The fault: a replica of the fleet's high-water mark is away (here: the
// master has none and the mark asks for one). A grant every Sentinel
// vouches for is used without its WAIT; one they do not vouch for (a
// Sentinel sees the master down, or the grant came back past the window)
// falls back to WAIT and is refused, fail closed, with both reasons named.
func TestRun_SentinelsVouch(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := context.Background()
	keys := []string{"{t}:k", "{t}:meta"}
	views := []replwait.SentinelView{up("s1")}
	views[0].Known, views[0].Others = 1, nil
	f := &fakeSentinels{views: func() []replwait.SentinelView { return views }}
	// Each reading of the node's clock is step later than the one before:
	// the check is sent at one reading, the grant's reply read at the next.
	var now, step atomic.Int64
	step.Store(int64(10 * time.Millisecond))
	w := replwait.Waiter{Meta: "{t}:meta", Sentinels: f, Clock: stepClock{&now, &step}}

	_, res, err := w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if err != nil || res.Via != "sentinels" || res.Need != 1 {
		t.Fatalf("vouched for: %+v %v", res, err)
	}
	if got := waits(t, rdb); got != "" {
		t.Fatalf("a grant the Sentinels vouch for sent a WAIT: %s", got)
	}
	if last := w.Last(); last == nil || last.Via != "sentinels" || last.Err != "" {
		t.Fatalf("Last: %+v", last)
	}

	views[0].Flags = "master,s_down"
	_, res, err = w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || res.Via != "" || !strings.Contains(err.Error(), "s_down") ||
		!strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("a Sentinel sees the master down: %+v %v", res, err)
	}
	if last := w.Last(); last == nil || last.Err == "" {
		t.Fatalf("Last after a refusal: %+v", last)
	}

	// The grant's reply comes back a second after the check, past
	// MaxCheckAge: refused, with no second check (MaxCheckAge is what
	// covers a promotion by hand, which no Sentinel flags).
	views[0].Flags = "master"
	f.calls.Store(0)
	step.Store(int64(time.Second))
	_, res, err = w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || !strings.Contains(err.Error(), "past what it vouches for") || f.calls.Load() != 1 {
		t.Fatalf("a grant past MaxCheckAge: %+v %v (%d checks)", res, err, f.calls.Load())
	}
	// A Sentinel's PING down-after old at the first check (as at the end
	// of every ping period with a short down-after): the Waiter asks again
	// after the reply, and the Sentinels' second answers decide. A
	// failover begun meanwhile refuses (the fault: a promotion between
	// the first check and the grant); the master still up vouches.
	step.Store(int64(10 * time.Millisecond))
	views[0].Age = views[0].DownAfter
	second := up("s1")
	second.Known, second.Others, second.Flags = 1, nil, "master,failover_in_progress"
	f.calls.Store(0)
	f.views = func() []replwait.SentinelView {
		if f.calls.Load() == 2 {
			return []replwait.SentinelView{second}
		}
		return views
	}
	_, res, err = w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || !strings.Contains(err.Error(), "failover_in_progress") || f.calls.Load() != 2 {
		t.Fatalf("a PING down-after old, a failover begun by the second check: %+v %v (%d checks)", res, err, f.calls.Load())
	}
	f.calls.Store(0)
	second.Flags = "master"
	if _, res, err = w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond); err != nil || res.Via != "sentinels" || f.calls.Load() != 2 {
		t.Fatalf("a PING down-after old, the master up at the second check: %+v %v (%d checks)", res, err, f.calls.Load())
	}
	f.calls.Store(0)
	views[0].Age = 200 * time.Millisecond
	if _, res, err = w.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond); err != nil || res.Via != "sentinels" || f.calls.Load() != 1 {
		t.Fatalf("within the window: %+v %v (%d checks)", res, err, f.calls.Load())
	}
}

// memSentinels answers as a process's Sentinels do: the views of those
// that did not answer carry the replicas the last answer named.
type memSentinels struct {
	views func() []replwait.SentinelView
	mem   replwait.ReplicaMemory
}

func (m *memSentinels) Views(context.Context) []replwait.SentinelView { return m.mem.Fill(m.views()) }

// Fault covered: the replicas mark at one where the Sentinels know two
// replicas (two never listed together), and no Sentinel answering the
// node's check (the node cut off from them while it still reaches the
// master, which they may be failing over). A grant then waits for both
// replicas the Sentinels last named, also on a Waiter whose first check
// this is (an auto node's counter started during the cut): a grant one
// replica acknowledged could be missing from the other, promoted. A
// process no Sentinel ever answered knows nothing the Sentinels may
// promote and refuses.
func TestRun_NoSentinelAnswers_WaitsForTheReplicasLastKnown(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := context.Background()
	keys := []string{"{t}:k", "{t}:meta"}
	answer := true
	one := up("s1")
	one.Known, one.Others, one.Replicas = 1, nil, 2
	s := &memSentinels{views: func() []replwait.SentinelView {
		v := one
		if !answer {
			v = replwait.SentinelView{Sentinel: "s1", Err: errors.New("dial: i/o timeout")}
		}
		return []replwait.SentinelView{v}
	}}
	var now, step atomic.Int64
	step.Store(int64(10 * time.Millisecond))
	clk := stepClock{&now, &step}
	first := replwait.Waiter{Meta: "{t}:meta", Sentinels: s, Clock: clk}
	if _, res, err := first.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond); err != nil || res.Via != "sentinels" {
		t.Fatalf("vouched for: %+v %v", res, err)
	}
	answer = false
	fresh := replwait.Waiter{Meta: "{t}:meta", Sentinels: s, Clock: clk}
	_, res, err := fresh.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || res.Need != 2 || !strings.Contains(err.Error(), "the Sentinels know 2 replicas") {
		t.Fatalf("no Sentinel answers, 2 replicas known before: %+v %v", res, err)
	}
	never := replwait.Waiter{Meta: "{t}:meta", Sentinels: &memSentinels{views: s.views}, Clock: clk}
	_, _, err = never.Run(ctx, rdb, serverGrant, keys, []any{1}, 1, 20*time.Millisecond)
	if !errors.Is(err, replwait.ErrNotReplicated) || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("no Sentinel ever answered: %v", err)
	}
}
