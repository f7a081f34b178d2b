package audit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redistest"
)

// TestPruneScript_RechecksEachID: prune.lua is handed IDs as if the audit
// had found them prunable, but a node claimed one since (live), another's
// reservation moved (recent), another's owner changed (changed). Only the
// truly old one is forgotten, and no reservation is touched.
func TestPruneScript_RechecksEachID(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := contract.NewKeys("scr")
	const cutoff = 1000
	setup := func(id, token string, reserved int, leased bool) {
		t.Helper()
		p := rdb.TxPipeline()
		p.SAdd(ctx, k.Machines, id)
		p.HSet(ctx, k.Owner(id), "host", "h"+id, "pid", id, "token", token, "state", "released")
		p.HSet(ctx, k.Reserved, id, reserved)
		if leased {
			p.Set(ctx, k.Lease(id), token, time.Minute)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	setup("1", "tok1", 10, true)      // claimed since the audit read it
	setup("2", "tok2", cutoff, false) // reservation not below the cutoff
	setup("3", "tok3-new", 10, false) // another owner since
	setup("4", "tok4", 10, false)     // old: forgotten
	keys, argv := contract.PruneArgs{Keys: k, Cutoff: cutoff, Host: "ops", PID: 9,
		IDs: []contract.PruneID{{MachineID: 1, Token: "tok1"}, {MachineID: 2, Token: "tok2"}, {MachineID: 3, Token: "tok3"},
			{MachineID: 4, Token: "tok4"}}}.KeysArgv()
	v, err := pruneScript.Run(ctx, rdb, keys, argv...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1", "live", "2", "recent", "3", "changed", "4", "pruned"}
	if !slices.Equal(v, want) {
		t.Fatalf("outcomes %v, want %v", v, want)
	}
	members, _ := rdb.SMembers(ctx, k.Machines).Result()
	slices.Sort(members)
	if !slices.Equal(members, []string{"1", "2", "3"}) {
		t.Errorf("registered after prune: %v", members)
	}
	for _, id := range []string{"1", "2", "3"} {
		if n, _ := rdb.Exists(ctx, k.Owner(id)).Result(); n != 1 {
			t.Errorf("owner data of %s deleted", id)
		}
	}
	if n, _ := rdb.Exists(ctx, k.Owner("4")).Result(); n != 0 {
		t.Error("owner data of 4 kept")
	}
	if tok, _ := rdb.Get(ctx, k.Lease("1")).Result(); tok != "tok1" {
		t.Errorf("live lease now %q", tok)
	}
	if res, _ := rdb.HGetAll(ctx, k.Reserved).Result(); len(res) != 4 || res["4"] != "10" {
		t.Errorf("reservations after prune: %v", res)
	}
	ev, err := rdb.XRange(ctx, k.Events, "-", "+").Result()
	if err != nil || len(ev) != 1 || ev[0].Values["mid"] != "4" || ev[0].Values["prev_host"] != "h4" || ev[0].Values["reserved"] != "10" {
		t.Errorf("prune events %v, %v", ev, err)
	}
}

func TestPrune_OlderThanZero_Refused(t *testing.T) {
	if _, err := Prune(context.Background(), nil, "x", PruneOptions{}); err == nil {
		t.Fatal("older than 0 accepted")
	}
}
