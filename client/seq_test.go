package client_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/seq"
	"github.com/flaked/flaked/server"
)

// Fault covered: a value of a tag handed out twice across daemons that
// share it, through the client's load spreading and batches.
func TestClient_NextSeq_UniqueAcrossDaemons(t *testing.T) {
	f := newFleet(t)
	d1 := f.startMode(t, node.ModeCounter, server.Options{})
	d2 := f.startMode(t, node.ModeCounter, server.Options{})
	ctx := idtest.Context(t, time.Minute)
	s, err := d1.node.Sequences()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "invoices", seq.TagOptions{Start: 1000, Step: 50}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Addrs: []string{d1.addr, d2.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				v, err := c.NextSeq(ctx, "invoices")
				if err != nil {
					t.Error(err)
					return
				}
				vs, err := c.NextSeqs(ctx, "invoices", 5)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, x := range append(vs, v) {
					if x < 1000 || seen[x] {
						t.Errorf("value %d handed out twice or below the start", x)
					}
					seen[x] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 4*200*6 {
		t.Fatalf("%d values", len(seen))
	}
	_, err = c.NextSeq(ctx, "nope")
	var ce *client.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "flaked seq create nope") {
		t.Fatalf("unknown tag: %v", err)
	}
}
