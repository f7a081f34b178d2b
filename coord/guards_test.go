package coord_test

// Tests of the guards against duplicate IDs after faults that lose or copy
// state: fencing per lease (scripts/lua/claim.lua, renew.lua), clone
// detection, the loss floor of guard.lua after Redis lost a suffix of its
// writes or restarted from an old snapshot, the fleet layout restored after
// total data loss, and release.lua after the server changed. Each test says
// which fault it covers and how it would see a duplicate.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/statefile"
)

// newGuardReg is newReg that waits for a loss floor.
func newGuardReg(t *testing.T, rdb redis.UniversalClient, o coord.Options) *coord.Registry {
	t.Helper()
	if o.MaxWait == 0 {
		o.MaxWait = time.Minute // claims after a loss wait for the loss floor
	}
	return newReg(t, rdb, o)
}

// events returns the fields of every event of kind in {flaked}:events.
func events(t *testing.T, rdb redis.UniversalClient, kind string) []map[string]any {
	t.Helper()
	msgs, err := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, m := range msgs {
		if m.Values["type"] == kind {
			out = append(out, m.Values)
		}
	}
	return out
}

// findEvent returns the first event of kind whose fields include want, or
// fails the test listing the events of that kind.
func findEvent(t *testing.T, rdb redis.UniversalClient, kind string, want map[string]string) map[string]any {
	t.Helper()
	evs := events(t, rdb, kind)
	for _, ev := range evs {
		ok := true
		for k, v := range want {
			if fmt.Sprint(ev[k]) != v {
				ok = false
				break
			}
		}
		if ok {
			return ev
		}
	}
	t.Fatalf("no %s event with %v; %s events: %v", kind, want, kind, evs)
	return nil
}

// redisNowTick is the tick of Redis TIME: the scripts' clock.
func redisNowTick(t *testing.T, rdb redis.UniversalClient, l flake.Layout) int64 {
	t.Helper()
	now, err := rdb.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return l.Tick(now)
}

// reservedOf is HGET {flaked}:reserved id, or -1 when there is none.
func reservedOf(t *testing.T, rdb redis.UniversalClient, id int) int64 {
	t.Helper()
	v, err := rdb.HGet(ctxT(t), "{flaked}:reserved", strconv.Itoa(id)).Int64()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func copyState(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func openState(t *testing.T, path string) (*statefile.File, *statefile.State) {
	t.Helper()
	sf, st, err := statefile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sf.Close() })
	return sf, st
}

