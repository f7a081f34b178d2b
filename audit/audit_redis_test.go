package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/statefile"
)

// TestFleet_Table_LiveKilledStopped: three node processes claim machine
// IDs; one is killed with SIGKILL, one stopped cleanly. The audit names
// each owner by pid and addr, in the right state, and finds the registry
// consistent all along; then two hand-made inconsistencies are found.
func TestFleet_Table_LiveKilledStopped(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv.URL())
	const ns, bits = "fleet", 3
	l := fleetLayout(bits)
	ps := startFleet(t, srv.URL(), ns, bits, "node-a:7001", "node-b:7002", "node-c:7003")
	a, b, c := ps[0], ps[1], ps[2]
	for _, p := range ps {
		p.issue(300) // more than a tick's 256: borrows ahead
	}

	_, rep := report(t, rdb, ns)
	checkAllLive(t, l, rep, ps)

	a.kill()
	b.stop()
	s, rep := waitState(t, rdb, ns, a.mid, audit.Expired)
	checkOwner(t, l, row(t, rep, a.mid), a, audit.Expired)
	checkOwner(t, l, row(t, rep, b.mid), b, audit.Released)
	checkOwner(t, l, row(t, rep, c.mid), c, audit.Live)
	if !rep.Consistent() {
		t.Fatalf("after a kill and a stop: findings %v", rep.Findings)
	}
	sum := rep.Summary
	if sum.Leasable != 7 || sum.Leased != 1 || sum.Free != 6 || sum.NeverUsed != 4 {
		t.Errorf("summary %+v", sum)
	}
	checkTable(t, rep, map[*proc]string{a: "expired", b: "released", c: "live"},
		"3 machine IDs: 1 live, 1 expired, 1 released, 0 orphan, 0 conflict; 6 of 7 leasable IDs free")
	checkJSONOwners(t, rep, ps)
	lastB := l.Decompose(b.ids[len(b.ids)-1]).Tick
	checkKilledAndStoppedHistory(t, s, a, b, lastB)
	checkWhoisEach(t, s, ps)
	checkHandMadeConflicts(t, rdb, ns, c, b, lastB)
}

// checkAllLive checks the audit right after the processes ps claimed:
// consistent, each live, owned by its process, within its lease TTL.
func checkAllLive(t *testing.T, l flake.Layout, rep *audit.Report, ps []*proc) {
	t.Helper()
	if !rep.Consistent() || rep.Summary.Counts[audit.Live] != len(ps) || len(rep.Machines) != len(ps) {
		t.Fatalf("after claims: %d machines, counts %v, findings %v", len(rep.Machines), rep.Summary.Counts, rep.Findings)
	}
	for _, p := range ps {
		checkOwner(t, l, row(t, rep, p.mid), p, audit.Live)
		if m := row(t, rep, p.mid); *m.LeaseTTLMs <= 0 || *m.LeaseTTLMs > 1000 || *m.HeartbeatAgeMs > 1000 {
			t.Errorf("machine ID %d: lease TTL %d ms, heartbeat age %d ms: want within the 1 s TTL", p.mid, *m.LeaseTTLMs, *m.HeartbeatAgeMs)
		}
	}
}

// checkTable checks the table of rep: a title, the header, one row per
// process in states, sorted by machine ID, with its state and pid, then
// the summary line, which starts with summary.
func checkTable(t *testing.T, rep *audit.Report, states map[*proc]string, summary string) {
	t.Helper()
	var out bytes.Buffer
	if err := audit.WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	n := len(states)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != n+3 || !strings.HasPrefix(lines[1], "MID  STATE") || !strings.HasPrefix(lines[n+2], summary) {
		t.Fatalf("table:\n%s", out.String())
	}
	byMID := map[int]*proc{}
	for p := range states {
		byMID[p.mid] = p
	}
	var mids []int
	for _, line := range lines[2 : n+2] {
		f := strings.Fields(line)
		mid, _ := strconv.Atoi(f[0])
		mids = append(mids, mid)
		var pid int
		var state string
		if p := byMID[mid]; p != nil {
			pid, state = p.pid, states[p]
		}
		if f[1] != state || f[3] != strconv.Itoa(pid) {
			t.Errorf("row %q: want state %s pid %d", line, state, pid)
		}
	}
	if !slices.IsSorted(mids) {
		t.Errorf("rows not sorted by machine ID: %v", mids)
	}
}

