// Package node is one flaked node: it owns the lease on its machine IDs
// (package coord), the generator (package flake) and the local state
// file, and exposes them as one Generator, used by the daemon and by Go
// programs that embed flaked.
//
// Invariants: the generator starts after the lease's floor and issues only
// ticks the lease has reserved in Redis and in the state file; Close stops
// issuing before it releases the lease with the exact last tick, so a
// clean restart reuses the same machine IDs at once. Without Redis the
// node runs standalone on an embedded store, and the state file alone
// carries uniqueness across restarts.
package node