// Fault: a node's state file is copied (a VM image or volume cloned, a
// backup restored next to the running node) and a second process starts
// from the copy while the original still runs and holds the lease.
// Guard: every Claim makes a fresh owner token (the token in the file only
// identifies the lease to take over), so the copy's claim takes the same
// machine ID over above everything reserved for it (also after the copy was
// made: Redis's reservation, not the file's, bounds the floor) and the
// original's next renewal is fenced. A duplicate shows as: the copy's floor
// below the original's grant (both would issue the same ticks), or the
// original renewing or reserving again (both would issue past the floor
// under one machine ID), e.g. if the token were read back from disk or
// renew.lua accepted a lease held by another token.
func TestGuard_StateFileCopiedWhileLive_FencesOriginal(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		dir := t.TempDir()
		orig, cp := filepath.Join(dir, "node.state"), filepath.Join(dir, "copy.state")
		l := flake.DefaultLayout()
		regA := newGuardReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "orig", PID: 1111}})
		regB := newGuardReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "copy", PID: 2222}})

		sfA, prevA := openState(t, orig)
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{State: sfA, Previous: prevA})
		if err != nil {
			t.Fatal(err)
		}
		id := a.MachineIDs()[0]
		// The copy is taken now, while the original runs; the original
		// reserves further afterwards, so the copy's file is stale.
		copyState(t, orig, cp)
		now := redisNowTick(t, rdb, l)
		grant, err := a.Reserve(ctxT(t), now+200)
		if err != nil || grant < now+200 {
			t.Fatalf("original Reserve = %d, %v; want >= %d", grant, err, now+200)
		}

		sfB, prevB := openState(t, cp)
		if prevB == nil || prevB.Token != a.Token() || prevB.Node != sfA.Node() {
			t.Fatalf("copied state %+v does not carry the original's token %s and node %s", prevB, a.Token(), sfA.Node())
		}
		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{State: sfB, Previous: prevB})
		if err != nil {
			t.Fatal(err)
		}
		if b.Token() == a.Token() {
			t.Fatalf("the copy's lease has the original's token %s: the token was read from disk", a.Token())
		}
		if got := b.MachineIDs(); len(got) != 1 || got[0] != id {
			t.Fatalf("the copy claimed %v, want the original's machine ID %d taken over", got, id)
		}
		if b.Floor() < grant {
			t.Fatalf("the copy starts after tick %d, below the original's grant %d: both would issue the same IDs", b.Floor(), grant)
		}
		if ev := b.ClaimEvents(); len(ev) != 1 || ev[0] != "reclaim" {
			t.Fatalf("the copy's claim events %v, want [reclaim]", ev)
		}
		findEvent(t, rdb, "reclaim", map[string]string{"mid": strconv.Itoa(id), "token": b.Token(), "fenced": a.Token()})

		// The original comes to renew: fenced, and it is granted nothing.
		_, err = a.Reserve(ctxT(t), grant+100)
		if !errors.Is(err, coord.ErrLeaseLost) || !errors.Is(err, coord.ErrFenced) {
			t.Fatalf("the original's Reserve after the copy's claim: %v, want ErrLeaseLost and ErrFenced", err)
		}
		if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) || !errors.Is(err, coord.ErrFenced) {
			t.Fatalf("the original's Renew after the fence: %v, want ErrLeaseLost and ErrFenced", err)
		}
		findEvent(t, rdb, "fenced", map[string]string{"mid": strconv.Itoa(id), "token": a.Token(), "holder": b.Token(),
			"holder_host": "copy", "holder_pid": "2222"})
		select {
		case <-a.Done():
		default:
			t.Fatal("the original's lease is not marked lost")
		}
		for _, upTo := range []int64{grant + 1, grant + 1000} {
			if got, err := a.Reserve(ctxT(t), upTo); err == nil {
				t.Fatalf("the fenced original was granted tick %d (asked %d)", got, upTo)
			}
		}
		if a.Granted() != grant {
			t.Fatalf("the fenced original's grant moved from %d to %d", grant, a.Granted())
		}
		if r := reservedOf(t, rdb, id); r != b.Floor() {
			t.Fatalf("reservation of ID %d is %d, want the copy's floor %d (the original raised nothing)", id, r, b.Floor())
		}
		if ok, _ := a.Check(ctxT(t)); ok {
			t.Fatal("check.lua says the fenced original still holds the lease")
		}
		if err := b.Renew(ctxT(t)); err != nil {
			t.Fatalf("the copy's renewal: %v", err)
		}
	})
}

