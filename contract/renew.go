package contract

// RenewArgs are what one call of renew.lua (Renew) is given (see
// ClaimArgs).
type RenewArgs struct {
	Keys         Keys    `arg:"prefix"` // KEYS 1-5; the ARGV prefix is Keys.Prefix
	Token        string  `arg:"token"`
	Want         int64   `arg:"want"`
	Held         int64   `arg:"held"`
	LeaseTTLMs   int64   `arg:"ttl"`
	EventsMaxLen int64   `arg:"maxlen"`
	Mode         string  `arg:"mode"`
	Host         string  `arg:"host"`
	PID          int     `arg:"pid"`
	Addr         string  `arg:"addr"`
	Version      string  `arg:"version"`
	Layout       string  `arg:"layout"`
	Generation   string  `arg:"generation"`
	Horizon      int64   `arg:"horizon"`
	EpochUs      int64   `arg:"epochUs"`
	TickUs       float64 `arg:"tickUs"`
	Node         string  `arg:"node"`
	LossID       string  `arg:"lossID"`
	FleetHorizon int64   `arg:"fleetHorizon"`
	Identity     string  `arg:"identity"` // IdentityInfo ("" sends it) or IdentityNone
	MachineIDs   []int   `arg:"ids"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a RenewArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Reserved, k.Events, k.Machines, k.Meta, k.Layout}, argvOf(a)
}
