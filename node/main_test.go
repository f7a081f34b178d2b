package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
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

// newNode starts a node of o, closed with the test. Its namespace gets a
// registry first when it has none (see initRegistry): the tests start
// their fleets as an operator does, with flaked init.
func newNode(t *testing.T, o node.Options) *node.Node {
	t.Helper()
	initRegistry(t, o)
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

// initRegistry makes the registry of o's namespace, with o's layout, when
// o.Redis has none, as flaked init makes it for a fleet that issued
// nothing yet (redistest.InitRegistry); a {ns}:meta planted without a
// layout gets o's. A registry there is kept as it is, and so is a Redis
// the test has paused or stopped before the start (nothing to read: the
// test is about that), and a standalone node's store (it makes its own).
func initRegistry(t *testing.T, o node.Options) {
	t.Helper()
	if o.Redis == nil {
		return
	}
	ns, l := o.Registry.Namespace, o.Registry.Layout
	if ns == "" {
		ns = coord.DefaultNamespace
	}
	if l.BitsTime == 0 {
		l = flake.DefaultLayout()
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	keys := contract.NewKeys(ns)
	err := o.Redis.HGet(ctx, keys.Meta, contract.MetaGeneration).Err()
	switch {
	case errors.Is(err, redis.Nil):
		err = redistest.InitRegistry(ctx, o.Redis, ns, l.String())
	case err == nil:
		if err = o.Redis.Get(ctx, keys.Layout).Err(); errors.Is(err, redis.Nil) {
			err = o.Redis.Set(ctx, keys.Layout, l.String(), 0).Err()
		}
	default:
		return // Redis away on purpose
	}
	if err != nil {
		t.Fatal(err)
	}
}