// Fault: a node stopped cleanly (its state file says released), and two
// processes start from copies of that file. Guard: the first takes the
// machine ID back; the second finds it held under the same state-file node
// ID by a live process, claims another ID and reports the clone. A
// duplicate shows as the second getting the same machine ID (both would
// issue under it from the same floor), e.g. if the claim matched the file's
// token against the owner's from_token instead of the live lease.
func TestGuard_StateFileCopiesAfterCleanStop_SecondGetsOtherID(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		dir := t.TempDir()
		orig := filepath.Join(dir, "node.state")
		l := flake.DefaultLayout()
		reg := newGuardReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "orig", PID: 1000}})
		sf, prev := openState(t, orig)
		first, err := reg.Claim(ctxT(t), coord.ClaimOptions{State: sf, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		id := first.MachineIDs()[0]
		now := redisNowTick(t, rdb, l)
		if _, err := first.Reserve(ctxT(t), now+100); err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctxT(t), max(now, first.Floor())+3); err != nil {
			t.Fatal(err)
		}
		sf.Close()

		c1, c2 := filepath.Join(dir, "copy1.state"), filepath.Join(dir, "copy2.state")
		copyState(t, orig, c1)
		copyState(t, orig, c2)
		sf1, prev1 := openState(t, c1)
		sf2, prev2 := openState(t, c2)
		if !prev1.Released || prev1.Node != prev2.Node {
			t.Fatalf("copies: %+v / %+v", prev1, prev2)
		}
		reg1 := newGuardReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "first", PID: 1111}})
		reg2 := newGuardReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "second", PID: 2222}})
		l1, err := reg1.Claim(ctxT(t), coord.ClaimOptions{State: sf1, Previous: prev1})
		if err != nil {
			t.Fatal(err)
		}
		if got := l1.MachineIDs(); got[0] != id || l1.Clone != "" {
			t.Fatalf("first copy: IDs %v clone %q, want %d and no clone", got, l1.Clone, id)
		}
		l2, err := reg2.Claim(ctxT(t), coord.ClaimOptions{State: sf2, Previous: prev2})
		if err != nil {
			t.Fatal(err)
		}
		if got := l2.MachineIDs(); got[0] == id {
			t.Fatalf("second copy also got machine ID %d, held by the first copy: duplicate IDs", id)
		}
		if l2.Clone != "first 1111" {
			t.Fatalf("second copy's Clone = %q, want %q (host pid of the first copy)", l2.Clone, "first 1111")
		}
		findEvent(t, rdb, "clone", map[string]string{"mid": strconv.Itoa(id), "holder": l1.Token(), "node": sf1.Node(),
			"holder_host": "first", "holder_pid": "1111", "host": "second"})
		// Both go on: neither fenced the other.
		if err := l1.Renew(ctxT(t)); err != nil {
			t.Fatalf("first copy's renewal: %v", err)
		}
		if err := l2.Renew(ctxT(t)); err != nil {
			t.Fatalf("second copy's renewal: %v", err)
		}
	})
}

// rollBack makes Redis look as if it had lost the writes made after a
// point: reservation of id back to old (or gone when old < 0), the lease
// gone, and {flaked}:meta still there but written under another server
// identity, as when a replica that missed the last writes is promoted.
func rollBack(t *testing.T, rdb redis.UniversalClient, id int, old int64) {
	t.Helper()
	ctx := ctxT(t)
	mid := strconv.Itoa(id)
	if old >= 0 {
		if err := rdb.HSet(ctx, "{flaked}:reserved", mid, old).Err(); err != nil {
			t.Fatal(err)
		}
	} else if err := rdb.HDel(ctx, "{flaked}:reserved", mid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, "{flaked}:lease:"+mid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "{flaked}:meta", "server", "someoneelse").Err(); err != nil {
		t.Fatal(err)
	}
}

