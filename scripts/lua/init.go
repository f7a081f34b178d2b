package lua

// InitArgs are what one call of init.lua (Init) is given, in the order of
// its header comment (see ClaimArgs).
type InitArgs struct {
	Keys         Keys    // KEYS 1-3
	Generation   string  `argv:"generation"`
	Layout       string  `argv:"canonical layout"`
	EpochUs      int64   `argv:"epoch (us since the Unix epoch)"`
	TickUs       float64 `argv:"tick length (us)"`
	EventsMaxLen int64   `argv:"events maxlen"`
	Host         string  `argv:"host"`
	PID          int     `argv:"pid"`
	Identity     string  `argv:"identity"` // IdentityInfo ("" sends it) or IdentityNone
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a InitArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	return []string{k.Meta, k.Layout, k.Events},
		[]any{a.Generation, a.Layout, a.EpochUs, a.TickUs, a.EventsMaxLen, a.Host, a.PID, identityArg(a.Identity)}
}
