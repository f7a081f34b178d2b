package contract

import (
	"fmt"
	"strings"
)

// Values of the writing scripts' identity argument (ClaimArgs.Identity,
// ...), which tells guard.lua how to learn the server's identity.
const (
	// IdentityInfo reads run_id, master_replid and maxmemory_policy with
	// INFO server replication memory, and refuses to write when it cannot
	// (INFO refused or renamed, a field missing) or when the policy is
	// allkeys-*. The default: an empty Identity field sends it.
	IdentityInfo = "info"
	// IdentityNone reads no INFO: the operator's opt-in for a server that
	// truly hides INFO (some proxies). Nothing notices Redis losing writes
	// (a restart from an old snapshot, a failover to a replica that missed
	// writes), so IDs may repeat after one, and the eviction policy is not
	// checked. The standalone node's embedded store sets it: nobody else
	// writes there, and its state file is the record that counts.
	IdentityNone = "none"
)

// CheckIdentity accepts "", IdentityInfo and IdentityNone.
func CheckIdentity(s string) error {
	switch s {
	case "", IdentityInfo, IdentityNone:
		return nil
	}
	return fmt.Errorf("redis identity %q: want %q or %q", s, IdentityInfo, IdentityNone)
}

// identityArg is the identity ARGV value: IdentityInfo for "".
func identityArg(s string) string {
	if s == "" {
		return IdentityInfo
	}
	return s
}

// The checks of guard.lua's refusals, the <check> of "UNSAFE <check>: ...":
// also the label of flaked serve's flaked_redis_unsafe metric.
const (
	UnsafeIdentity = "identity" // INFO refused, renamed, or without run_id/master_replid
	UnsafeEviction = "eviction" // maxmemory-policy allkeys-*, or none shown
)

// UnsafePrefix starts the refusal of a script that cannot tell that
// writing is safe (guard.lua), as probe.lua replies it and Explain writes
// it out.
const UnsafePrefix = codeUnsafe + " "

// UnsafeCheck returns the check ("identity", "eviction") when err is (or
// wraps) a script's refusal by guard.lua, as a server replied it or as
// Explain wrote it out.
func UnsafeCheck(err error) (string, bool) {
	code, text, ok := scriptErrorOf(err)
	if !ok || code != codeUnsafe {
		return "", false
	}
	check, _, ok := strings.Cut(text, ":")
	return check, ok
}
