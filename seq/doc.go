// Package seq hands out named sequences: per tag, dense increasing
// integers, each handed out once across a fleet, reached through the
// daemon's NEXTSEQ, the Go client and node.Node.NextSeq.
//
// A process takes a segment from Redis (seq.lua, one atomic call) and
// hands its values out with one atomic add each. The next segment is
// fetched in the background once 10% of the current one is used (Meituan
// Leaf's double buffer), so callers wait on Redis only when a segment runs
// out faster than one round trip. A segment is the tag's step, or more
// under load: the size doubles while segments last under 50 ms and halves
// back toward the step while they last over 500 ms (Leaf's dynamic step),
// up to 2^24 values. Close gives the
// unused values back (seq.lua takes them again first), so a clean restart of
// every node leaves no gap; a crash leaves one (the segments it held),
// never a reuse.
//
// Invariants kept here:
//   - A process's values of one tag increase strictly: each request to
//     seq.lua names the highest value the process was ever granted (its
//     floor), and nothing at or below it is granted again; within a
//     segment values are taken in index order.
//   - A value is handed out only from a segment seq.lua granted, and a
//     value given back was never handed out (the segment is closed to
//     takers before its rest is measured).
//   - Nothing is guessed: a tag Redis refuses (unknown, at its maximum,
//     blocked after a loss) is an error naming the cause and the fix.
//
// Uniqueness after Redis lost writes rests on the tag's rate bound,
// described in scripts/lua/seq.lua and docs/sequences.md.
package seq