// checkJSONOwners checks that the JSON of rep names each machine ID's
// process, one of ps, by pid and addr.
func checkJSONOwners(t *testing.T, rep *audit.Report, ps []*proc) {
	t.Helper()
	var out bytes.Buffer
	if err := audit.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Machines []struct {
			MachineID int    `json:"machine_id"`
			State     string `json:"state"`
			Owner     struct {
				PID  int
				Addr string
			}
		}
		Findings []any
	}
	if err := json.Unmarshal(out.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	byMID := map[int]*proc{}
	for _, p := range ps {
		byMID[p.mid] = p
	}
	for _, m := range js.Machines {
		p := byMID[m.MachineID]
		if p == nil || m.Owner.PID != p.pid || m.Owner.Addr != p.addr {
			t.Errorf("JSON machine %+v", m)
		}
	}
}

// checkKilledAndStoppedHistory checks the history: the killed node's
// claim, no release; the stopped node's claim and its release with its
// last tick, lastStopped.
func checkKilledAndStoppedHistory(t *testing.T, s *audit.Snapshot, killed, stopped *proc, lastStopped int64) {
	t.Helper()
	hb := audit.HistoryOf(s, stopped.mid)
	if len(hb.Events) < 2 || hb.Events[0].Type != "claim" || hb.Events[len(hb.Events)-1].Type != "release" ||
		hb.Events[0].Owner.PID != stopped.pid || !hb.Stream.Complete {
		t.Errorf("history of %d: %+v", stopped.mid, hb.Events)
	}
	if got := hb.Events[len(hb.Events)-1].Fields["last"]; got != strconv.FormatInt(lastStopped, 10) {
		t.Errorf("release of %d says last tick %s, the node's last ID has tick %d", stopped.mid, got, lastStopped)
	}
	for _, e := range audit.HistoryOf(s, killed.mid).Events {
		if e.Type == "release" {
			t.Errorf("killed node released: %+v", e)
		}
	}
}

// checkWhoisEach checks that whois names each process for its first and
// last IDs.
func checkWhoisEach(t *testing.T, s *audit.Snapshot, ps []*proc) {
	t.Helper()
	for _, p := range ps {
		for _, id := range []uint64{p.ids[0], p.ids[len(p.ids)-1]} {
			w, err := audit.WhoIs(s, id)
			if err != nil || !w.Known || w.Owner.PID != p.pid || w.Owner.Addr != p.addr {
				t.Errorf("whois %d (node %s, pid %d): %+v, %v", id, p.addr, p.pid, w, err)
			}
		}
	}
}

// checkHandMadeConflicts makes two inconsistencies by hand, the live ID
// leaves the registry set and the released ID's reservation drops below
// its last tick, and checks that the audit finds both, each ID in
// conflict.
func checkHandMadeConflicts(t *testing.T, rdb redis.UniversalClient, ns string, live, released *proc, lastReleased int64) {
	t.Helper()
	ctx := ctxT(t)
	if err := rdb.SRem(ctx, "{"+ns+"}:machines", live.mid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "{"+ns+"}:reserved", released.mid, lastReleased-10).Err(); err != nil {
		t.Fatal(err)
	}
	_, rep := report(t, rdb, ns)
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Check+" "+strconv.Itoa(*f.MachineID))
	}
	slices.Sort(got)
	want := []string{audit.CheckLeaseNotRegistered + " " + strconv.Itoa(live.mid), audit.CheckReservationBelowUsed + " " + strconv.Itoa(released.mid)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", rep.Findings, want)
	}
	if row(t, rep, released.mid).State != audit.Conflict || row(t, rep, live.mid).State != audit.Conflict {
		t.Errorf("inconsistent IDs not in conflict: %+v", rep.Machines)
	}
}

