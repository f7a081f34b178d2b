// Package lua holds flaked's Redis Lua scripts, one file each, embedded so
// the binary carries them. Each script is atomic and touches only keys of
// one namespace, which share a {hash tag}, so it runs on Redis Cluster.
package lua

import _ "embed"

// Claim atomically claims one machine ID (see claim.lua).
//
//go:embed claim.lua
var Claim string

// Renew extends leases and raises the reservation (see renew.lua).
//
//go:embed renew.lua
var Renew string

// Release gives leases back with the exact last tick (see release.lua).
//
//go:embed release.lua
var Release string

// Check is sonyflake's CheckMachineID (see check.lua).
//
//go:embed check.lua
var Check string

// Counter hands out a segment of counter-mode values (see counter.lua).
//
//go:embed counter.lua
var Counter string

// Prune forgets released and expired machine IDs, keeping their
// reservations (see prune.lua); flaked audit prune runs it.
//
//go:embed prune.lua
var Prune string
