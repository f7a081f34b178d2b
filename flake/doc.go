// Package flake is the pure ID generator of flaked: the layout of an ID,
// Compose/Decompose, and a lock-free generator. It does no I/O and knows
// nothing of Redis; coordination reaches it through Settings (Floor,
// Reserved, Reserve).
//
// An ID is | time | sequence | machine ID | in 63 bits. The default layout
// (39/8/16 bits, 10 ms ticks, epoch 2025-01-01 UTC) equals sonyflake v2's.
//
// Invariants of a Generator:
//   - IDs are strictly increasing in issue order, also across goroutines.
//   - No tick at or below Settings.Floor is issued.
//   - No tick above what Reserve granted is issued; Reserve is called before
//     the generator enters ticks it holds no grant for.
//   - It runs ahead of the clock (borrowing future ticks when a tick's
//     sequence is used up) by at most MaxLead; past that NextID waits. A
//     generator whose Floor is ahead of its clock starts at Floor+1 once
//     Reserve granted it, and runs at most that far ahead plus MaxLead.
//   - The wall clock is read once, at New; afterwards time comes from the
//     monotonic clock, so a wall-clock step while running moves nothing.
//   - After Close returns, nothing more is issued, and LastTick bounds every
//     tick that was.
//
// The hot path is one atomic add on a packed (tick, sequence, machine index)
// word plus two atomic loads; it takes no lock and reads no clock. A timer
// refreshes the current tick once per tick, and reservations are extended
// in the background before they run out.
package flake