// TestFleet_Whois_BeforeAndAfterTakeover: with one leasable machine ID,
// node A issues, is killed, and node B takes the ID over. whois names A
// for A's IDs and B for B's, from the claims' floors.
func TestFleet_Whois_BeforeAndAfterTakeover(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv.URL())
	const ns, bits = "takeover", 1 // machine ID 0 only; 1 is counter mode's
	a := startNode(t, srv.URL(), ns, bits, "node-a:7001")
	a.issue(1000)
	a.kill()
	waitState(t, rdb, ns, 0, audit.Expired)
	b := startNode(t, srv.URL(), ns, bits, "node-b:7002")
	if b.mid != 0 {
		t.Fatalf("B leased %d", b.mid)
	}
	b.issue(1000)
	if b.ids[0] <= a.ids[len(a.ids)-1] {
		t.Fatalf("B's first ID %d is not above A's last %d", b.ids[0], a.ids[len(a.ids)-1])
	}

	s, _ := report(t, rdb, ns)
	h := audit.HistoryOf(s, 0)
	var kinds []string
	var claims []audit.HistoryEvent
	for _, e := range h.Events {
		kinds = append(kinds, e.Type)
		if e.Type != "mode" { // each node also writes its start mode
			claims = append(claims, e)
		}
	}
	if len(claims) != 2 || claims[0].Type != "claim" || claims[1].Type != "takeover" || claims[0].Owner.PID != a.pid ||
		claims[1].Owner.PID != b.pid || claims[1].Fields["prev_pid"] != strconv.Itoa(a.pid) {
		t.Fatalf("history %v: %+v", kinds, h.Events)
	}
	for _, tc := range []struct {
		name string
		ids  []uint64
		p    *proc
	}{{"A's IDs", a.ids, a}, {"B's IDs", b.ids, b}} {
		for _, id := range []uint64{tc.ids[0], tc.ids[len(tc.ids)/2], tc.ids[len(tc.ids)-1]} {
			w, err := audit.WhoIs(s, id)
			if err != nil || !w.Known || w.Owner == nil || w.Owner.PID != tc.p.pid || w.Owner.Addr != tc.p.addr || w.Source != "events" {
				t.Errorf("%s: whois %d: %+v, %v; want pid %d", tc.name, id, w, err, tc.p.pid)
			}
		}
	}
	l := fleetLayout(bits)
	// A tick at A's floor predates every owner; one above B's reservation
	// was issued by nobody yet.
	floorA, _ := strconv.ParseInt(claims[0].Fields["floor"], 10, 64)
	for _, tc := range []struct {
		tick int64
		want string
	}{
		{floorA, "history is complete"},
		{l.Tick(time.Now().Add(time.Hour)), "above the reservation"},
	} {
		id, _ := l.Compose(tc.tick, 0, 0)
		w, err := audit.WhoIs(s, id)
		if err != nil || w.Known || !strings.Contains(w.Explanation, tc.want) {
			t.Errorf("tick %d: %+v, %v; want unknown, %q", tc.tick, w, err, tc.want)
		}
	}
}