// Fault: Redis lost a suffix of its acknowledged writes but kept
// {flaked}:meta (a replica that missed them was promoted; simulated by
// rolling the reservation and the lease back by hand and changing the
// server identity {flaked}:meta was written under). Guard: guard.lua sees
// the identity change and records loss_ms; claims start after loss_ms +
// horizon, which covers every tick anyone was granted before; an owner
// whose lease is missing after a possible loss does not re-assert it. A
// duplicate shows as the new claimer's floor below the first owner's grant
// (it would issue ticks the first owner may have issued), or the first
// owner renewing successfully (it would keep issuing under an ID whose
// lost claim may have been someone else's).
func TestGuard_SuffixLost_MetaKept_LossFloorAndNoReassert(t *testing.T) {
	for _, order := range []string{"owner renews first", "claimer first"} {
		t.Run(order, func(t *testing.T) {
			backends(t, func(t *testing.T, rdb redis.UniversalClient) {
				l := tinyLayout(t)
				horizon := 3 * time.Second
				o := coord.Options{Layout: l, Horizon: horizon, MaxWait: time.Minute}
				o.Owner = coord.Owner{Host: "a"}
				regA := newGuardReg(t, rdb, o)
				o.Owner = coord.Owner{Host: "b"}
				regB := newGuardReg(t, rdb, o)
				// A registry that has run under this server for a while: no
				// recent loss, so the claim starts at once.
				if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
					t.Fatal(err)
				}
				a, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				id := a.MachineIDs()[0]
				now := redisNowTick(t, rdb, l)
				if a.Floor() >= now {
					t.Fatalf("A's floor %d is not below now %d: the setup has a loss floor already", a.Floor(), now)
				}
				old := now - 1 // what the lost writes had raised the reservation from
				// Far ahead, but within the horizon, as every node reserves.
				grant, err := a.Reserve(ctxT(t), now+250)
				if err != nil || grant != now+250 {
					t.Fatalf("A's Reserve = %d, %v", grant, err)
				}
				rollBack(t, rdb, id, old)

				renewA := func() {
					t.Helper()
					err := a.Renew(ctxT(t))
					if !errors.Is(err, coord.ErrLeaseLost) || errors.Is(err, coord.ErrFenced) {
						t.Fatalf("A's renewal after the loss: %v, want ErrLeaseLost (not fenced)", err)
					}
					if _, err := a.Reserve(ctxT(t), grant+100); err == nil {
						t.Fatal("A reserved again after losing its lease")
					}
				}
				if order == "owner renews first" {
					renewA()
					if n := rdb.Exists(ctxT(t), "{flaked}:lease:"+strconv.Itoa(id)).Val(); n != 0 {
						t.Fatal("A's lease was re-asserted after a possible data loss")
					}
					if r := reservedOf(t, rdb, id); r != old {
						t.Fatalf("reservation after A's failed renewal is %d, want %d untouched", r, old)
					}
				}
				b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if b.MachineIDs()[0] != id {
					t.Fatalf("B claimed %v, want %d (the only leasable ID)", b.MachineIDs(), id)
				}
				if b.Floor() < grant {
					t.Fatalf("B starts after tick %d, below A's grant %d that Redis lost: duplicate ticks", b.Floor(), grant)
				}
				if order == "claimer first" {
					renewA()
				}
				findEvent(t, rdb, "dataloss", map[string]string{"previous_server": "someoneelse"})
				if got := rdb.HGet(ctxT(t), "{flaked}:meta", "server").Val(); got == "someoneelse" {
					t.Fatal("{flaked}:meta still names the old server after the guard ran")
				}
			})
		})
	}
}

// Fault: redis-server restarts from an RDB snapshot older than its last
// writes (save points, or a crash between BGSAVEs): the registry, meta
// included, is back as it was at the SAVE. Guard: the restart changes the
// server identity (run_id), so the next script records loss_ms and claims
// start after loss_ms + horizon, above the reservation made after the SAVE;
// the owner whose lease vanished does not re-assert it. A duplicate shows
// as the new claim's floor below the grant made after the SAVE, or the old
// owner renewing. Real redis-server only: miniredis has no run_id.
func TestGuard_RestartFromOldRDB_ClaimAboveLostGrant(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{}) // no save points: only the explicit SAVE below
	rdb := srv.Client(t)
	l := tinyLayout(t)
	o := coord.Options{Layout: l, Horizon: 3 * time.Second, MaxWait: time.Minute, LeaseTTL: time.Second}
	o.Owner.Host = "a"
	regA := newGuardReg(t, rdb, o)
	o.Owner.Host = "b"
	regB := newGuardReg(t, rdb, o)
	if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
		t.Fatal(err)
	}
	a, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := a.MachineIDs()[0]
	if err := rdb.Save(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	saved := reservedOf(t, rdb, id)
	now := redisNowTick(t, rdb, l)
	grant, err := a.Reserve(ctxT(t), now+250)
	if err != nil || grant <= saved {
		t.Fatalf("Reserve after SAVE = %d, %v (saved reservation %d)", grant, err, saved)
	}
	srv.Kill() // SIGKILL: nothing after the SAVE reaches disk
	srv.Restart(t)
	if r := reservedOf(t, rdb, id); r != saved {
		t.Fatalf("after the restart the reservation is %d, want the snapshot's %d (the test needs the old RDB)", r, saved)
	}
	// The snapshot holds A's lease with its TTL: let it lapse, as it does
	// for an owner that lost contact during the restart.
	lease := "{flaked}:lease:" + strconv.Itoa(id)
	poll.Until(t, 5*time.Second, "A's lease from the snapshot to expire", func() bool {
		return rdb.Exists(ctxT(t), lease).Val() == 0
	})
	if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("A's renewal after the restart: %v, want ErrLeaseLost (no re-assert after a possible loss)", err)
	}
	b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.MachineIDs()[0] != id || b.Floor() < grant {
		t.Fatalf("B claimed %v with floor %d; A had been granted %d after the SAVE: duplicate ticks", b.MachineIDs(), b.Floor(), grant)
	}
	if len(events(t, rdb, "dataloss")) == 0 {
		t.Fatal("no dataloss event after the restart")
	}
}

