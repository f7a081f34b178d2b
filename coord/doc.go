// Package coord is the machine-ID registry of flaked, kept in Redis.
//
// A node claims machine IDs (claim.lua: SADD into {ns}:machines, a SET NX PX
// lease holding a random owner token, an owner hash), renews them in the
// background (renew.lua), and releases them on a clean shutdown
// (release.lua). The reservation, {ns}:reserved, is the highest tick an
// owner may use; it is raised in Redis and fsynced to the local state file
// before the generator enters it, so whoever claims the ID next starts
// strictly after it.
//
// Invariants kept here:
//   - A lease is extended, and a reservation raised, only by the holder of
//     the lease's token.
//   - A claim starts after the ID's reservation; an ID whose reservation is
//     unknown (Redis lost its data) starts after the newest reservation the
//     fleet could have made before the loss: registry creation + horizon.
//   - A reservation only goes down on release, by the lease holder, to the
//     exact last tick it used.
//   - The state file is written atomically, locked against a second
//     process, and never silently reused when corrupt or mismatched.
package coord