// TestFleet_Prune_ForgetsOldKeepsLiveAndReservations: a live idle node,
// a stopped one and a killed one; prune forgets the last two only, keeps
// every reservation, and a node claiming a forgotten ID starts above it.
func TestFleet_Prune_ForgetsOldKeepsLiveAndReservations(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv.URL())
	const ns, bits = "prune", 2 // machine IDs 0..2
	l := fleetLayout(bits)
	ps := startFleet(t, srv.URL(), ns, bits, "node-a:7001", "node-b:7002", "node-c:7003")
	a, b, c := ps[0], ps[1], ps[2]
	for _, p := range ps {
		p.issue(100)
	}
	b.stop()
	c.kill()
	waitState(t, rdb, ns, c.mid, audit.Expired)
	time.Sleep(600 * time.Millisecond) // so the reservations are older than 500 ms

	ctx := ctxT(t)
	dry, err := audit.Prune(ctx, rdb, ns, audit.PruneOptions{OlderThan: 500 * time.Millisecond, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	wantPruned := []int{b.mid, c.mid}
	slices.Sort(wantPruned)
	if got := prunedIDs(dry); !slices.Equal(got, wantPruned) || !dry.DryRun {
		t.Fatalf("dry run would prune %v, want %v (kept %+v)", got, wantPruned, dry.Kept)
	}
	if _, rep := report(t, rdb, ns); len(rep.Machines) != 3 {
		t.Fatalf("dry run changed the registry: %+v", rep.Machines)
	}
	reservedBefore, err := rdb.HGetAll(ctx, "{prune}:reserved").Result()
	if err != nil {
		t.Fatal(err)
	}

	res, err := audit.Prune(ctx, rdb, ns, audit.PruneOptions{OlderThan: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := prunedIDs(res); !slices.Equal(got, wantPruned) {
		t.Fatalf("pruned %v, want %v (kept %+v)", got, wantPruned, res.Kept)
	}
	if len(res.Kept) != 1 || res.Kept[0].MachineID != a.mid || res.Kept[0].State != audit.Live {
		t.Fatalf("kept %+v, want only the live %d", res.Kept, a.mid)
	}
	s, rep := report(t, rdb, ns)
	if len(rep.Machines) != 1 || rep.Summary.Pruned != 2 || !rep.Consistent() {
		t.Fatalf("after prune: %+v, summary %+v, findings %v", rep.Machines, rep.Summary, rep.Findings)
	}
	checkOwner(t, l, row(t, rep, a.mid), a, audit.Live)
	if reservedAfter, _ := rdb.HGetAll(ctx, "{prune}:reserved").Result(); len(reservedAfter) != 3 ||
		reservedAfter[strconv.Itoa(b.mid)] != reservedBefore[strconv.Itoa(b.mid)] ||
		reservedAfter[strconv.Itoa(c.mid)] != reservedBefore[strconv.Itoa(c.mid)] {
		t.Fatalf("reservations before %v, after %v: prune must keep them", reservedBefore, reservedAfter)
	}
	if h := audit.HistoryOf(s, c.mid); h.Events[len(h.Events)-1].Type != "prune" {
		t.Errorf("no prune event: %+v", h.Events)
	}
	// The live node goes on issuing and renewing.
	a.issue(100)
	time.Sleep(1500 * time.Millisecond) // past its lease TTL: renewals kept it
	if _, rep := report(t, rdb, ns); row(t, rep, a.mid).State != audit.Live {
		t.Fatalf("live node after prune: %+v", rep.Machines)
	}
	// A new node takes a forgotten ID and starts above its old owner.
	d := startNode(t, srv.URL(), ns, bits, "node-d:7004")
	d.issue(100)
	for _, old := range []*proc{b, c} {
		if d.mid == old.mid && d.ids[0] <= old.ids[len(old.ids)-1] {
			t.Fatalf("new owner of machine ID %d issued %d, not above the pruned owner's last %d", d.mid, d.ids[0], old.ids[len(old.ids)-1])
		}
	}
	if d.mid != b.mid && d.mid != c.mid {
		t.Fatalf("node D leased %d, want a forgotten one (%d or %d)", d.mid, b.mid, c.mid)
	}
}

func prunedIDs(r *audit.PruneResult) []int {
	var out []int
	for _, p := range r.Pruned {
		out = append(out, p.MachineID)
	}
	slices.Sort(out)
	return out
}

// TestRead_ManyIDs_AllRead: more machine IDs than one transaction reads
// (2,000) are all read, each with its own keys.
func TestRead_ManyIDs_AllRead(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := ctxT(t)
	l := fleetLayout(16)
	now := time.Now()
	p := rdb.Pipeline()
	p.Set(ctx, "{many}:layout", l.String(), 0)
	p.HSet(ctx, "{many}:meta", "generation", "g", "created_ms", now.UnixMilli(), "created_tick", l.Tick(now), "horizon", 100)
	const n = 4500
	for i := range n {
		id := strconv.Itoa(i)
		p.SAdd(ctx, "{many}:machines", id)
		p.HSet(ctx, "{many}:reserved", id, l.Tick(now)+int64(i))
		p.HSet(ctx, "{many}:owner:"+id, "host", "h", "pid", id, "token", "t"+id, "state", "released")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := audit.Read(ctx, rdb, "many")
	if err != nil {
		t.Fatal(err)
	}
	rep := audit.Build(s)
	if len(rep.Machines) != n || rep.Summary.Counts[audit.Released] != n || !rep.Consistent() {
		t.Fatalf("%d machines, counts %v, findings %d", len(rep.Machines), rep.Summary.Counts, len(rep.Findings))
	}
	for i, m := range rep.Machines {
		if m.MachineID != i || m.Owner.PID != i || *m.ReservedTick != l.Tick(now)+int64(i) {
			t.Fatalf("machine %d: %+v", i, m)
		}
	}
}

// TestFleet_Clone_StateFileCopied: a node's state file is copied while it
// runs, and a second process starts from the copy: it takes the machine
// ID over (fencing the original), the original's renewal is refused, and
// it claims another ID from its own file, under the same node ID. verify
// then names both processes and their IDs, in one finding, and the
// history tells the takeover, the fencing and the clone.
func TestFleet_Clone_StateFileCopied(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := client(t, srv.URL())
	ctx := ctxT(t)
	f := statefulFleet{t: t, ctx: ctx, rdb: rdb, ns: "copies"}
	if err := redistest.InitRegistry(ctx, rdb, f.ns, fleetLayout(3).String()); err != nil { // no claim waits a loss floor
		t.Fatal(err)
	}
	dir := t.TempDir()
	orig, cp := dir+"/orig.state", dir+"/copy.state"
	regA, regB := f.registry("orig", 1111), f.registry("copy", 2222)

	sfA, _ := f.open(orig)
	a := f.claim(regA, coord.ClaimOptions{State: sfA})
	copyFile(t, orig, cp)
	sfB, prevB := f.open(cp)
	b := f.claim(regB, coord.ClaimOptions{State: sfB, Previous: prevB})
	taken := a.MachineIDs()[0]
	if b.MachineIDs()[0] != taken {
		t.Fatalf("the copy claimed %v, want %d taken over", b.MachineIDs(), taken)
	}
	// The original still thinks it holds the ID, but one live lease is
	// all Redis has: no clone yet.
	if _, rep := report(t, rdb, f.ns); !rep.Consistent() {
		t.Fatalf("after the takeover: %v", rep.Findings)
	}
	if err := a.Renew(ctx); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("the original's renewal: %v, want fenced", err)
	}
	a2 := f.claim(regA, coord.ClaimOptions{State: sfA}) // what node.Node does next
	other := a2.MachineIDs()[0]

	s, rep := report(t, rdb, f.ns)
	checkCloneFinding(t, rep, sfA.Node(), a2, other, b, taken)
	checkFencedHistory(t, s, taken, a, b)
	if s.Meta.Server == "" || !s.Meta.LossAt.IsZero() || rep.DataLoss != nil {
		t.Errorf("meta %+v, data loss %+v: want this server's identity and no loss (ForgetLoss)", s.Meta, rep.DataLoss)
	}

	// The copy gets a state file of its own: the clone is gone.
	if err := b.Release(ctx, b.Floor()); err != nil {
		t.Fatal(err)
	}
	if _, rep := report(t, rdb, f.ns); !rep.Consistent() {
		t.Errorf("after the copy stopped: %v", rep.Findings)
	}
}

// statefulFleet claims machine IDs in namespace ns for processes of its
// own making, each with a state file, under fleetLayout(3).
type statefulFleet struct {
	t   *testing.T
	ctx context.Context
	rdb redis.UniversalClient
	ns  string
}

// registry is the registry of a process on host with pid, at addr
// host:7379.
func (f statefulFleet) registry(host string, pid int) *coord.Registry {
	f.t.Helper()
	r, err := coord.NewRegistry(f.rdb, coord.Options{Namespace: f.ns, Layout: fleetLayout(3),
		Owner: coord.Owner{Host: host, PID: pid, Addr: host + ":7379"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// open opens the state file at path until the end of the test.
func (f statefulFleet) open(path string) (*statefile.File, *statefile.State) {
	f.t.Helper()
	sf, st, err := statefile.Open(path)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { sf.Close() })
	return sf, st
}

// claim claims a machine ID from reg, released at the end of the test, and
// reserves ahead at once, as a node does: without a reservation the audit
// reports the lease.
func (f statefulFleet) claim(reg *coord.Registry, o coord.ClaimOptions) *coord.Lease {
	f.t.Helper()
	l, err := reg.Claim(f.ctx, o)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = l.Release(context.Background(), l.Floor()) })
	if _, err := l.Reserve(f.ctx, fleetLayout(3).Tick(time.Now())+10); err != nil {
		f.t.Fatal(err)
	}
	return l
}

// copyFile copies the file at from to to, as a copied data directory does.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkCloneFinding checks that rep has one finding, a clone naming node
// and both processes: the original, whose lease orig now holds machine ID
// other, and the copy, whose lease cp holds the machine ID it took over;
// both IDs are in conflict under node.
func checkCloneFinding(t *testing.T, rep *audit.Report, node string, orig *coord.Lease, other int, cp *coord.Lease, taken int) {
	t.Helper()
	if len(rep.Findings) != 1 || rep.Findings[0].Check != audit.CheckClone {
		t.Fatalf("findings %v, want one clone", rep.Findings)
	}
	ids := []int{taken, other}
	slices.Sort(ids)
	f := rep.Findings[0]
	if !slices.Equal(f.MachineIDs, ids) || !strings.Contains(f.Message, "node "+node) ||
		!strings.Contains(f.Message, "orig pid 1111 addr orig:7379 token "+orig.Token()[:8]+" (machine ID "+strconv.Itoa(other)+")") ||
		!strings.Contains(f.Message, "copy pid 2222 addr copy:7379 token "+cp.Token()[:8]+" (machine ID "+strconv.Itoa(taken)+")") {
		t.Errorf("finding %s\nwant IDs %v, node %s, both processes", f, ids, node)
	}
	for _, id := range ids {
		if m := row(t, rep, id); m.State != audit.Conflict || m.Owner.Node != node {
			t.Errorf("machine ID %d: %s, owner %+v; want conflict, node %s", id, m.State, m.Owner, node)
		}
	}
}

// checkFencedHistory checks the history of machine ID taken: the
// original's claim (lease orig), the copy's reclaim (lease cp) fencing it,
// and the original's fencing event naming the copy.
func checkFencedHistory(t *testing.T, s *audit.Snapshot, taken int, orig, cp *coord.Lease) {
	t.Helper()
	var kinds []string
	h := audit.HistoryOf(s, taken)
	for _, e := range h.Events {
		kinds = append(kinds, e.Type)
	}
	if !slices.Equal(kinds, []string{"claim", "reclaim", "fenced"}) || h.Events[1].Fields["fenced"] != orig.Token()[:8] ||
		!strings.Contains(h.Events[2].Detail, "taken over by copy pid 2222 token "+cp.Token()[:8]+", which started from a copy") {
		t.Errorf("history of %d: %v\n%+v", taken, kinds, h.Events)
	}
}

// TestRead_OwnerNodeAndMeta_HandWritten: the owner hash's node and
// from_token and {ns}:meta's server and loss_ms are read in the
// snapshot's transaction; two live leases under one node ID and two
// tokens are a clone, the same keys with one token are not.
func TestRead_OwnerNodeAndMeta_HandWritten(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := ctxT(t)
	l := fleetLayout(4)
	now := time.Now()
	loss := now.Add(-time.Hour).UnixMilli()
	p := rdb.TxPipeline()
	p.Set(ctx, "{hand}:layout", l.String(), 0)
	p.HSet(ctx, "{hand}:meta", "generation", "g", "created_ms", now.Add(-48*time.Hour).UnixMilli(), "created_tick", l.Tick(now.Add(-48*time.Hour)),
		"horizon", 500, "server", "run1:repl1", "loss_ms", loss)
	for id, tok := range map[string]string{"3": "aaaa0000aaaa0000", "7": "bbbb0000bbbb0000"} {
		p.SAdd(ctx, "{hand}:machines", id)
		p.HSet(ctx, "{hand}:reserved", id, l.Tick(now)+100)
		p.Set(ctx, "{hand}:lease:"+id, tok, 30*time.Second)
		p.HSet(ctx, "{hand}:owner:"+id, "host", "host-"+id, "pid", id, "addr", "10.0.0."+id+":7379", "token", tok, "state", "live",
			"node", "0123abcd4567ef89", "from_token", "")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := audit.Read(ctx, rdb, "hand")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Records[3]; r == nil || r.Owner["node"] != "0123abcd4567ef89" || r.Lease != "aaaa0000aaaa0000" {
		t.Fatalf("record 3: %+v", r)
	}
	if s.Meta.Server != "run1:repl1" || s.Meta.LossAt.UnixMilli() != loss || s.Meta.LossCause() != audit.LossServer {
		t.Fatalf("meta %+v", s.Meta)
	}
	rep := audit.Build(s)
	if len(rep.Findings) != 1 || !strings.HasPrefix(rep.Findings[0].String(), "machine IDs 3 and 7: held by two live processes") ||
		!strings.Contains(rep.Findings[0].Message, "host-3 pid 3 addr 10.0.0.3:7379") || !strings.Contains(rep.Findings[0].Message, "host-7 pid 7 addr 10.0.0.7:7379") {
		t.Fatalf("findings %v", rep.Findings)
	}
	// One process with both IDs: one token.
	if err := rdb.Set(ctx, "{hand}:lease:7", "aaaa0000aaaa0000", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "{hand}:owner:7", "token", "aaaa0000aaaa0000").Err(); err != nil {
		t.Fatal(err)
	}
	if _, rep := report(t, rdb, "hand"); !rep.Consistent() {
		t.Fatalf("one process with two IDs: %v", rep.Findings)
	}
}
