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
//
// # Modes
//
// A node is configured (Options.Mode) in flake, counter or auto mode and
// issues in flake or counter mode (Node.Mode). Each move below is a mode
// event in {ns}:events (from, to, reason, at_ms) and a log line "mode":
//
//	        New: flake, or auto                  Close
//	        and flake is safe
//	none ─────────────────────────► flake ─────────────────► stopped
//	  │                             │   ▲                       ▲
//	  │                       auto: │   │ auto: healthy for     │
//	  │                      unsafe │   │ RecoverAfter          │
//	  │ New: counter, or auto       ▼   │                       │
//	  └───────────────────────────► counter ────────────────────┘
//	    and flake is unsafe                         Close
//
// The moves, what triggers them, and what is logged:
//
//   - none → flake: New in flake mode, or in auto mode when the claim and
//     the clock allow flake mode; reason "start"; "mode" at info.
//   - none → counter: New in counter mode (reason "mode counter"), or in
//     auto mode when starting flake mode failed (reason: the error, after
//     "flake mode is not safe at start; issuing in counter mode" at warn);
//     "mode" at info.
//   - flake → counter, auto mode only: a health check (every
//     CheckInterval, at once when the lease finds itself lost, and when
//     NextID fails on the generator) finds flake mode unsafe: no machine
//     ID held, the lease lost, the reservation spent and not extended
//     (Redis away), the clock behind the floor by more than MaxWait, or
//     the clock off Redis TIME by more than MaxSkew (asked every
//     max(RetryInterval, 5s)); and a new lease, when the old one was lost
//     or none was held, does not make it safe. "flake mode is not safe;
//     falling back to counter mode" at warn with the reason, then "mode" at
//     warn; counted in Switches.
//   - counter → flake, auto mode only: each check asks whether flake mode
//     would be safe (the clock agrees with Redis, a lease is held or
//     claimed and renews, the clock is within MaxWait of the floor); the
//     first yes logs "flake mode looks healthy; returning after the
//     recovery delay" at info, and after RecoverAfter of yeses the node
//     switches (reason "healthy for <RecoverAfter>"; "mode" at warn;
//     counted in Switches). A no starts the count again and the next
//     question waits RetryInterval; a failed switch logs "returning to
//     flake mode failed; staying in counter mode" at warn, waits as well
//     and writes no event.
//   - any → stopped: Close, or New failing to enter its mode (none →
//     stopped); reason "close"; "mode" at info.
//
// Without a mode event: in flake mode a lost lease is given up ("lease
// lost" at warn, or "lease fenced" at error when a process running from
// a copy of the state file took it over) and claimed again ("machine IDs
// claimed" and "flake mode resumed" at info); while none is held NextID
// fails with ErrUnavailable and the claim is retried every RetryInterval. Auto
// mode tries the same before it falls back. A configuration error (the
// layout, the options, the state file) never makes auto mode fall back:
// New fails instead.
//
// # Registry
//
// Only flaked init (coord.Init) makes a namespace's registry. A node on a
// namespace without one fails New in every mode with the NOREGISTRY text
// naming flaked init (coord.ErrNoRegistry; flake and auto mode: the claim,
// counter mode: Counter.CheckLayout), and auto mode does not fall back to
// counter mode on it. A node that has run under the registry (a claim,
// its state file, a counter segment, or a lease held when it switches to
// counter mode: fallback.Options.Known) restores it when Redis lost it,
// and issues on above the loss floor. One that never has (auto mode
// started while Redis was away) issues nothing until the registry is
// there: NextID waits within IDWait, then fails naming flaked init.
//
// Every switch stops the old source first and starts the new one above
// the highest tick the old one may have issued, so IDs keep increasing.
// Mode events that cannot be written (Redis away) are queued, the oldest
// dropped beyond 100, and written once Redis answers: by auto mode's
// checks, with the next mode event, or at Close.
package node