// otherLayout differs from flake.DefaultLayout.
func otherLayout(t *testing.T) flake.Layout {
	l, err := flake.NewLayout(10, 14, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Fault: Redis lost everything (FLUSHALL, a restart without persistence)
// while an owner with layout X runs, and a node with another layout Y
// comes along. Guard: the owner's renewal cannot re-assert its lease but
// restores the fleet's layout and {flaked}:meta, so Y is refused. A
// duplicate shows as Y's claim succeeding: IDs of two layouts overlap (a
// Y ID can equal an X ID of another node).
func TestGuard_TotalLoss_OwnerRestoresLayout_OtherLayoutRefused(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		x, y := flake.DefaultLayout(), otherLayout(t)
		regX := newGuardReg(t, rdb, coord.Options{Layout: x})
		regY := newReg(t, rdb, coord.Options{Layout: y, LeaseTTL: time.Second})
		a, err := regX.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renewal after FLUSHALL: %v, want ErrLeaseLost", err)
		}
		if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != x.String() {
			t.Fatalf("layout after the renewal = %q, want %q restored", got, x.String())
		}
		if got := rdb.HGet(ctxT(t), "{flaked}:meta", "generation").Val(); got != a.Generation() {
			t.Fatalf("meta generation after the renewal = %q, want the owner's %q", got, a.Generation())
		}
		lease, err := regY.Claim(ctxT(t), coord.ClaimOptions{})
		if !errors.Is(err, coord.ErrLayoutMismatch) || lease != nil {
			t.Fatalf("claim with layout %v after the restore: lease %v, err %v; want ErrLayoutMismatch", y, lease, err)
		}
	})
}

// Fault: as above, but the node with layout Y claims first, on the empty
// namespace, and so does a new process of the fleet's layout X that never
// ran under the registry (no state file). Guard (guard.lua): only flaked
// init makes a registry, and only a caller that ran under it restores it,
// so both are refused with ErrNoRegistry and store nothing; the owner's
// renewal then restores X, and Y is refused for its layout. A duplicate
// shows as Y getting a lease (IDs of two layouts overlap: a Y ID can
// equal an X ID of another node), or Y's layout stored.
func TestGuard_TotalLoss_OtherLayoutFirst_RefusedUntilOwnerRestores(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		x, y := flake.DefaultLayout(), otherLayout(t)
		regX := newGuardReg(t, rdb, coord.Options{Layout: x})
		a, err := regX.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		regY, err := coord.NewRegistry(rdb, coord.Options{Layout: y, MaxWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		freshX, err := coord.NewRegistry(rdb, coord.Options{Layout: x, MaxWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for name, reg := range map[string]*coord.Registry{"layout Y": regY, "a new process of layout X": freshX} {
			lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
			if !errors.Is(err, coord.ErrNoRegistry) || lease != nil {
				t.Fatalf("%s on the emptied namespace: lease %v, err %v; want ErrNoRegistry", name, lease, err)
			}
			if !strings.Contains(err.Error(), "flaked init") {
				t.Fatalf("%s: %v does not name flaked init", name, err)
			}
		}
		if keys := rdb.Keys(ctxT(t), "{flaked}:*").Val(); len(keys) != 0 {
			t.Fatalf("refused claims left keys behind: %v", keys)
		}
		if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) || errors.Is(err, coord.ErrLayoutMismatch) {
			t.Fatalf("the owner's renewal after the loss: %v, want its lease lost (not a layout refusal)", err)
		}
		if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != x.String() {
			t.Fatalf("layout after the owner's renewal = %q, want %q restored", got, x.String())
		}
		findEvent(t, rdb, "layout_restored", map[string]string{"layout": x.String(), "token": a.Token()})
		if _, err := regY.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrLayoutMismatch) {
			t.Fatalf("a claim with layout Y after the restore: %v, want ErrLayoutMismatch", err)
		}
		if _, err := freshX.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
			t.Fatalf("a claim with layout X after the restore: %v", err)
		}
	})
}

