package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/node"
)

// A split brain: two Redis masters accepting writes at once.
// The old master M is partitioned from its replica (and from whatever
// promotes it) but still reached by half of the nodes; 0.3 s later the
// replica R is promoted and the other half of the nodes moves to it. Both
// masters accept writes for longer than the lease TTL and the fleet's
// horizon; then M is made a replica of R and its nodes move over too. Each
// side runs a node in flake, counter and auto mode, under load, and every
// ID is checked.
//
// The nodes run in this process (package node, the daemon's engine) so the
// same scenario can run with the WAIT after grants switched off: that run
// must produce duplicates, which shows the scenario reaches the fault the
// mechanism closes. The binary has no such switch.

// splitBrainRun is the outcome of one run.
type splitBrainRun struct {
	ids, dups  int
	sideErrors string // what a node on M reported while partitioned
}

func TestSplitBrain_TwoMasters_NoDuplicate(t *testing.T) {
	r := splitBrain(t, 6*time.Second)
	if r.dups != 0 {
		t.Fatalf("%d duplicates among %d IDs with the replica wait on", r.dups, r.ids)
	}
	// The nodes on M were told why they got nothing new.
	if !strings.Contains(r.sideErrors, "grant not acknowledged by the replicas") ||
		!strings.Contains(r.sideErrors, "flaked audit replicas --set") {
		t.Errorf("the nodes on the old master did not report refused grants: %q", r.sideErrors)
	}
}

// Teeth: the same with the wait off (what min-replicas-to-write left).
func TestSplitBrain_TwoMasters_WithoutWait_Duplicates(t *testing.T) {
	was := replwait.SetOffForTest(true)
	t.Cleanup(func() { replwait.SetOffForTest(was) })
	r := splitBrain(t, 6*time.Second)
	if r.dups == 0 {
		t.Fatalf("no duplicate among %d IDs with the replica wait off: the scenario does not reach a split brain", r.ids)
	}
	t.Logf("with the wait off: %d duplicates among %d IDs (expected: the test has teeth)", r.dups, r.ids)
}

// sbNode is one in-process node and the proxy it reaches Redis through.
type sbNode struct {
	name  string
	mode  node.Mode
	proxy *faultproxy.Proxy
	rdb   *redis.Client
	n     *node.Node

	mu      sync.Mutex
	ids     []uint64
	lastErr string
	errs    []string
}

