package contract

import (
	"errors"
	"strings"
)

// The scripts reply with short codes and the facts behind them; the text a
// user reads, with its fix, is written here. So a script stays short, and a
// message can be worded (and tested) without touching the Lua.
//
// A script fails one way, guard.lua's fail(): the error "<CODE> <text>",
// raised as a plain string, which each server wraps in its own words
// (scriptError takes them off). guard.lua refuses with "UNSAFE <check>:
// <code> <facts>" and "NOREGISTRY <key>"; Explain turns the first into
// "UNSAFE <check>: <text>", which UnsafeCheck still reads.

// The codes a script fails with (guard.lua's fail).
const (
	codeUnsafe     = "UNSAFE"     // guard.lua cannot tell that writing is safe
	codeNoRegistry = "NOREGISTRY" // no registry, and the caller never ran under one
	codeInvalid    = "INVALID"    // a stored or sent value the script cannot use
)

// scriptError returns the code and text of the error a script failed
// with, given the text of the error reply: "<CODE> <text>" as fail()
// raised it, which redis-server (7) replies as "ERR <CODE> <text> script:
// <sha>, on @user_script:<line>.", internal/simredis as redis-server, and
// miniredis as "ERR Error compiling script (new function): <CODE> <text>
// stack traceback: ...". ok is false for any other reply.
func scriptError(reply string) (code, text string, ok bool) {
	for _, wrap := range []string{"ERR Error compiling script (new function): ", "ERR "} {
		if rest, found := strings.CutPrefix(reply, wrap); found {
			reply = rest
			break
		}
	}
	if i := strings.LastIndex(reply, " script: "); i >= 0 {
		reply = reply[:i]
	}
	reply, _, _ = strings.Cut(reply, " stack traceback:")
	code, text, _ = strings.Cut(reply, " ")
	switch code {
	case codeUnsafe, codeNoRegistry, codeInvalid:
		return code, text, true
	}
	return "", "", false
}

// redisError is go-redis's redis.Error, matched by its method so this
// package needs no client.
type redisError interface {
	error
	RedisError()
}

// scriptErrorOf is scriptError of err when err is (or wraps) a Redis
// error reply.
func scriptErrorOf(err error) (code, text string, ok bool) {
	var re redisError
	if !errors.As(err, &re) {
		return "", "", false
	}
	return scriptError(re.Error())
}

// The codes of guard.lua's refusals (the word after "UNSAFE <check>: ").
const (
	refusalInfoUnknown = "info-unknown" // INFO renamed or disabled; facts: Redis's error
	refusalInfoDenied  = "info-denied"  // INFO refused (ACL); facts: Redis's error
	refusalNoField     = "no-field"     // INFO without run_id or master_replid; facts: the field
	refusalAllkeys     = "allkeys"      // maxmemory-policy allkeys-*; facts: the policy
	refusalNoPolicy    = "no-policy"    // INFO memory without maxmemory_policy
)

// optOut ends the refusals an operator may opt out of.
const optOut = " (or, for a server that truly hides INFO, start the node with --redis-identity=none," +
	" which turns off the detection of Redis losing writes and this check)"

// refusalText is the text of a refusal code with its facts.
func refusalText(code, facts string) (string, bool) {
	switch code {
	case refusalInfoUnknown:
		return "INFO is not a command on this Redis (" + facts + "): it was renamed or disabled with" +
			" rename-command; remove rename-command INFO from its configuration, flaked reads run_id," +
			" master_replid and maxmemory_policy with it" + optOut, true
	case refusalInfoDenied:
		return "INFO server replication memory refused (" + facts + "): grant the node's Redis user" +
			" +info (deploy/redis/acl.conf), flaked reads run_id, master_replid and maxmemory_policy with it" + optOut, true
	case refusalNoField:
		return "INFO shows no " + facts + " (a proxy in front of Redis?): flaked cannot notice this Redis" +
			" losing writes; connect the node to Redis itself" + optOut, true
	case refusalAllkeys:
		return "maxmemory-policy " + facts + " may evict the registry's keys (meta, reservations, layout):" +
			" set it to noeviction or a volatile-* policy (CONFIG SET maxmemory-policy noeviction, and in redis.conf)", true
	case refusalNoPolicy:
		return "INFO memory shows no maxmemory_policy: flaked cannot tell whether Redis may evict the" +
			" registry's keys; connect the node to Redis itself" + optOut, true
	}
	return "", false
}

// ExplainRefusal is a guard.lua refusal ("UNSAFE <check>: <code>
// <facts>", as probe.lua replies it or a server wraps it) with its code
// written out; any other text is returned as it is.
func ExplainRefusal(s string) string {
	code, rest, ok := scriptError(s)
	if !ok || code != codeUnsafe {
		return s
	}
	return explainUnsafe(rest, s)
}

// explainUnsafe writes out rest, an UNSAFE refusal after its code
// ("<check>: <code> <facts>"), or returns s when rest is not one.
func explainUnsafe(rest, s string) string {
	check, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return s
	}
	code, facts, _ := strings.Cut(rest, " ")
	text, ok := refusalText(code, facts)
	if !ok {
		return s
	}
	return UnsafePrefix + check + ": " + text
}

