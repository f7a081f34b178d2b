package node_test

import (
	"context"
	"fmt"
	"log"

	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// A node without Redis runs standalone on an embedded store, as
// `flaked serve` without --redis does. Give it a StateFile in production:
// it is then what keeps a restart from repeating IDs.
func ExampleNew() {
	ctx := context.Background()
	n, err := node.New(ctx, node.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close(ctx)

	a, err := n.NextID(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := n.NextID(ctx)
	fmt.Println("mode", n.Mode(), "machine IDs", len(n.MachineIDs()), "increasing", a < b)
	// Output: mode flake machine IDs 1 increasing true
}

// A node of a fleet: it leases a machine ID in the fleet's Redis, keeps it
// in its state file, reserves ticks before using them, and in auto mode
// falls back to the Redis counter while time-based IDs are not safe.
// Close gives the machine ID back with the exact last tick used, so a
// restart takes it again at once. (Not run by go test: it needs a Redis.)
func ExampleNew_redis() {
	ctx := context.Background()
	rdb, err := redisurl.NewClient("redis://127.0.0.1:6379") // or redis-sentinel://, redis-cluster://
	if err != nil {
		log.Fatal(err)
	}
	n, err := node.New(ctx, node.Options{
		Redis:     rdb,
		StateFile: "/var/lib/myapp/flaked-state.json",
		Mode:      node.ModeAuto,
	})
	if err != nil {
		// e.g. another layout than the fleet's, naming both, or no
		// registry: `flaked init` (coord.Init) makes it once per fleet.
		log.Fatal(err)
	}
	defer n.Close(ctx)

	id, err := n.NextID(ctx)
	if err != nil {
		log.Fatal(err) // node.ErrUnavailable says why no ID is safe now
	}
	fmt.Println(n.Layout().Decompose(id).MachineID == n.MachineIDs()[0])
}
