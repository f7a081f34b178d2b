package lua

// RenewArgs are what one call of renew.lua (Renew) is given, in the order
// of its header comment (see ClaimArgs).
type RenewArgs struct {
	Keys         Keys    `argv:"key prefix"` // KEYS 1-5; ARGV 1 is Keys.Prefix
	Token        string  `argv:"token"`
	Want         int64   `argv:"reservation wanted (tick)"`
	Held         int64   `argv:"reservation the owner holds now (tick)"`
	LeaseTTLMs   int64   `argv:"lease ttl (ms)"`
	EventsMaxLen int64   `argv:"events maxlen"`
	Mode         string  `argv:"mode"`
	Host         string  `argv:"host"`
	PID          int     `argv:"pid"`
	Addr         string  `argv:"addr"`
	Version      string  `argv:"version"`
	Layout       string  `argv:"canonical layout"`
	Generation   string  `argv:"the registry generation the lease was claimed in"`
	Horizon      int64   `argv:"horizon (ticks)"`
	EpochUs      int64   `argv:"epoch (us)"`
	TickUs       float64 `argv:"tick length (us)"`
	Node         string  `argv:"node ID"`
	LossID       string  `argv:"the loss ID (guard.lua) this owner saw"`
	FleetHorizon int64   `argv:"the fleet horizon this owner knew at its claim"`
	Identity     string  `argv:"identity"`    // IdentityInfo ("" sends it) or IdentityNone
	MachineIDs   []int   `argv:"machine IDs"` // the rest of ARGV
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a RenewArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	keys := []string{k.Reserved, k.Events, k.Machines, k.Meta, k.Layout}
	argv := []any{
		k.Prefix, a.Token, a.Want, a.Held, a.LeaseTTLMs,
		a.EventsMaxLen, a.Mode, a.Host, a.PID, a.Addr, a.Version,
		a.Layout, a.Generation, a.Horizon,
		a.EpochUs, a.TickUs, a.Node, a.LossID,
		a.FleetHorizon, identityArg(a.Identity),
	}
	return keys, appendInts(argv, a.MachineIDs)
}
