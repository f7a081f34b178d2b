package audit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// The fleet tests run each node in its own process: this test binary,
// started again with FLAKED_AUDIT_TEST_NODE set, runs one real node
// (node.New on the test's redis-server) and obeys lines on stdin. So a
// crash is a real kill -9, and every owner has its own pid.
func TestMain(m *testing.M) {
	if os.Getenv("FLAKED_AUDIT_TEST_NODE") != "" {
		os.Exit(nodeMain())
	}
	// go-redis's log lines about failed dials to servers the tests killed
	// on purpose are dropped.
	redis.SetLogger(idtest.QuietRedis{})
	os.Exit(m.Run())
}

// nodeConfig is what a fleet test tells a node process, as JSON in
// FLAKED_AUDIT_TEST_NODE.
type nodeConfig struct {
	Redis       string
	Namespace   string
	BitsMachine int
	Addr        string
}

// nodeReply is one line a node process writes.
type nodeReply struct {
	PID        int      `json:"pid,omitempty"`
	MachineIDs []int    `json:"machine_ids,omitempty"`
	IDs        []uint64 `json:"ids,omitempty"`
	Closed     bool     `json:"closed,omitempty"`
	Err        string   `json:"err,omitempty"`
}

func fleetLayout(bitsMachine int) flake.Layout {
	l, err := flake.NewLayout(8, bitsMachine, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		panic(err)
	}
	return l
}

// The nodes' reach: short, so a killed node's reservation is soon past.
const (
	nodeMaxLead      = 20 * time.Millisecond
	nodeReserveAhead = 50 * time.Millisecond
)

// nodeMain runs one node: it prints its machine IDs, then answers
// "ids <n>" with n IDs and "close" by closing the node (a clean stop).
func nodeMain() int {
	var cfg nodeConfig
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(nodeReply{Err: err.Error()})
		return 1
	}
	if err := json.Unmarshal([]byte(os.Getenv("FLAKED_AUDIT_TEST_NODE")), &cfg); err != nil {
		return fail(err)
	}
	rdb, err := redisurl.NewClient(cfg.Redis)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.New(ctx, node.Options{
		Redis: rdb,
		Registry: coord.Options{
			Namespace: cfg.Namespace,
			Layout:    fleetLayout(cfg.BitsMachine),
			LeaseTTL:  time.Second,
			Owner:     coord.Owner{Addr: cfg.Addr, Version: "test-1"},
		},
		MaxLead:      nodeMaxLead,
		ReserveAhead: nodeReserveAhead,
	})
	if err != nil {
		return fail(err)
	}
	_ = out.Encode(nodeReply{PID: os.Getpid(), MachineIDs: n.MachineIDs()})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "ids":
			k, _ := strconv.Atoi(arg)
			ids := make([]uint64, k)
			if _, err := n.NextIDs(ctx, ids); err != nil {
				return fail(err)
			}
			_ = out.Encode(nodeReply{IDs: ids})
		case "close":
			if err := n.Close(ctx); err != nil {
				return fail(err)
			}
			_ = out.Encode(nodeReply{Closed: true})
			return 0
		}
	}
	_ = n.Close(ctx)
	return 0
}

// proc is a node process seen from the test.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies chan nodeReply
	pid     int
	mid     int
	addr    string
	ids     []uint64
	once    sync.Once
}

// startNode starts a node process and waits for its claim.
func startNode(t *testing.T, url, ns string, bitsMachine int, addr string) *proc {
	t.Helper()
	p := newProc(t, url, ns, bitsMachine, addr)
	p.await()
	return p
}

func newProc(t *testing.T, url, ns string, bitsMachine int, addr string) *proc {
	t.Helper()
	initFleet(t, client(t, url), ns, fleetLayout(bitsMachine))
	cfg, _ := json.Marshal(nodeConfig{Redis: url, Namespace: ns, BitsMachine: bitsMachine, Addr: addr})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLAKED_AUDIT_TEST_NODE="+string(cfg))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, in: in, replies: make(chan nodeReply, 4), addr: addr}
	go func() {
		defer close(p.replies)
		dec := json.NewDecoder(stdout)
		for {
			var r nodeReply
			if dec.Decode(&r) != nil {
				return
			}
			p.replies <- r
		}
	}()
	t.Cleanup(p.kill)
	return p
}

// await waits for the node's first line: its pid and machine ID.
func (p *proc) await() {
	p.t.Helper()
	r := p.reply()
	if len(r.MachineIDs) != 1 {
		p.t.Fatalf("node %s leased %v, want one machine ID", p.addr, r.MachineIDs)
	}
	p.pid, p.mid = r.PID, r.MachineIDs[0]
}

