package seq

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// Fault covered: split brain. The master is partitioned from its replica
// (packets vanish: the master still lists the replica), the replica is
// promoted, and processes on both sides keep asking for 3 s. Grants of the
// old master are never acknowledged, so none is used: the old side fails
// closed (ErrNotAcknowledged) and no value is handed out twice. Without
// the WAIT the old master keeps granting at the tag's rate and overtakes
// the new master's loss floor after about a second.
func TestSequences_SplitBrain_UnacknowledgedGrantsUnused(t *testing.T) {
	master := redistest.Start(t, redistest.Options{})
	link := faultproxy.Start(t, master.Addr())
	replica := redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	ctx := idtest.Context(t, time.Minute)
	mc, rc := master.Client(t), replica.Client(t)
	poll.Until(t, 20*time.Second, "the replica to sync", func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	old := newSeqs(t, mc)
	if err := old.Create(ctx, "sb", TagOptions{Step: 50, Rate: 20_000, Burst: 1000}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	dupCount := 0
	record := func(side string, v int64) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := seen[v]; ok {
			dupCount++
			if dupCount < 3 {
				t.Errorf("value %d handed out twice: by %s and %s", v, prev, side)
			}
		}
		seen[v] = side
	}
	for range 500 {
		v, err := old.Next(ctx, "sb")
		if err != nil {
			t.Fatal(err)
		}
		record("old master", v)
	}
	if n, _ := mc.HGet(ctx, old.keys.Meta, "replicas").Result(); n != "1" {
		t.Fatalf("grants needed %q replicas (the fleet's mark), want 1", n)
	}
	link.Blackhole()
	if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	promoted := newSeqs(t, rc)
	defer promoted.Close(ctx)
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var refused int
	take := func(s *Sequences, side string) {
		defer wg.Done()
		for time.Now().Before(stop) {
			v, err := s.Next(ctx, "sb")
			if err != nil {
				if side == "old master" && errors.Is(err, ErrNotAcknowledged) {
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				t.Errorf("%s: %v", side, err)
				return
			}
			record(side, v)
		}
	}
	wg.Add(2)
	go take(old, "old master")
	go take(promoted, "promoted replica")
	wg.Wait()
	sides := map[string]int{}
	for _, side := range seen {
		sides[side]++
	}
	t.Logf("values per side: %v; old side: %+v", sides, old.Stats())
	if refused == 0 {
		t.Fatal("the old master's grants were used without an acknowledgement")
	}
	t.Logf("%d values, the old side refused %d times (%d grants unacknowledged)", len(seen), refused, old.Stats().Unacknowledged)
}