func splitBrain(t *testing.T, split time.Duration) splitBrainRun {
	redistest.Require(t)
	m := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	link := faultproxy.Start(t, m.Addr())
	r := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0",
		"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	mc, rc := m.Client(t), r.Client(t)
	waitReplicas(t, mc, 1)

	// Two machine bits: 3 leasable IDs for 4 nodes that may lease, so the
	// nodes moved to R take over IDs the nodes on M still use.
	layout, err := flake.NewLayout(8, 2, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	if err := redistest.InitRegistry(ctxT(t), mc, coord.DefaultNamespace, layout.String()); err != nil {
		t.Fatal(err)
	}
	var nodes []*sbNode
	for _, side := range []string{"m", "r"} {
		for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
			p := faultproxy.Start(t, m.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: 300 * time.Millisecond,
				ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			nodes = append(nodes, &sbNode{name: side + "-" + mode.String(), mode: mode, proxy: p, rdb: rdb})
		}
	}
	// The nodes that may lease start first, so the last auto node is the
	// one without a machine ID.
	order := []int{0, 3, 2, 5, 1, 4}
	for _, i := range order {
		sn := nodes[i]
		n, err := node.New(ctxT(t), node.Options{Redis: sn.rdb, Mode: sn.mode,
			Registry:      coord.Options{Layout: layout, LeaseTTL: time.Second, Owner: coord.Owner{Host: sn.name}},
			RetryInterval: 100 * time.Millisecond, RecoverAfter: 500 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", sn.name, err)
		}
		sn.n = n
		t.Cleanup(func() { _ = n.Close(context.Background()) })
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, sn := range nodes {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sn.load(stop)
			}()
		}
	}
	total := func() int {
		s := 0
		for _, sn := range nodes {
			sn.mu.Lock()
			s += len(sn.ids)
			sn.mu.Unlock()
		}
		return s
	}
	waitIDs := func(n int, what string) {
		t.Helper()
		start, deadline := total(), time.Now().Add(30*time.Second)
		for total()-start < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d IDs in 30 s", what, total()-start, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitIDs(50_000, "warm-up")

	// The partition: M keeps its nodes (and lists its replica until
	// repl-timeout) but nothing reaches R from it.
	link.Blackhole()
	time.Sleep(300 * time.Millisecond)
	if err := rc.SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	for _, sn := range nodes[3:] {
		sn.proxy.Redirect(r.Addr())
	}
	for _, sn := range nodes[:3] {
		sn.clearErr()
	}
	time.Sleep(split) // two masters accept writes
	var sideErrors []string
	for _, sn := range nodes[:3] {
		sideErrors = append(sideErrors, sn.name+": "+strings.Join(sn.errors(), " | "))
	}

	// The partition ends: M becomes R's replica (losing what it alone
	// held) and its nodes move to R.
	if err := mc.SlaveOf(ctxT(t), "127.0.0.1", strconv.Itoa(r.Port())).Err(); err != nil {
		t.Fatal(err)
	}
	for _, sn := range nodes[:3] {
		sn.proxy.Redirect(r.Addr())
	}
	waitIDs(50_000, "after the partition")
	close(stop)
	wg.Wait()

	all, from := []uint64{}, []string{}
	for _, sn := range nodes {
		all = append(all, sn.ids...)
		for range sn.ids {
			from = append(from, sn.name)
		}
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpU(all[a], all[b]) })
	dups, counterDups := 0, 0
	for k := 1; k < len(idx); k++ {
		if a, b := idx[k-1], idx[k]; all[a] == all[b] {
			if layout.Decompose(all[a]).MachineID == layout.CounterMachineID() {
				counterDups++
			}
			if dups++; dups <= 5 {
				t.Logf("duplicate %d %+v: %s and %s", all[a], layout.Decompose(all[a]), from[a], from[b])
			}
		}
	}
	for _, sn := range nodes {
		t.Logf("%s: %d IDs", sn.name, len(sn.ids))
	}
	t.Logf("%d IDs checked, %d duplicates (%d of counter mode, %d of flake mode)", len(all), dups, counterDups, dups-counterDups)
	return splitBrainRun{ids: len(all), dups: dups, sideErrors: strings.Join(sideErrors, "\n")}
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// load asks the node for batches of IDs until stop, keeping them all and
// the distinct errors it saw.
func (sn *sbNode) load(stop chan struct{}) {
	buf := make([]uint64, 64)
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		got, err := sn.n.NextIDs(ctx, buf)
		cancel()
		sn.mu.Lock()
		sn.ids = append(sn.ids, buf[:got]...)
		if err != nil {
			sn.noteLocked(err.Error())
		}
		for _, kv := range sn.n.Info() {
			if strings.HasSuffix(kv[0], "_last_error") && kv[1] != "" {
				sn.noteLocked(kv[1])
			}
		}
		sn.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

func (sn *sbNode) noteLocked(e string) {
	if e != sn.lastErr && len(sn.errs) < 50 && !slices.Contains(sn.errs, e) {
		sn.errs = append(sn.errs, e)
	}
	sn.lastErr = e
}

func (sn *sbNode) clearErr() {
	sn.mu.Lock()
	sn.errs, sn.lastErr = nil, ""
	sn.mu.Unlock()
}

func (sn *sbNode) errors() []string {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return slices.Clone(sn.errs)
}

// waitReplicas waits until the master behind rdb lists n online replicas
// that acknowledge a write (ackedWrite: the first ACK after a full sync
// comes up to 1 s later).
func waitReplicas(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := coord.SplitBrainCheck(ctxT(t), rdb, "")
		if err == nil && m.Online == n && ackedWrite(rdb, n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master does not list %d online replicas: %+v, %v", n, m, errors.Join(err, fmt.Errorf("timeout")))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