// Fault: a clean stop right after the Redis server changed under the owner
// (restart or failover that kept the data), or lost it all. Guard:
// release.lua runs guard.lua first (recording the change) and still ends
// the reservation at the exact last tick used. A duplicate would need the
// reservation to end below the last tick; this pins that it is exactly the
// last tick, no error, and that the guard saw the change (so the next
// claim gets the loss floor).
func TestGuard_ReleaseAfterServerChange_ExactLastTick(t *testing.T) {
	for _, fault := range []string{"server changed", "flushed"} {
		t.Run(fault, func(t *testing.T) {
			backends(t, func(t *testing.T, rdb redis.UniversalClient) {
				l := flake.DefaultLayout()
				reg := newGuardReg(t, rdb, coord.Options{})
				lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				id := lease.MachineIDs()[0]
				now := redisNowTick(t, rdb, l)
				grant, err := lease.Reserve(ctxT(t), now+200)
				if err != nil {
					t.Fatal(err)
				}
				last := max(now, lease.Floor()) + 3
				if last >= grant {
					t.Fatalf("last tick %d not below the grant %d", last, grant)
				}
				switch fault {
				case "server changed":
					if err := rdb.HSet(ctxT(t), "{flaked}:meta", "server", "someoneelse").Err(); err != nil {
						t.Fatal(err)
					}
				case "flushed":
					if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if err := lease.Release(ctxT(t), last); err != nil {
					t.Fatalf("Release after the fault: %v", err)
				}
				if r := reservedOf(t, rdb, id); r != last {
					t.Fatalf("reservation after Release = %d, want the exact last tick %d (grant was %d)", r, last, grant)
				}
				meta := rdb.HGetAll(ctxT(t), "{flaked}:meta").Val()
				switch fault {
				case "server changed":
					if meta["server"] == "someoneelse" {
						t.Fatalf("release.lua did not run the guard: meta %v", meta)
					}
					findEvent(t, rdb, "dataloss", map[string]string{"previous_server": "someoneelse", "token": lease.Token()})
					findEvent(t, rdb, "release", map[string]string{"mid": strconv.Itoa(id), "last": strconv.FormatInt(last, 10)})
				case "flushed":
					if meta["generation"] != lease.Generation() || meta["loss_ms"] == "" {
						t.Fatalf("release.lua did not re-create {flaked}:meta with the lease's generation %s: %v", lease.Generation(), meta)
					}
				}
			})
		})
	}
}

// Fault: a failover to a master whose clock is behind the old one's. The
// owner renewed at the old master's time T; the new master notices the
// loss at its own T - 500 ms, earlier than the owner's last renewal by the
// clocks. An owner that compared times would take its missing lease back
// over a claim that may have been lost with the data; the loss ID
// (guard.lua) does not depend on the clocks, so the owner loses the lease
// and claims again above the loss floor.
func TestGuard_FailoverToClockBehind_NoReassert(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	now := time.Now()
	mr.SetTime(now) // miniredis's clock stands still from here
	reg := newGuardReg(t, rdb, coord.Options{})
	// A fleet's registry: its layout stored, as flaked init does.
	if err := rdb.Set(ctxT(t), "{flaked}:layout", reg.Layout().String(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr.SetTime(now.Add(time.Second))
	if err := a.Renew(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rollBack(t, rdb, a.MachineIDs()[0], -1)
	mr.SetTime(now.Add(500 * time.Millisecond)) // the new master's clock
	if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("renewal of a lease missing after a failover to a clock 500 ms behind: %v, want ErrLeaseLost", err)
	}
	if ev := events(t, rdb, "reassert"); len(ev) != 0 {
		t.Fatalf("the lease was re-asserted after a possible loss: %v", ev)
	}
}

// Fault: a process starts from a copy of a live node's state file and
// takes its lease over (fencing the original), then Redis fails over to a
// replica that never got the takeover: the lease is the original's again,
// and the copy has issued above the original's reservation. The
// simulator drives it (its renew-across-loss mutation removes this
// guard). Guard: a renewal extends
// nothing across a possible loss (renew.lua "loss"), so the original claims
// again, above the loss floor, instead of issuing on into the copy's
// ticks. A duplicate shows as the original's renewal succeeding (it would
// be granted the ticks the copy used) or its next claim starting below the
// copy's grant.
func TestGuard_TakeoverLostInFailover_NotExtended(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		dir := t.TempDir()
		orig, cp := filepath.Join(dir, "node.state"), filepath.Join(dir, "copy.state")
		l := flake.DefaultLayout()
		o := coord.Options{Horizon: 3 * time.Second}
		o.Owner = coord.Owner{Host: "orig", PID: 1111}
		regA := newGuardReg(t, rdb, o)
		o.Owner = coord.Owner{Host: "copy", PID: 2222}
		regB := newGuardReg(t, rdb, o)
		if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		sfA, prevA := openState(t, orig)
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{State: sfA, Previous: prevA})
		if err != nil {
			t.Fatal(err)
		}
		id, mid := a.MachineIDs()[0], strconv.Itoa(a.MachineIDs()[0])
		now := redisNowTick(t, rdb, l)
		grantA, err := a.Reserve(ctxT(t), now+100)
		if err != nil {
			t.Fatal(err)
		}
		// What the replica has: A's lease and reservation.
		leaseKey := "{flaked}:lease:" + mid
		ttl := rdb.PTTL(ctxT(t), leaseKey).Val()

		copyState(t, orig, cp)
		sfB, prevB := openState(t, cp)
		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{State: sfB, Previous: prevB})
		if err != nil || b.MachineIDs()[0] != id {
			t.Fatalf("the copy's claim: %v %v, want machine ID %d taken over", b, err, id)
		}
		grantB, err := b.Reserve(ctxT(t), redisNowTick(t, rdb, l)+200)
		if err != nil || grantB <= grantA {
			t.Fatalf("the copy's Reserve = %d, %v; want above %d", grantB, err, grantA)
		}

		// The failover: the takeover and B's reservation are lost, A's lease
		// is back, and the server is another one.
		ctx := ctxT(t)
		if err := rdb.Set(ctx, leaseKey, a.Token(), ttl).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, "{flaked}:reserved", mid, grantA).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, "{flaked}:meta", "server", "someoneelse").Err(); err != nil {
			t.Fatal(err)
		}

		_, err = a.Reserve(ctxT(t), grantB+50)
		if !errors.Is(err, coord.ErrLeaseLost) || !strings.Contains(err.Error(), "lost writes") {
			t.Fatalf("the original's reservation after the failover: %v; want the lease lost to a possible loss (it would be granted the copy's ticks)", err)
		}
		if r := reservedOf(t, rdb, id); r != grantA {
			t.Fatalf("reservation after the refused renewal is %d, want %d untouched", r, grantA)
		}
		if err := a.Release(ctxT(t), grantA); err != nil {
			t.Fatal(err)
		}
		sfA.Close()
		sfA2, prevA2 := openState(t, orig)
		a2, err := regA.Claim(ctxT(t), coord.ClaimOptions{State: sfA2, Previous: prevA2})
		if err != nil {
			t.Fatal(err)
		}
		if a2.Floor() < grantB {
			t.Fatalf("the original claims again after tick %d, below the copy's grant %d that Redis lost: duplicate ticks", a2.Floor(), grantB)
		}
	})
}

