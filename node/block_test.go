package node_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

// blockIssuer takes blocks of up to size IDs in one goroutine until
// stopped, alternating TryNextBlock and NextBlock, and records every ID
// of every block in issue order.
type blockIssuer struct {
	mu     sync.Mutex
	ids    []uint64
	blocks int
	modes  []node.Mode
	stop   chan struct{}
	done   chan struct{}
}

func startBlockIssuer(n *node.Node, size int64) *blockIssuer {
	bi := &blockIssuer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(bi.done)
		for i := 0; ; i++ {
			select {
			case <-bi.stop:
				return
			default:
			}
			b, ok := flake.Block{}, false
			if i%2 == 0 {
				b, ok = n.TryNextBlock(size)
			}
			if !ok {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				var err error
				b, err = n.NextBlock(ctx, size)
				cancel()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
			}
			mode := n.Mode()
			bi.mu.Lock()
			for j := range b.Count {
				bi.ids = append(bi.ids, b.ID(j))
			}
			bi.blocks++
			if len(bi.modes) == 0 || bi.modes[len(bi.modes)-1] != mode {
				bi.modes = append(bi.modes, mode)
			}
			bi.mu.Unlock()
			time.Sleep(time.Millisecond) // a client using its block
		}
	}()
	return bi
}

func (bi *blockIssuer) halt() {
	close(bi.stop)
	<-bi.done
}

// Fault: a block not counted as issued at a mode switch. An auto node
// goes flake -> counter -> flake (Redis away longer than the
// reservation, then back) while one goroutine takes blocks and another
// single IDs. A switch that did not count the blocks handed out would
// start the next source below them: the counter's first values, or the
// returning generator's first ticks, would repeat IDs of a block. Every
// ID of every block and every NextID is unique, and each goroutine's
// increase across both switches.
func TestAuto_BlocksAcrossModeSwitches_NoDuplicates(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	o := fast(node.Options{Redis: rdb, Mode: node.ModeAuto, MaxLead: 50 * time.Millisecond,
		ReserveAhead: 100 * time.Millisecond, Registry: coord.Options{LeaseTTL: time.Second},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	o.RecoverAfter = 1500 * time.Millisecond // long enough for counter blocks once Redis is back
	n := newNode(t, o)
	if n.Mode() != node.ModeFlake {
		t.Fatalf("started in %s mode", n.Mode())
	}
	bi := startBlockIssuer(n, 300)
	is := startIssuer(n)
	poll.Until(t, 5*time.Second, "flake IDs", func() bool { return is.count() > 1000 })
	srv.Pause()
	poll.Until(t, 5*time.Second, "the fallback to counter mode", func() bool { return n.Mode() == node.ModeCounter })
	time.Sleep(1500 * time.Millisecond) // longer than the lease TTL
	before := is.count()
	srv.Resume()
	poll.Until(t, 10*time.Second, "counter IDs", func() bool { return is.counterAfter(before) })
	poll.Until(t, 15*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	poll.Until(t, 5*time.Second, "blocks in flake mode again", func() bool {
		bi.mu.Lock()
		defer bi.mu.Unlock()
		return len(bi.modes) >= 3 && bi.modes[len(bi.modes)-1] == node.ModeFlake
	})
	is.halt()
	bi.halt()

	l := n.Layout()
	idtest.Increasing(t, l, "blocks", bi.ids)
	idtest.Increasing(t, l, "NextID", is.ids)
	idtest.Unique(t, l, append(slices.Clone(bi.ids), is.ids...))
	if !slices.Contains(bi.modes, node.ModeCounter) || bi.modes[0] != node.ModeFlake || bi.modes[len(bi.modes)-1] != node.ModeFlake {
		t.Fatalf("blocks taken in modes %v: want flake, counter, flake", bi.modes)
	}
	t.Logf("%d blocks (%d IDs) and %d single IDs; modes seen by blocks: %v", bi.blocks, len(bi.ids), len(is.ids), bi.modes)
}
