// Package audit reads flaked's machine-ID registry and its event stream
// from Redis and turns them into reports: which owner holds which machine
// ID (Build, WriteTable), what happened to one ID (History), which owner
// issued a given ID (Whois), whether the registry is consistent (the
// Findings of a Report), and forgetting IDs nobody uses any more (Prune).
//
// Read takes one Snapshot: the keys of a namespace are read in MULTI/EXEC
// on the node that holds the namespace's hash-tag slot (each machine ID's
// keys in the same transaction), and the event stream up to the last entry
// the first transaction saw, so a report never mixes a claim's lease with
// the state before it. A machine ID registered while the IDs were listed is
// found from the events written meanwhile and read too. Every reply is
// bounded (SSCAN, HSCAN, SCAN and XRANGE in pages, 2,000 IDs a
// transaction), the rest of the IDs and the events are read at once on two
// connections, and ReadWith reports progress when a read takes over a
// second; the cost is linear in the registry and the stream (BENCHMARKS.md,
// Scale). Everything else
// works on a Snapshot and an injected "now", so reports are deterministic
// and testable without Redis.
//
// Invariants:
//   - Reading never writes. Only Prune writes, atomically per ID
//     (prune.lua), and never touches a live lease or a reservation.
//   - A claim's floor partitions the ticks of a machine ID between its
//     owners: the owner that claimed with floor F issued ticks above F and
//     at most the next claim's floor. Whois relies on this, not on clocks.
package audit
