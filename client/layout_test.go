package client_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// A fleet of the JS-safe width with regions: the client learns the layout
// from INFO, its Parse equals the daemon's PARSE (the region appended),
// every ID it is given is below 2^53, and an ID above the layout's range
// is an error naming it, not a wrong decoding.
func TestParse_BitsID53Region_EqualsDaemonPARSE(t *testing.T) {
	l, err := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8, BitsRegion: 2, Region: 3}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	f.init(t, l)
	ctx := idtest.Context(t, 60*time.Second)
	var addrs []string
	for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter} {
		n, err := node.New(ctx, node.Options{Redis: f.rdb, Mode: mode, Registry: coord.Options{Layout: l},
			StateFile: filepath.Join(t.TempDir(), "node.state")})
		if err != nil {
			t.Fatalf("node.New: %v", err)
		}
		if _, err := n.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, serveNode(t, n, server.Options{}).addr)
	}
	c := newClient(t, client.Options{Addrs: addrs})
	var ids []uint64
	for range 4 {
		got, err := c.NextIDs(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	last, _ := l.Compose(l.MaxTick(), l.MaxSequence(), l.CounterMachineID())
	ids = append(ids, 0, last)
	rdb := redis.NewClient(&redis.Options{Addr: addrs[0], Protocol: 2})
	defer rdb.Close()
	modes := map[string]int{}
	for _, id := range ids {
		if id >= 1<<53 {
			t.Fatalf("ID %d >= 2^53", id)
		}
		got, err := c.Parse(id)
		if err != nil {
			t.Fatalf("Parse(%d): %v", id, err)
		}
		reply, err := rdb.Do(ctx, "PARSE", id).Slice()
		if err != nil || len(reply) != 6 {
			t.Fatalf("PARSE %d = %v, %v; want 6 fields", id, reply, err)
		}
		have := []any{got.Time.Format("2006-01-02T15:04:05.000Z07:00"), got.Tick, int64(got.Sequence), int64(got.MachineID), got.Mode, int64(got.Region)}
		for i := range reply {
			if reply[i] != have[i] {
				t.Fatalf("Parse(%d) = %+v, field %d is %v; daemon PARSE says %v", id, got, i, have[i], reply)
			}
		}
		if id != 0 && got.Region != 3 {
			t.Fatalf("ID %d of region 3 parsed as region %d", id, got.Region)
		}
		modes[got.Mode]++
	}
	if modes[client.ModeFlake] < 50 || modes[client.ModeCounter] < 50 {
		t.Fatalf("modes %v: want IDs of both daemons", modes)
	}
	if _, err := c.Parse(1 << 53); !errors.Is(err, flake.ErrInvalidID) {
		t.Fatalf("Parse(2^53) = %v, want ErrInvalidID", err)
	}
}
