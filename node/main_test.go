package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// TestMain drops go-redis's log lines about failed dials while Redis is
// paused or down on purpose.
func TestMain(m *testing.M) {
	redis.SetLogger(idtest.QuietRedis{})
	m.Run()
}

func realRedis(t *testing.T) *redistest.Server {
	t.Helper()
	redistest.Require(t)
	return redistest.Start(t, redistest.Options{})
}

// client returns a go-redis client with short timeouts, so a paused Redis
// costs a health check little.
func client(t *testing.T, srv *redistest.Server) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newNode(t *testing.T, o node.Options) *node.Node {
	t.Helper()
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// fast are node options for tests that switch modes: health checked every
// 20 ms, back to flake after 300 ms of health.
func fast(o node.Options) node.Options {
	o.CheckInterval = 20 * time.Millisecond
	o.RetryInterval = 50 * time.Millisecond
	o.RecoverAfter = 300 * time.Millisecond
	return o
}

// eachNode runs f for every node at once and returns what each returned,
// in node order.
func eachNode(nodes []*node.Node, f func(i int, n *node.Node) []uint64) [][]uint64 {
	got := make([][]uint64, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = f(i, n)
		}()
	}
	wg.Wait()
	return got
}