// copyRegistry is what Redis holds of the registry now (strings with their
// TTL, hashes, sets; not the event stream): a snapshot, a replica, a
// backup. putRegistry brings it back as a failover to that copy or a
// restart from it would, under another server identity.
type registryCopy struct {
	strs  map[string]string
	ttls  map[string]time.Duration
	hashs map[string]map[string]string
	sets  map[string][]string
}

func copyRegistry(t *testing.T, rdb redis.UniversalClient) registryCopy {
	t.Helper()
	ctx := ctxT(t)
	c := registryCopy{strs: map[string]string{}, ttls: map[string]time.Duration{}, hashs: map[string]map[string]string{}, sets: map[string][]string{}}
	for _, k := range rdb.Keys(ctx, "{flaked}:*").Val() {
		switch rdb.Type(ctx, k).Val() {
		case "string":
			c.strs[k], c.ttls[k] = rdb.Get(ctx, k).Val(), rdb.PTTL(ctx, k).Val()
		case "hash":
			c.hashs[k] = rdb.HGetAll(ctx, k).Val()
		case "set":
			c.sets[k] = rdb.SMembers(ctx, k).Val()
		}
	}
	return c
}

func putRegistry(t *testing.T, rdb redis.UniversalClient, c registryCopy) {
	t.Helper()
	ctx := ctxT(t)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for k, v := range c.strs {
		ttl := c.ttls[k]
		if ttl < 0 {
			ttl = 0
		}
		if err := rdb.Set(ctx, k, v, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, h := range c.hashs {
		if err := rdb.HSet(ctx, k, h).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, m := range c.sets {
		if err := rdb.SAdd(ctx, k, m).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, "{flaked}:meta", "server", "someoneelse").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestGuard_ReservationsEvicted_LossFloor: Redis evicts {ns}:reserved and a
// live lease together (a maxmemory-policy of allkeys-* set for a while:
// the scripts refuse to write then, but Redis evicts regardless, and the
// policy is set back) while its identity stays the same. A claim then
// sees no reservation for the ID, and without the guard would start at
// the old loss floor, below the ticks the evicted lease's owner was
// granted: duplicate IDs. Guard (guard.lua): {ns}:meta says a claim wrote
// the reservations, so their absence is a loss at this moment; the claim
// starts above now + the horizon, and the owner's renewal fails.
func TestGuard_ReservationsEvicted_LossFloor(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		o := coord.Options{Layout: l, Horizon: 3 * time.Second, MaxWait: time.Minute}
		o.Owner = coord.Owner{Host: "a"}
		regA := newGuardReg(t, rdb, o)
		o.Owner = coord.Owner{Host: "b"}
		regB := newGuardReg(t, rdb, o)
		if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := a.MachineIDs()[0]
		grant, err := a.Reserve(ctxT(t), redisNowTick(t, rdb, l)+250)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		if err := rdb.Del(ctx, "{flaked}:reserved", "{flaked}:lease:"+strconv.Itoa(id)).Err(); err != nil {
			t.Fatal(err)
		}
		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.MachineIDs()[0] != id {
			t.Fatalf("B claimed %v, want %d (the only leasable ID)", b.MachineIDs(), id)
		}
		if b.Floor() < grant {
			t.Fatalf("B starts after tick %d, below A's grant %d whose reservation was evicted: duplicate ticks", b.Floor(), grant)
		}
		if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("A's renewal after the eviction: %v, want ErrLeaseLost", err)
		}
		ev := events(t, rdb, "dataloss")
		if len(ev) == 0 || !strings.Contains(fmt.Sprint(ev[len(ev)-1]["detail"]), "reservations") {
			t.Fatalf("dataloss events %v: want one naming the reservations", ev)
		}
		// One loss, not one per script: B's renewal goes on.
		if err := b.Renew(ctxT(t)); err != nil {
			t.Fatalf("B's renewal after the loss: %v", err)
		}
	})
}
