package lua

// ReleaseArgs are what one call of release.lua (Release) is given, in the
// order of its header comment (see ClaimArgs).
type ReleaseArgs struct {
	Keys         Keys    `argv:"key prefix"` // KEYS 1-3; ARGV 1 is Keys.Prefix
	Token        string  `argv:"token"`
	LastTick     int64   `argv:"last tick used"`
	EventsMaxLen int64   `argv:"events maxlen"`
	Host         string  `argv:"host"`
	PID          int     `argv:"pid"`
	Addr         string  `argv:"addr"`
	Generation   string  `argv:"generation"`
	EpochUs      int64   `argv:"epoch (us)"`
	TickUs       float64 `argv:"tick length (us)"`
	Identity     string  `argv:"identity"`    // IdentityInfo ("" sends it) or IdentityNone
	MachineIDs   []int   `argv:"machine IDs"` // the rest of ARGV
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a ReleaseArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	keys := []string{k.Reserved, k.Events, k.Meta}
	argv := []any{
		k.Prefix, a.Token, a.LastTick, a.EventsMaxLen, a.Host, a.PID, a.Addr,
		a.Generation, a.EpochUs, a.TickUs, identityArg(a.Identity),
	}
	return keys, appendInts(argv, a.MachineIDs)
}
