package node

import (
	"context"

	"github.com/flaked/flaked/flake"
)

// Generator is what the daemon and embedding programs use: one node's ID
// source, whatever mode it is in. Implementations are safe for concurrent
// use; IDs are strictly increasing in issue order across mode switches.
type Generator interface {
	// NextID returns one ID, or an error when none can be issued safely
	// (never a guessed ID).
	NextID(ctx context.Context) (uint64, error)
	// NextIDs fills dst and returns how many it filled (len(dst) unless
	// err is set).
	NextIDs(ctx context.Context, dst []uint64) (int, error)
	// Mode is the mode IDs are issued in now: ModeFlake or ModeCounter.
	Mode() Mode
	// Layout is the fleet's ID layout.
	Layout() flake.Layout
	// Ready reports whether the node can issue IDs now.
	Ready() bool
	// Info returns key/value pairs for the daemon's INFO command, in order.
	Info() [][2]string
	// Close stops issuing, releases leases with the exact last tick and
	// flushes the state file.
	Close(ctx context.Context) error
}

// TryGenerator is a Generator that can also issue without blocking. The
// daemon's event loops use it; a Generator without it is served from a
// goroutine per connection.
type TryGenerator interface {
	Generator
	// TryNextIDs fills dst if all of it can be issued at once, without
	// waiting, and reports whether it did; false issues nothing.
	TryNextIDs(dst []uint64) bool
}
