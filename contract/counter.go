package contract

// CounterArgs are what one call of counter.lua (Counter) is given (see
// ClaimArgs).
type CounterArgs struct {
	Keys         Keys    // KEYS 1-4 (counter.lua takes no key prefix)
	Size         int64   `arg:"n"`
	EpochUs      int64   `arg:"epochUs"`
	TickUs       float64 `arg:"tickUs"`
	SeqBits      int     `arg:"bits"`
	Lead         int64   `arg:"lead"`
	MinTick      int64   `arg:"minTick"` // the floor value >> SeqBits
	MinSeq       int64   `arg:"minSeq"`  // the floor value's sequence bits
	Layout       string  `arg:"layout"`
	EventsMaxLen int64   `arg:"maxlen"`
	CounterID    int     `arg:"counterID"`
	Host         string  `arg:"host"`
	PID          int     `arg:"pid"`
	Generation   string  `arg:"generation"`
	Identity     string  `arg:"identity"` // IdentityInfo ("" sends it) or IdentityNone
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a CounterArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Counter, k.Layout, k.Events, k.Meta}, argvOf(a)
}
