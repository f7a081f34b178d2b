// Package lua holds flaked's Redis Lua scripts, one file each, embedded so
// the binary carries them. Each variable is one file's text as written;
// package contract puts them together into the scripts Redis runs (every
// script starts with args.lua, those that add events with events.lua, the
// writing ones with guard.lua too, the granting ones with replicas.lua
// after it) and gives each its typed KEYS, ARGV and reply.
package lua

import _ "embed"

var (
	// Args reads ARGV as name/value pairs into the table A; every script
	// starts with it.
	//go:embed args.lua
	Args string

	// Guard notices that Redis may have lost acknowledged writes and
	// refuses a namespace without a registry to a caller that never ran
	// under it; every writing script starts with it, after Args and
	// Events. It also holds what those scripts share: Redis TIME as a
	// tick (tickOf) and the one way a script fails (fail).
	//go:embed guard.lua
	Guard string

	// Events is the one writer of {ns}:events (emit); the scripts that
	// add events have it after Args.
	//go:embed events.lua
	Events string

	// Replicas is the count of replicas that must acknowledge a grant
	// before it is used; the granting scripts have it after Guard.
	//go:embed replicas.lua
	Replicas string

	//go:embed claim.lua
	Claim string
	//go:embed renew.lua
	Renew string
	//go:embed release.lua
	Release string
	//go:embed counter.lua
	Counter string
	//go:embed init.lua
	Init string
	//go:embed probe.lua
	Probe string
	//go:embed check.lua
	Check string
	//go:embed prune.lua
	Prune string
	//go:embed seq.lua
	Seq string
	//go:embed mark.lua
	Mark string
)
