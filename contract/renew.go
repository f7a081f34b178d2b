package contract

// RenewArgs are what one call of renew.lua (Renew) is given (see
// ClaimArgs).
//
// renew.lua replies {"OK", reservation, data loss ("" | "created" |
// "server"), Redis time (ms), loss ID, replicas needed, replicas listed}
// or {"LOST", id, the stored layout (kind "layout") or "", holder, kind,
// holder host, holder pid}, kind one of "expired", "fenced" (taken over by
// a copy of this owner's state file), "layout", "loss" or "held";
// LostText words each.
type RenewArgs struct {
	Keys  Keys   `arg:"prefix"` // KEYS 1-5; the ARGV prefix is Keys.Prefix
	Token string `arg:"token"`
	// Want is the reservation wanted (a tick), Held the one the owner holds
	// now: the reservation is raised to at least Held, and to Want within
	// the fleet's horizon.
	Want         int64  `arg:"want"`
	Held         int64  `arg:"held"`
	LeaseTTLMs   int64  `arg:"ttl"`
	EventsMaxLen int64  `arg:"maxlen"`
	Mode         string `arg:"mode"`
	Host         string `arg:"host"`
	PID          int    `arg:"pid"`
	Addr         string `arg:"addr"`
	Version      string `arg:"version"`
	Layout       string `arg:"layout"`
	// Generation is the registry generation the lease was claimed in.
	Generation string  `arg:"generation"`
	Mark       int64   `arg:"mark"`
	Horizon    int64   `arg:"horizon"` // this owner's, in ticks
	EpochUs    int64   `arg:"epochUs"`
	TickUs     float64 `arg:"tickUs"`
	Node       string  `arg:"node"`
	// LossID is the loss ID (guard.lua) this owner saw at its last claim
	// or renewal: nothing is extended when it changed.
	LossID string `arg:"lossID"`
	// FleetHorizon is the fleet's horizon this owner knew at its claim, to
	// restore {ns}:meta with.
	FleetHorizon int64  `arg:"fleetHorizon"`
	Identity     string `arg:"identity"`
	MachineIDs   []int  `arg:"ids"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a RenewArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Reserved, k.Events, k.Machines, k.Meta, k.Layout}, argvOf(a)
}