// ErrNoRegistry: the namespace has no registry and the caller never ran
// under it (guard.lua's "NOREGISTRY <key>"), so it cannot tell a new fleet
// from a Redis that lost everything.
var ErrNoRegistry = errors.New("no registry")

// noRegistry is a written-out NOREGISTRY refusal: a Redis error reply
// that is also ErrNoRegistry.
type noRegistry struct{ refusal }

func (noRegistry) Unwrap() error { return ErrNoRegistry }

// NoRegistryText is the text of a NOREGISTRY refusal of key.
func NoRegistryText(key string) string {
	return codeNoRegistry + " " + key + " is missing: this namespace has no registry. For a new fleet, run" +
		" `flaked init` once with the fleet's layout flags; after Redis lost its data, a running node of the" +
		" fleet restores it at its next call (or run flaked init, which records a possible loss)"
}

// Explain returns err with a script's failure (see scriptError) written
// out: an UNSAFE refusal as ExplainRefusal does, a NOREGISTRY one as
// NoRegistryText (also ErrNoRegistry), an INVALID one without the
// server's wrapping; still a Redis error reply, so UnsafeCheck reads it.
// Any other error is returned as it is.
func Explain(err error) error {
	code, text, ok := scriptErrorOf(err)
	if !ok {
		return err
	}
	switch code {
	case codeNoRegistry:
		return noRegistry{refusal(NoRegistryText(text))}
	case codeUnsafe:
		return refusal(explainUnsafe(text, UnsafePrefix+text))
	}
	return refusal(code + " " + text)
}

// refusal is a written-out script failure: a Redis error reply, as the
// one it replaces.
type refusal string

func (e refusal) Error() string { return string(e) }

// RedisError marks a Redis error reply (go-redis's redis.Error).
func (refusal) RedisError() {}

// The LOST kinds of renew.lua (the fifth item of its reply).
const (
	LostExpired = "expired" // the lease expired
	LostFenced  = "fenced"  // taken over by a copy of this owner's state file
	LostLayout  = "layout"  // the fleet runs another layout; facts: the stored layout
	LostLoss    = "loss"    // Redis may have lost writes since the last renewal
	LostHeld    = "held"    // held by another owner
)

// LostText is the text of renew.lua's LOST reply of kind: facts is its
// third item, layout the one this owner runs.
func LostText(kind, facts, layout string) string {
	switch kind {
	case LostExpired:
		return "lease expired: claiming again above its reservation"
	case LostLayout:
		return "the fleet layout is " + facts + ", this owner runs " + layout
	case LostLoss:
		return "Redis may have lost writes since the last renewal (restart or failover): claiming again above the loss floor"
	case LostHeld:
		return "lease held by another owner"
	}
	return kind + " " + facts
}

// RenewFailReason is the text of a renew_fail event's reason field, which
// renew.lua writes as a code ("expired", "layout", "held", "loss"); any
// other value (an event from an older version) is returned as it is.
func RenewFailReason(code string) string {
	switch code {
	case LostHeld:
		return "lease held by another owner"
	case LostLoss:
		return "possible data loss since the last renewal"
	}
	return code
}

// SeqBlockedText is the text of why tag is blocked: seq.lua's BLOCKED
// reason, also the tag's blocked field ("jump <loss id> <jump> <high>
// <max jump>"); any other value is returned as it is.
func SeqBlockedText(tag, reason string) string {
	f := strings.Fields(reason)
	if len(f) != 5 || f[0] != "jump" {
		return reason
	}
	return "Redis lost writes (loss " + f[1] + "): the rate bound puts tag " + tag + " up to " + f[2] +
		" values above its copy (" + f[3] + "), more than its max jump " + f[4] + "; " + seqRestoreFix(tag)
}

// SeqLostText is the text of seq.lua's LOST reply for tag: floor is the
// most this process was granted of it ("0" for nothing).
func SeqLostText(tag, floor string) string {
	text := "tag " + tag + " is missing from Redis (Redis lost its data?) but was granted values before"
	if floor != "" && floor != "0" {
		text += " (this process up to " + floor + ")"
	}
	return text + ": nothing bounds what other nodes were granted; " + seqRestoreFix(tag)
}

func seqRestoreFix(tag string) string {
	return "run `flaked seq restore " + tag + " --above N` with N at or above the last value your records hold"
}

// DataLossText is the text of a dataloss event's detail field, which
// guard.lua and renew.lua write as a code; any other value (an event from
// an older version) is returned as it is.
func DataLossText(code string) string {
	switch code {
	case "server-changed":
		return "Redis server changed (restart or failover): writes acknowledged before may be lost;" +
			" claims start a horizon later and the counter a lead later"
	case "reservations-gone":
		return "the reservations ({ns}:reserved) are gone under the same server (evicted under an allkeys-*" +
			" policy, or deleted): treated as a loss; claims start a horizon later and the counter a lead later"
	case "meta-missing":
		return "registry metadata missing at renewal: Redis lost its data; meta and layout restored by this owner"
	}
	return code
}
