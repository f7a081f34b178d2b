package contract

// CounterArgs are what one call of counter.lua (Counter) is given (see
// ClaimArgs).
//
// counter.lua replies {"OK", first tick, first seq, last tick, last seq
// (inclusive), T, replicas needed, replicas listed}, {"AHEAD", T, the tick
// of the next value} or {"LAYOUT", the fleet's layout}; T is the tick of
// Redis TIME.
type CounterArgs struct {
	Keys    Keys    // KEYS 1-4 (counter.lua takes no key prefix)
	Size    int64   `arg:"n"` // the values asked for, 1..2^24
	EpochUs int64   `arg:"epochUs"`
	TickUs  float64 `arg:"tickUs"`
	SeqBits int     `arg:"bits"` // bits of sequence, 1..30
	// Lead is how far ahead of Redis TIME values may go, in ticks; the
	// first call fixes the fleet's ({ns}:meta counter_lead).
	Lead int64 `arg:"lead"`
	// MinTick and MinSeq are the caller's floor, a value the segment
	// must not start below (0, 0 for none): the value >> SeqBits and its
	// sequence bits.
	MinTick int64 `arg:"minTick"`
	MinSeq  int64 `arg:"minSeq"`
	// Layout is the caller's canonical layout; another fleet's is
	// refused.
	Layout       string `arg:"layout"`
	EventsMaxLen int64  `arg:"maxlen"`
	CounterID    int    `arg:"counterID"`
	Host         string `arg:"host"`
	PID          int    `arg:"pid"`
	Generation   string `arg:"generation"`
	Mark         int64  `arg:"mark"`
	Identity     string `arg:"identity"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a CounterArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Counter, k.Layout, k.Events, k.Meta}, argvOf(a)
}
