package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/replwait"
)

// sentinelWorld is a deployment with three Sentinels and no nodes but
// node 0's view of the Sentinels, stepped by hand.
func sentinelWorld(t *testing.T, seed uint64, quorum int, downAfter time.Duration) (*world, *deployment) {
	t.Helper()
	w := &world{epoch: epoch.AddDate(1, 0, 0), limit: time.Hour}
	s := &Schedule{ReplicaLag: 100 * time.Millisecond, ReplicaLag2: 200 * time.Millisecond, ReplTimeout: 10 * time.Second,
		ReattachAfter: 10 * time.Second, Nodes: []NodeConfig{{}},
		Sentinel: &SentinelConfig{Count: 3, Quorum: quorum, DownAfter: downAfter, FailoverTimeout: 10 * time.Second}}
	d := newDeployment(w, rand.New(rand.NewPCG(seed, 1)), s)
	d.sentinels = newSentinels(d, *s.Sentinel)
	d.sentinels.start()
	return w, d
}

// The premise of the Sentinel rule, checked on the simulated Sentinels: a
// check the Sentinels vouch for (every one names the master, up, with no
// failover) proves that no replica is promoted before the down-after
// bound (sent + down-after less its hundredth less the oldest PING age)
// when the failover follows the master going away (stopped, cut off from
// every Sentinel, from one with quorum 1); a forced failover, which skips
// failure detection, comes no sooner than MaxCheckAge before the
// window's end. The checks run every 10 ms from a second before the fault
// to the promotion.
func TestSentinels_NoPromotionWithinAVouchedWindow(t *testing.T) {
	faults := map[string]func(d *deployment){
		"master stopped":            func(d *deployment) { d.down(d.m, d.w.now+time.Minute) },
		"master cut off":            func(d *deployment) { d.m.sentinelCut = d.w.now + time.Minute },
		"one Sentinel cut off (q1)": func(d *deployment) { d.sentinels.all[1].masterCut[d.m.i] = d.w.now + time.Minute },
		"forced failover":           func(d *deployment) { d.sentinels.forceFailover(d.sentinels.all[2]) },
	}
	for name, fault := range faults {
		for seed := uint64(1); seed <= 20; seed++ {
			downAfter := time.Duration(300+seed*230) * time.Millisecond
			w, d := sentinelWorld(t, seed, 1+int(seed%2), downAfter)
			if strings.Contains(name, "q1") {
				d.sentinels.cfg.Quorum = 1
			}
			at := 20*time.Second + time.Duration(seed)*37*time.Millisecond
			w.atMid(at, func() { fault(d) })
			master := d.m
			var windows []replwait.Window
			var sent []time.Duration
			promoted := time.Duration(-1)
			for now := at - time.Second; now < at+time.Minute && promoted < 0; now += 10 * time.Millisecond {
				w.runUntil(now)
				if d.m != master {
					promoted = now
					break
				}
				views := d.sentinels.views(0)
				win := replwait.WindowOf(now, views, master.runID)
				if win.Until > 0 {
					if name != "forced failover" { // the down-after bound alone
						win.Until = math.MaxInt64
						for _, v := range views {
							win.Until = min(win.Until, now+v.DownAfter-v.DownAfter/100-v.Age)
						}
					}
					windows, sent = append(windows, win), append(sent, now)
				}
			}
			if promoted < 0 {
				t.Fatalf("%s, seed %d: no promotion in a minute", name, seed)
			}
			slack := time.Duration(0)
			if name == "forced failover" {
				slack = replwait.MaxCheckAge
			}
			for i, win := range windows {
				// promoted is the first 10 ms step that saw the promotion.
				if win.Until > promoted+slack {
					t.Errorf("%s, seed %d (down-after %v): a check at %v vouched until %v; promoted by %v", name, seed, downAfter,
						sent[i], win.Until, promoted)
				}
			}
			if len(windows) == 0 {
				t.Errorf("%s, seed %d: no check vouched", name, seed)
			}
		}
	}
}

// Sentinel's detection as the simulated Sentinels run it: a master
// stopped is seen s_down no sooner than down-after after its last reply,
// the promotion comes after it, and meanwhile SENTINEL MASTER reports the
// PING's age, then s_down, o_down and failover_in_progress.
func TestSentinels_DetectionTimeline(t *testing.T) {
	w, d := sentinelWorld(t, 7, 2, time.Second)
	w.runUntil(10 * time.Second)
	lastReply := w.now - d.sentinels.views(0)[0].Age
	d.down(d.m, w.now+time.Minute)
	master := d.m
	flags := map[string]bool{}
	var sdownAt time.Duration
	for d.m == master && w.now < time.Minute {
		w.runUntil(w.now + 10*time.Millisecond)
		for _, v := range d.sentinels.views(0) {
			for _, f := range strings.Split(v.Flags, ",") {
				flags[f] = true
			}
			if strings.Contains(v.Flags, "s_down") && sdownAt == 0 {
				sdownAt = w.now
			}
		}
	}
	if d.m == master {
		t.Fatal("no promotion")
	}
	if sdownAt < lastReply+time.Second {
		t.Errorf("s_down at %v, less than down-after after the last reply at %v", sdownAt, lastReply)
	}
	for _, f := range []string{"s_down", "o_down", "disconnected", "failover_in_progress"} {
		if !flags[f] {
			t.Errorf("SENTINEL MASTER never showed %s before the promotion (saw %v)", f, flags)
		}
	}
}
