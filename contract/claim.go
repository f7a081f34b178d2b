package contract

// ClaimArgs are what one call of claim.lua (Claim) is given: its KEYS and
// its ARGV, one field each. Each field's arg tag is the name it is sent
// under and the name the script reads (argv.go; TestArgs_MatchScripts
// holds the two together). The fields every script shares (Host, PID,
// EventsMaxLen, Generation, Identity, EpochUs, TickUs) are described in
// argv.go.
//
// claim.lua replies {"OK", id, floor, generation, event, created (1 when
// this call restored {ns}:meta), clone ("" or "host pid" of a live process
// holding the preferred ID under the same node ID), Redis time (ms), fleet
// horizon, loss ID, replicas needed, replicas listed}, {"LAYOUT", the
// stored layout} or {"NONE", the lowest floor seen, or -1}.
type ClaimArgs struct {
	Keys  Keys   `arg:"prefix"` // KEYS 1-5; the ARGV prefix is Keys.Prefix
	Token string `arg:"token"`  // the owner token, new for every lease
	// Layout is the claimer's canonical layout; another fleet's is refused.
	Layout     string `arg:"layout"`
	Generation string `arg:"generation"`
	Mark       int64  `arg:"mark"`
	// Horizon is how far ahead of Redis TIME a grant of this claimer may
	// reach, in ticks; a claim after a possible loss floors above it.
	Horizon      int64 `arg:"horizon"`
	Now          int64 `arg:"now"` // the claimer's clock, a tick
	LeaseTTLMs   int64 `arg:"ttl"`
	EventsMaxLen int64 `arg:"maxlen"`
	// Preferred is the ID of the claimer's state file, "" for none;
	// LocalFloor is that file's floor for it.
	Preferred  string `arg:"preferred"`
	LocalFloor int64  `arg:"localFloor"`
	// MaxWait is how far ahead of Now (ticks) the floor of a
	// non-preferred ID may be for it to be taken; -1: only IDs startable
	// now.
	MaxWait   int64   `arg:"maxWait"`
	EpochUs   int64   `arg:"epochUs"`
	TickUs    float64 `arg:"tickUs"`
	CounterID int     `arg:"counterID"` // the counter machine ID, never leased
	// Host, PID, Addr, Version and Mode describe the claimer in its owner
	// hash and events.
	Host    string `arg:"host"`
	PID     int    `arg:"pid"`
	Addr    string `arg:"addr"`
	Version string `arg:"version"`
	Mode    string `arg:"mode"`
	// Skip are IDs this owner already claimed in the same call.
	Skip []int `arg:"skip"`
	// PrevToken is the token of the claimer's state file ("" for none): a
	// lease it holds is taken over (a restart, or a copy fenced).
	PrevToken string `arg:"prevToken"`
	Node      string `arg:"node"`     // the state file's node ID, "" for none
	MinID     int    `arg:"minID"`    // of the claimer's region
	MaxID     int    `arg:"maxID"`    // of the claimer's region
	Identity  string `arg:"identity"` // IdentityInfo ("" sends it) or IdentityNone
	// Candidates are tried first, in order, then up to 8 known IDs.
	Candidates []int `arg:"candidates"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a ClaimArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Layout, k.Meta, k.Machines, k.Reserved, k.Events}, argvOf(a)
}
