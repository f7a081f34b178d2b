package lua

// ClaimArgs are what one call of claim.lua (Claim) is given: its KEYS and
// ARGV, one field each, in the order of the header comment of claim.lua,
// which says what each means. Each field's argv tag is how that comment
// names it (TestArgs_MatchHeaders holds the two together).
type ClaimArgs struct {
	Keys           Keys    `argv:"key prefix"` // KEYS 1-5; ARGV 1 is Keys.Prefix
	Token          string  `argv:"owner token"`
	Layout         string  `argv:"canonical layout"`
	Generation     string  `argv:"generation to create the registry with"`
	Horizon        int64   `argv:"horizon (ticks)"`
	Now            int64   `argv:"the claimer's clock (tick)"`
	LeaseTTLMs     int64   `argv:"lease ttl (ms)"`
	EventsMaxLen   int64   `argv:"events maxlen"`
	Preferred      string  `argv:"preferred ID"` // "" for none
	LocalFloor     int64   `argv:"local floor of the preferred ID"`
	MaxWait        int64   `argv:"max wait (ticks)"` // -1: only IDs startable now
	EpochUs        int64   `argv:"epoch (us since the Unix epoch)"`
	TickUs         float64 `argv:"tick length (us)"`
	CounterID      int     `argv:"counter machine ID"`
	Host           string  `argv:"host"`
	PID            int     `argv:"pid"`
	Addr           string  `argv:"addr"`
	Version        string  `argv:"version"`
	Mode           string  `argv:"mode"`
	Skip           []int   `argv:"IDs to skip"` // sent comma separated
	PrevToken      string  `argv:"the token of the claimer's state file"`
	Node           string  `argv:"the state file's node ID"`
	LayoutSettleMs int64   `argv:"layout settle (ms)"`
	MinID          int     `argv:"lowest machine ID"`  // of the claimer's region
	MaxID          int     `argv:"highest machine ID"` // of the claimer's region
	Identity       string  `argv:"identity"`           // IdentityInfo ("" sends it) or IdentityNone
	Candidates     []int   `argv:"candidate IDs"`      // the rest of ARGV
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a ClaimArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	keys := []string{k.Layout, k.Meta, k.Machines, k.Reserved, k.Events}
	argv := []any{
		k.Prefix, a.Token, a.Layout, a.Generation,
		a.Horizon, a.Now, a.LeaseTTLMs, a.EventsMaxLen,
		a.Preferred, a.LocalFloor, a.MaxWait,
		a.EpochUs, a.TickUs, a.CounterID,
		a.Host, a.PID, a.Addr, a.Version, a.Mode,
		joinInts(a.Skip), a.PrevToken, a.Node, a.LayoutSettleMs,
		a.MinID, a.MaxID, identityArg(a.Identity),
	}
	return keys, appendInts(argv, a.Candidates)
}