func (p *proc) reply() nodeReply {
	p.t.Helper()
	select {
	case r, ok := <-p.replies:
		if !ok {
			p.t.Fatalf("node %s exited", p.addr)
		}
		if r.Err != "" {
			p.t.Fatalf("node %s: %s", p.addr, r.Err)
		}
		return r
	case <-time.After(30 * time.Second):
		p.t.Fatalf("node %s did not answer within 30s", p.addr)
	}
	return nodeReply{}
}

// issue has the node issue n IDs and keeps them.
func (p *proc) issue(n int) []uint64 {
	p.t.Helper()
	fmt.Fprintf(p.in, "ids %d\n", n)
	ids := p.reply().IDs
	if len(ids) != n {
		p.t.Fatalf("node %s issued %d IDs, want %d", p.addr, len(ids), n)
	}
	p.ids = append(p.ids, ids...)
	return ids
}

// stop closes the node cleanly: it releases its machine ID.
func (p *proc) stop() {
	p.t.Helper()
	fmt.Fprintln(p.in, "close")
	if !p.reply().Closed {
		p.t.Fatalf("node %s did not close", p.addr)
	}
	p.once.Do(func() { _ = p.cmd.Wait() })
}

// kill is kill -9: no release, the lease runs out after its TTL.
func (p *proc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}

// ctxT bounds a test's calls to Redis: a minute.
func ctxT(t *testing.T) context.Context { return idtest.Context(t, time.Minute) }

func client(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisurl.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// report reads and builds the audit of ns.
func report(t *testing.T, rdb redis.UniversalClient, ns string) (*audit.Snapshot, *audit.Report) {
	t.Helper()
	s, err := audit.Read(ctxT(t), rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	return s, audit.Build(s)
}

func row(t *testing.T, rep *audit.Report, mid int) audit.Machine {
	t.Helper()
	for _, m := range rep.Machines {
		if m.MachineID == mid {
			return m
		}
	}
	t.Fatalf("machine ID %d not in the report: %+v", mid, rep.Machines)
	return audit.Machine{}
}

// waitState polls the audit until machine ID mid is in state want (a
// lease runs out within its 1 s TTL).
func waitState(t *testing.T, rdb redis.UniversalClient, ns string, mid int, want audit.State) (*audit.Snapshot, *audit.Report) {
	t.Helper()
	var s *audit.Snapshot
	var rep *audit.Report
	poll.UntilNil(t, 10*time.Second, fmt.Sprintf("machine ID %d %s", mid, want), func() error {
		s, rep = report(t, rdb, ns)
		if got := row(t, rep, mid).State; got != want {
			return fmt.Errorf("machine ID %d is %s, want %s", mid, got, want)
		}
		return nil
	})
	return s, rep
}

// checkOwner asserts a row names the node process.
func checkOwner(t *testing.T, l flake.Layout, m audit.Machine, p *proc, state audit.State) {
	t.Helper()
	if m.State != state || m.Owner == nil || m.Owner.PID != p.pid || m.Owner.Addr != p.addr ||
		m.Owner.Version != "test-1" || m.Mode != "flake" || m.ReservedTick == nil || m.LastClaim == nil {
		t.Errorf("machine ID %d: %+v owner %+v; want %s, owned by pid %d addr %s", m.MachineID, m, m.Owner, state, p.pid, p.addr)
	}
	if m.ReservedTick != nil && len(p.ids) > 0 {
		last := l.Decompose(p.ids[len(p.ids)-1]).Tick
		if *m.ReservedTick < last {
			t.Errorf("machine ID %d: reservation %d below the tick %d of its last ID", m.MachineID, *m.ReservedTick, last)
		}
	}
}

// initFleet makes the registry of ns as flaked init does (coord.Init,
// whose created time the audit needs to call its event stream complete)
// unless it exists, with the loss floor of the nodes' horizon.
func initFleet(t *testing.T, rdb redis.UniversalClient, ns string, l flake.Layout) {
	t.Helper()
	// The horizon of the nodes (nodeMain): flaked init fixes the fleet's,
	// and no node is granted further ahead than it.
	horizon, err := node.Options{Registry: coord.Options{Namespace: ns, Layout: l},
		MaxLead: nodeMaxLead, ReserveAhead: nodeReserveAhead}.Horizon()
	if err != nil {
		t.Fatal(err)
	}
	_, err = coord.Init(ctxT(t), rdb, coord.Options{Namespace: ns, Layout: l, Horizon: horizon})
	if err != nil && !errors.Is(err, coord.ErrRegistryExists) {
		t.Fatal(err)
	}
}

// startFleet starts n nodes at once.
func startFleet(t *testing.T, url, ns string, bits int, addrs ...string) []*proc {
	t.Helper()
	var ps []*proc
	for _, a := range addrs {
		ps = append(ps, newProc(t, url, ns, bits, a))
	}
	for _, p := range ps {
		p.await()
	}
	return ps
}
