package contract

// InitArgs are what one call of init.lua (Init) is given (see ClaimArgs).
type InitArgs struct {
	Keys         Keys    // KEYS 1-3
	Generation   string  `arg:"generation"`
	Layout       string  `arg:"layout"`
	EpochUs      int64   `arg:"epochUs"`
	TickUs       float64 `arg:"tickUs"`
	Horizon      int64   `arg:"horizon"` // ticks
	EventsMaxLen int64   `arg:"maxlen"`
	Host         string  `arg:"host"`
	PID          int     `arg:"pid"`
	Identity     string  `arg:"identity"` // IdentityInfo ("" sends it) or IdentityNone
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a InitArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Meta, k.Layout, k.Events}, argvOf(a)
}
