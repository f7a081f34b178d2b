package lua

// CounterArgs are what one call of counter.lua (Counter) is given, in the
// order of its header comment (see ClaimArgs).
type CounterArgs struct {
	Keys           Keys    // KEYS 1-4 (counter.lua takes no key prefix)
	Size           int64   `argv:"n, the segment size"`
	EpochUs        int64   `argv:"epoch (us since the Unix epoch)"`
	TickUs         float64 `argv:"tick length (us)"`
	SeqBits        int     `argv:"bits of sequence"`
	Lead           int64   `argv:"lead (ticks"`
	MinTick        int64   `argv:"min tick"` // the floor value >> SeqBits
	MinSeq         int64   `argv:"min seq"`  // the floor value's sequence bits
	Layout         string  `argv:"the caller's canonical layout"`
	EventsMaxLen   int64   `argv:"events maxlen"`
	CounterID      int     `argv:"counter machine ID"`
	Host           string  `argv:"host"`
	PID            int     `argv:"pid"`
	Generation     string  `argv:"generation to create {ns}:meta with"`
	LayoutSettleMs int64   `argv:"layout settle (ms)"`
	Identity       string  `argv:"identity"` // IdentityInfo ("" sends it) or IdentityNone
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a CounterArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	keys := []string{k.Counter, k.Layout, k.Events, k.Meta}
	argv := []any{
		a.Size, a.EpochUs, a.TickUs, a.SeqBits, a.Lead, a.MinTick, a.MinSeq,
		a.Layout, a.EventsMaxLen, a.CounterID, a.Host, a.PID, a.Generation,
		a.LayoutSettleMs, identityArg(a.Identity),
	}
	return keys, argv
}
