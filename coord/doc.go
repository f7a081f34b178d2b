// Package coord is the machine-ID registry of flaked, kept in Redis.
//
// A node claims machine IDs (claim.lua: SADD into {ns}:machines, a SET NX PX
// lease holding an owner token, an owner hash), renews them in the
// background (renew.lua), and releases them on a clean shutdown
// (release.lua). The reservation, {ns}:reserved, is the highest tick an
// owner may use; it is raised in Redis and written to the local state file
// before the generator enters it, so whoever claims the ID next starts
// strictly after it.
//
// # Fault model
//
// Uniqueness rests on three assumptions, and on nothing else:
//
//   - Clocks: each node's wall clock is within MaxSkew of Redis TIME when it
//     claims (checked; auto mode keeps checking), the monotonic clock does
//     not jump, and the Redis servers that may become master keep TIME
//     within MaxSkew of each other (NTP everywhere).
//   - Redis runs each Lua script atomically, and what it lost it lost as a
//     whole suffix of its history, noticed by a change of its identity
//     (run_id on a restart, master_replid on a promotion) or by
//     {ns}:meta being gone. Two masters accepting writes at once for the
//     same keys (a partitioned old master some clients still write to) is
//     outside the model; min-replicas-to-write on the master bounds it.
//   - fsync of the state file means what it says (standalone mode only:
//     with Redis the state file is a second copy).
//
// Under them no two processes issue the same ID, whatever else happens:
//
//   - Redis loses any suffix of acknowledged writes, or all of them (a
//     failover to a replica that missed writes, a restart from an RDB
//     snapshot or an AOF with appendfsync everysec, a restored backup).
//     guard.lua, at the start of every writing script, records the moment
//     Redis's identity changed (loss_ms in {ns}:meta). Every tick any node
//     had been granted by then is at most loss_ms + Horizon (Horizon bounds
//     reserve-ahead + max-lead + max-skew), so a claim starts after
//     max(reservation, loss_ms + 1 s + Horizon, the state file's
//     reservation) (1 s: a new master's clock may be that far behind the
//     old one's), counter segments start after loss_ms + 1 s + their lead,
//     and a renewal extends or re-asserts nothing across such a change (a
//     claim lost with the data may have been someone else's, also a
//     takeover of this very lease by a copy of the node): the node claims
//     again, issuing meanwhile only under what it had been granted before
//     (ErrPossibleLoss), which is below the loss floor. A node displaced
//     this way takes its next IDs at the same loss floor, so nothing
//     chains.
//   - State files copied, restored from old backups, or lost. The token in
//     a state file is not an identity: every claim makes a new one. A
//     restart presents the file's token to take its old lease over at once
//     (a crash leaves it live for up to LeaseTTL), and the takeover fences
//     whoever still holds it: its next renewal finds another token and
//     fails with ErrFenced, having issued nothing past the reservation the
//     new owner starts after. Two live processes from copies of one file
//     share its node ID; claim.lua and audit verify name them.
//   - Processes paused for any time, connections delayed, cut or
//     redirected: an owner issues only below what Redis granted it, grants
//     come only with the lease, and a lease that expired is re-asserted only
//     while nobody else raised its reservation and Redis lost nothing.
//   - Misconfigured nodes: another layout is refused while {ns}:layout is
//     stored; after Redis lost it, owners that renew restore it, and a claim
//     that stored a layout itself issues nothing until LayoutSettle has
//     passed and its own renewal confirms it (renew.lua); a loss that
//     interrupts that window opens it again (layout.lua).
//
// Invariants kept here:
//   - A lease is extended, and a reservation raised, only by the holder of
//     the lease's token, which exists only in that process's memory.
//   - A claim starts after the ID's reservation and after the loss floor.
//   - A reservation only goes down on release, by the lease holder, to the
//     exact last tick it used.
//   - The state file is written atomically, locked against a second
//     process on the same host, and never silently reused when corrupt or
//     mismatched.
package coord
