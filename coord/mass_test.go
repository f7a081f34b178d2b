package coord_test

import (
	"fmt"
	"io"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/statefile"
)

// memFS keeps state files in memory: 500 nodes' fsyncs would measure the
// disk, not the claims.
type memFS struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (m *memFS) Lock(string) (io.Closer, error) { return io.NopCloser(nil), nil }

func (m *memFS) ReadFile(path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return b, nil
}

func (m *memFS) WriteFile(path string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = append([]byte(nil), data...)
	return nil
}

// massNode is one node of a mass start: its own Redis connection, as a
// process on its own host would have, and its state file.
type massNode struct {
	reg   *coord.Registry
	path  string
	lease *coord.Lease
}

// startAll claims for every node at once (a gate opened when all wait)
// and returns the first error.
func startAll(t *testing.T, fsys *memFS, nodes []*massNode) error {
	t.Helper()
	gate := make(chan struct{})
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			sf, prev, err := statefile.OpenFS(fsys, n.path, nil)
			if err == nil {
				n.lease, err = n.reg.Claim(ctxT(t), coord.ClaimOptions{State: sf, Previous: prev})
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", n.path, err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(errs)
	return <-errs
}

// checkLive fails when a machine ID is held by two live leases: each live
// lease key in Redis must hold the token of exactly the lease that lists
// the ID, and no two live leases list one ID.
func checkLive(t *testing.T, rdb redis.UniversalClient, live []*coord.Lease) {
	t.Helper()
	holder := map[int]*coord.Lease{}
	for _, l := range live {
		for _, id := range l.MachineIDs() {
			if o := holder[id]; o != nil {
				t.Fatalf("machine ID %d held by two live leases: %s and %s", id, o.Token()[:8], l.Token()[:8])
			}
			holder[id] = l
		}
	}
	for id, l := range holder {
		tok, err := rdb.Get(ctxT(t), fmt.Sprintf("{flaked}:lease:%d", id)).Result()
		if err != nil || tok != l.Token() {
			t.Fatalf("machine ID %d: lease key %q (%v), want the token of its live lease %s", id, tok, err, l.Token()[:8])
		}
	}
}

// TestClaim_MassStart_NoDuplicateMachineID: 500 nodes, each with its own
// connection, claim at once in a 10-bit space (1,022 leasable IDs, so
// their random candidates collide), as after a deploy. Then 250 of them
// stop cleanly, 250 are killed (their leases still live), and all 500
// start again at once from their state files, with 100 new nodes
// competing: the killed ones take their own leases over. After each start
// every node holds an ID and no ID is held by two live leases.
func TestClaim_MassStart_NoDuplicateMachineID(t *testing.T) {
	srv, admin := realRedis(t)
	l, err := flake.NewLayout(8, 10, 10*time.Millisecond, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	newReg(t, admin, coord.Options{Layout: l}) // the registry exists, no loss floor
	fsys := &memFS{files: map[string][]byte{}}
	mk := func(i int) *massNode {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
		t.Cleanup(func() { rdb.Close() })
		reg, err := coord.NewRegistry(rdb, coord.Options{Layout: l, Horizon: coord.DefaultHorizon,
			Owner: coord.Owner{Host: fmt.Sprintf("node-%d", i), PID: 1000 + i}})
		if err != nil {
			t.Fatal(err)
		}
		return &massNode{reg: reg, path: fmt.Sprintf("/state/%d.json", i)}
	}
	var nodes []*massNode
	for i := range 500 {
		nodes = append(nodes, mk(i))
	}
	if err := startAll(t, fsys, nodes); err != nil {
		t.Fatal(err)
	}
	var live []*coord.Lease
	for _, n := range nodes {
		live = append(live, n.lease)
	}
	checkLive(t, admin, live)

	for i, n := range nodes {
		if i%2 == 0 {
			if err := n.lease.Release(ctxT(t), n.lease.Floor()); err != nil {
				t.Fatal(err)
			}
		} else {
			n.lease.Abandon() // killed: the lease stays live until its TTL
		}
	}
	for i := range 100 {
		nodes = append(nodes, mk(500+i))
	}
	if err := startAll(t, fsys, nodes); err != nil {
		t.Fatal(err)
	}
	live = live[:0]
	reused := 0
	for i, n := range nodes {
		live = append(live, n.lease)
		if i < 500 && i%2 == 1 && n.lease.ClaimEvents()[0] == "reclaim" {
			reused++
		}
	}
	checkLive(t, admin, live)
	if reused != 250 {
		t.Errorf("%d of 250 killed nodes took their own lease over, want all", reused)
	}
}
