package contract

// InitArgs are what one call of init.lua (Init) is given (see ClaimArgs).
//
// init.lua replies {"OK", generation, loss ID, loss_ms} or {"EXISTS", key,
// detail}.
type InitArgs struct {
	Keys       Keys    // KEYS 1-3
	Generation string  `arg:"generation"` // the new registry's
	Mark       int64   `arg:"mark"`       // 0: a new registry starts from the replicas listed
	Layout     string  `arg:"layout"`
	EpochUs    int64   `arg:"epochUs"`
	TickUs     float64 `arg:"tickUs"`
	// Horizon is the fleet's horizon (ticks), which caps every grant from
	// now on.
	Horizon      int64  `arg:"horizon"`
	EventsMaxLen int64  `arg:"maxlen"`
	Host         string `arg:"host"`
	PID          int    `arg:"pid"`
	Identity     string `arg:"identity"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a InitArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Meta, k.Layout, k.Events}, argvOf(a)
}
