package client_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// testLayout has 16 sequence bits (6.5M IDs/s per machine ID), so tests
// measure the client and the protocol, not the generator's rate limit.
var testLayout = func() flake.Layout {
	l, err := flake.NewLayout(16, 8, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		panic(err)
	}
	return l
}()

// fleet is daemons on one real redis-server, as a deployment runs them.
type fleet struct {
	redis *redistest.Server
	rdb   *redis.Client
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	r := redistest.Start(t, redistest.Options{})
	return &fleet{redis: r, rdb: r.Client(t)}
}

// init makes the fleet's registry with layout l unless Redis holds one,
// as flaked init does for a fleet that issued nothing yet
// (redistest.InitRegistry): a fleet's nodes start only once it is there.
func (f *fleet) init(t testing.TB, l flake.Layout) {
	t.Helper()
	ctx := idtest.Context(t, 10*time.Second)
	err := f.rdb.HGet(ctx, "{"+coord.DefaultNamespace+"}:meta", "generation").Err()
	if errors.Is(err, redis.Nil) {
		err = redistest.InitRegistry(ctx, f.rdb, coord.DefaultNamespace, l.String())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// testDaemon is a node and its protocol server on 127.0.0.1:0.
type testDaemon struct {
	addr  string
	node  *node.Node
	srv   *server.Server
	serve chan error
	once  sync.Once
}

// start starts a daemon of the fleet, stopped when the test ends.
func (f *fleet) start(t testing.TB, sopts server.Options) *testDaemon {
	t.Helper()
	return f.startMode(t, node.ModeFlake, sopts)
}

// startMode starts a daemon in a mode of node: flake, counter or auto.
func (f *fleet) startMode(t testing.TB, mode node.Mode, sopts server.Options) *testDaemon {
	t.Helper()
	f.init(t, testLayout)
	n, err := node.New(idtest.Context(t, 30*time.Second), node.Options{
		Redis:     f.rdb,
		Mode:      mode,
		Registry:  coord.Options{Layout: testLayout},
		StateFile: filepath.Join(t.TempDir(), "node.state"),
	})
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	// The node's first ID takes its first reservation: made here, so
	// tests time the client, not the node's start.
	if _, err := n.NextID(idtest.Context(t, 30*time.Second)); err != nil {
		t.Fatalf("first ID of the node: %v", err)
	}
	return serveNode(t, n, sopts)
}

// serveNode serves n on a loopback port; the server and then the node are
// stopped when the test ends.
func serveNode(t testing.TB, n *node.Node, sopts server.Options) *testDaemon {
	t.Helper()
	srv, err := server.New(n, sopts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{addr: ln.Addr().String(), node: n, srv: srv, serve: make(chan error, 1)}
	go func() { d.serve <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.stop(ctx)
		if err := n.Close(ctx); err != nil {
			t.Errorf("closing node of %s: %v", d.addr, err)
		}
	})
	return d
}

// kill stops the daemon abruptly, as a crash does for its clients: the
// listener and every connection are closed at once, replies in flight
// are lost.
func (d *testDaemon) kill() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.stop(ctx)
}

func (d *testDaemon) stop(ctx context.Context) {
	d.once.Do(func() {
		_ = d.srv.Shutdown(ctx)
		<-d.serve
	})
}

// machineIDs is the machine IDs the daemon's node leases.
func (d *testDaemon) machineIDs() []int { return d.node.MachineIDs() }

// info returns the daemon's INFO as a map, read over its own connection.
func (d *testDaemon) info(t testing.TB, password string) map[string]string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: d.addr, Protocol: 2, Password: password})
	defer rdb.Close()
	s, err := rdb.Info(idtest.Context(t, 10*time.Second)).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", d.addr, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// issued is how many IDs the daemon has issued, from its INFO.
func (d *testDaemon) issued(t testing.TB) int {
	t.Helper()
	n, err := strconv.Atoi(d.info(t, "")["ids_issued"])
	if err != nil {
		t.Fatalf("INFO ids_issued of %s: %v", d.addr, err)
	}
	return n
}

// fakeClock is a wall clock that moves only when told to.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
