package contract

import (
	"fmt"
	"regexp"

	"github.com/flaked/flaked/scripts/lua"
)

// Seq hands out, gives back, creates and restores the segments of named
// sequences (see seq.lua).
var Seq = guard + lua.Replicas + lua.Seq

// Ops of seq.lua (SeqArgs.Op).
const (
	SeqNext     = "next"
	SeqGiveBack = "giveback"
	SeqCreate   = "create"
	SeqRestore  = "restore"
	SeqCheck    = "check"
)

// SeqMaxValue is the largest value a sequence can hand out, 2^53 - 1: Lua
// numbers (doubles) and JavaScript's Numbers hold every integer up to it.
const SeqMaxValue = 1<<53 - 1

// Seqs is "{ns}:seqs", the set of a namespace's sequence tags.
func (k Keys) Seqs() string { return k.Prefix + "seqs" }

// Seq is "{ns}:seq:<tag>", the hash of one sequence (Seq* fields).
func (k Keys) Seq(tag string) string { return k.Prefix + "seq:" + tag }

// Fields of {ns}:seq:<tag> (Keys.Seq), written by seq.lua.
const (
	SeqFieldStart     = "start"
	SeqFieldStep      = "step"
	SeqFieldMax       = "max"
	SeqFieldRate      = "rate"
	SeqFieldBurst     = "burst"
	SeqFieldMaxJump   = "max_jump"
	SeqFieldHigh      = "high" // the last value granted (the high-water mark)
	SeqFieldTokens    = "tokens"
	SeqFieldAtMs      = "at_ms"
	SeqFieldLossID    = "loss_id"
	SeqFieldFree      = "free" // given back, not yet granted again: "a-b,c-d"
	SeqFieldGivenBack = "given_back"
	SeqFieldLost      = "lost" // values skipped for good: loss jumps, rests that could not go back
	SeqFieldJumps     = "jumps"
	SeqFieldGrants    = "grants"
	SeqFieldCreatedMs = "created_ms"
	SeqFieldBlocked   = "blocked" // why the tag hands nothing out, until restored
	SeqFieldEpoch     = "epoch"   // the {ns}:meta seq_epochs of its last create or restore
)

// Fields of {ns}:meta (Keys.Meta) that seq.lua writes.
const (
	// MetaSeqEpochs counts the creates and restores of sequence tags: each
	// takes the next as its tag's epoch.
	MetaSeqEpochs = "seq_epochs"
	// MetaSeqMissing + tag: the Redis time (ms) seq.lua first found the
	// tag's hash gone while the tag was known; a restore clears it.
	MetaSeqMissing = "seq_missing:"
)

// Events seq.lua writes to {ns}:events; each carries the field "tag".
const (
	EventSeqCreate  = "seq_create"
	EventSeqJump    = "seq_jump"
	EventSeqBlocked = "seq_blocked"
	EventSeqLost    = "seq_lost"
	EventSeqRestore = "seq_restore"
	FieldTag        = "tag"
)

var tagRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// CheckTag reports whether tag may name a sequence: 1..128 of A-Z a-z
// 0-9 . _ : - (no brace, which would move the key out of the namespace's
// Cluster slot, no glob character, no space).
func CheckTag(tag string) error {
	if !tagRE.MatchString(tag) {
		return fmt.Errorf("sequence tag %q: want 1..128 of A-Z a-z 0-9 . _ : -", tag)
	}
	return nil
}

// SeqArgs are what one call of seq.lua (Seq) is given (see ClaimArgs).
// Values are below 2^53. Which fields an op reads is said with each.
//
// seq.lua replies, to next: {"OK", first, last, loss ID, step, replicas
// needed, replicas listed}, {"RATE", ms to wait}, {"MAX", max},
// {"BLOCKED", reason ("jump <loss id> <jump> <high> <max jump>", also the
// tag's blocked field)}, {"LOST", the caller's floor} or {"UNKNOWN"}
// (SeqBlockedText and SeqLostText word them); to giveback: {"OK", n given
// back, "high" | "free" | "lost"}; to check: {"OK"} or {"GONE"}; to create
// and restore: {"OK", high}, {"EXISTS"} (create) or {"WAIT", ms, loss_ms}
// (a restore too early).
type SeqArgs struct {
	Keys Keys   `arg:"prefix"` // KEYS 1-3; the ARGV prefix is Keys.Prefix
	Op   string `arg:"op"`     // SeqNext, SeqGiveBack, SeqCreate, SeqRestore or SeqCheck
	Tag  string `arg:"tag"`
	N    int64  `arg:"n"` // next: the values asked for; 0, the tag's step
	// Floor (next) is the highest value of the tag this process was ever
	// granted, 0 for none: no value at or below it is granted, and the
	// tag is raised to it.
	Floor int64 `arg:"floor"`
	// FirstUnused and LastGranted (giveback) bound the values given back.
	FirstUnused int64 `arg:"first"`
	LastGranted int64 `arg:"last"`
	// LossID (giveback, check) is the loss ID the values were granted
	// under.
	LossID string `arg:"lossID"`
	// Start, Step, Max, Rate (values per second), Burst and MaxJump are
	// the tag's options (create, and restore of a missing tag); Max and
	// MaxJump 0 for none.
	Start   int64 `arg:"start"`
	Step    int64 `arg:"step"`
	Max     int64 `arg:"max"`
	Rate    int64 `arg:"rate"`
	Burst   int64 `arg:"burst"`
	MaxJump int64 `arg:"maxJump"`
	// Above (restore) is the value the tag is restored above.
	Above        int64  `arg:"above"`
	EventsMaxLen int64  `arg:"maxlen"`
	Host         string `arg:"host"`
	PID          int    `arg:"pid"`
	Generation   string `arg:"generation"`
	Identity     string `arg:"identity"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a SeqArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Seqs(), k.Events, k.Meta}, argvOf(a)
}
