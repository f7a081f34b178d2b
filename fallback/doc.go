// Package fallback is flaked's counter mode: IDs from the Redis counter
// {ns}:counter, fetched in segments by scripts/lua/counter.lua (an INCRBY
// with floors) and encoded in the flake layout as (tick, sequence) under the
// reserved counter machine ID 2^BitsMachineID-1. flake.Layout.Decompose
// reads them like any other ID.
//
// Invariants of a Counter:
//   - An ID is never handed out twice, across Counters sharing a Redis, and
//     never equals a flake-mode ID (flake nodes never lease the counter
//     machine ID).
//   - IDs are strictly increasing in issue order; nothing at or below the
//     last SetFloor is handed out, buffered values included.
//   - The counter is floored to Redis TIME: a value's tick is at least the
//     tick Redis was in when its segment was fetched, and at most MaxLead
//     ahead of it. When the key is missing (first use, or Redis lost
//     its data) it restarts MaxLead + 1 tick ahead of Redis TIME, so values
//     handed out before the loss never repeat.
//   - A counter writes only under the namespace's registry ({ns}:meta and
//     {ns}:layout), which flaked init makes (coord.Init). Where there is
//     none, a counter that never ran under it (no segment yet, no
//     Options.Known) gets ErrNoRegistry, whose text names flaked init, and
//     writes nothing; one that did restores it after Redis lost it. So no
//     counter ever stores a layout but the fleet's.
//   - No ID is ever guessed: with the buffer spent and Redis unreachable,
//     NextID fails with ErrUnavailable (bounded by its context).
//
// NextID takes one atomic add on the current segment; when half of it is
// left, one background goroutine fetches the next (sized to last about
// 2 x Options.Hold at the observed rate, 20 s by default), so in steady
// state NextID never waits on Redis and a Redis away for Hold stops no
// caller. Close cancels that fetch and waits for it.
package fallback
