package contract

// ClaimArgs are what one call of claim.lua (Claim) is given: its KEYS and
// its ARGV, one field each. Each field's arg tag is the name it is sent
// under (argv.go) and the name the header comment of claim.lua explains
// (TestArgs_MatchHeaders holds the two together).
type ClaimArgs struct {
	Keys         Keys    `arg:"prefix"` // KEYS 1-5; the ARGV prefix is Keys.Prefix
	Token        string  `arg:"token"`
	Layout       string  `arg:"layout"`
	Generation   string  `arg:"generation"`
	Horizon      int64   `arg:"horizon"`
	Now          int64   `arg:"now"`
	LeaseTTLMs   int64   `arg:"ttl"`
	EventsMaxLen int64   `arg:"maxlen"`
	Preferred    string  `arg:"preferred"` // "" for none
	LocalFloor   int64   `arg:"localFloor"`
	MaxWait      int64   `arg:"maxWait"` // -1: only IDs startable now
	EpochUs      int64   `arg:"epochUs"`
	TickUs       float64 `arg:"tickUs"`
	CounterID    int     `arg:"counterID"`
	Host         string  `arg:"host"`
	PID          int     `arg:"pid"`
	Addr         string  `arg:"addr"`
	Version      string  `arg:"version"`
	Mode         string  `arg:"mode"`
	Skip         []int   `arg:"skip"`
	PrevToken    string  `arg:"prevToken"`
	Node         string  `arg:"node"`
	MinID        int     `arg:"minID"`      // of the claimer's region
	MaxID        int     `arg:"maxID"`      // of the claimer's region
	Identity     string  `arg:"identity"`   // IdentityInfo ("" sends it) or IdentityNone
	Candidates   []int   `arg:"candidates"` // tried first, in order
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a ClaimArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Layout, k.Meta, k.Machines, k.Reserved, k.Events}, argvOf(a)
}
