package contract

import (
	"errors"
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

// UnsafePrefix starts the error reply of a script that refused to write
// because it cannot tell that writing is safe (guard.lua).
const UnsafePrefix = "UNSAFE "

// UnsafeCheck returns the check ("identity", "eviction") when err is (or
// wraps) a script's refusal by guard.lua: a Redis error reply (go-redis's
// redis.Error, matched by its method so this package needs no client).
func UnsafeCheck(err error) (string, bool) {
	var re interface {
		error
		RedisError()
	}
	if !errors.As(err, &re) {
		return "", false
	}
	rest, ok := strings.CutPrefix(re.Error(), UnsafePrefix)
	if !ok {
		return "", false
	}
	check, _, ok := strings.Cut(rest, ":")
	return check, ok
}
