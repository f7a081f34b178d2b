package client_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// Parse decodes locally what the daemon's PARSE says, under the fleet's
// layout (here not the default one), for flake-mode IDs, counter-mode
// IDs and arbitrary 63-bit values.
func TestParse_EqualsDaemonPARSE(t *testing.T) {
	f := newFleet(t)
	flakeD, counterD := f.start(t, server.Options{}), f.startMode(t, node.ModeCounter, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{flakeD.addr, counterD.addr}})
	ctx := idtest.Context(t, 30*time.Second)

	var ids []uint64
	for range 4 { // round robin: both daemons, twice
		got, err := c.NextIDs(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ids = append(ids, rng.Uint64N(flake.MaxID+1))
	}
	ids = append(ids, 0, 1, flake.MaxID)

	l, err := c.Layout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Equal(testLayout) {
		t.Fatalf("Layout = %v, want the fleet's %v", l, testLayout)
	}
	requests := c.Stats().Daemons[0].Requests + c.Stats().Daemons[1].Requests

	rdb := redis.NewClient(&redis.Options{Addr: flakeD.addr, Protocol: 2})
	defer rdb.Close()
	modes := map[string]int{}
	for _, id := range ids {
		got, err := c.Parse(id)
		if err != nil {
			t.Fatalf("Parse(%d): %v", id, err)
		}
		reply, err := rdb.Do(ctx, "PARSE", id).Slice()
		if err != nil {
			t.Fatalf("PARSE %d: %v", id, err)
		}
		want := []any{reply[0], reply[1], reply[2], reply[3], reply[4]}
		have := []any{got.Time.Format("2006-01-02T15:04:05.000Z07:00"), got.Tick, int64(got.Sequence), int64(got.MachineID), got.Mode}
		for i := range want {
			if want[i] != have[i] {
				t.Fatalf("Parse(%d) = %+v, field %d is %v; daemon PARSE says %v", id, got, i, have[i], want)
			}
		}
		if got.ID != id || got.Time.Location() != time.UTC {
			t.Fatalf("Parse(%d) = %+v", id, got)
		}
		modes[got.Mode]++
	}
	if modes[client.ModeFlake] < 200 || modes[client.ModeCounter] < 200 {
		t.Fatalf("modes of the IDs parsed: %v, want both daemons' IDs", modes)
	}
	// Parse did no I/O: the layout was asked for once.
	if after := c.Stats().Daemons[0].Requests + c.Stats().Daemons[1].Requests; after != requests {
		t.Fatalf("%d requests during Parse", after-requests)
	}
	if _, err := c.Parse(flake.MaxID + 1); !errors.Is(err, flake.ErrInvalidID) {
		t.Fatalf("Parse(2^63) = %v, want ErrInvalidID", err)
	}
}

// Parse with no layout known yet asks a daemon; when none answers, it
// says so within the timeouts.
func TestParse_NoDaemon(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{closedAddr(t)}})
	if _, err := c.Parse(1); !errors.Is(err, client.ErrNoDaemon) {
		t.Fatalf("Parse with no daemon = %v, want ErrNoDaemon", err)
	}
	c = newClient(t, client.Options{Addrs: []string{blackHole(t)}, ReadTimeout: 50 * time.Millisecond})
	start := time.Now()
	if _, err := c.Parse(1); !errors.Is(err, client.ErrNoDaemon) {
		t.Fatalf("Parse with a hung daemon = %v, want ErrNoDaemon", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Parse took %v with a hung daemon", took)
	}
}
