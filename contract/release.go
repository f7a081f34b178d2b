package contract

// ReleaseArgs are what one call of release.lua (Release) is given (see
// ClaimArgs). release.lua replies the number of leases released.
type ReleaseArgs struct {
	Keys         Keys    `arg:"prefix"` // KEYS 1-3; the ARGV prefix is Keys.Prefix
	Token        string  `arg:"token"`
	LastTick     int64   `arg:"last"` // the last tick used
	EventsMaxLen int64   `arg:"maxlen"`
	Host         string  `arg:"host"`
	PID          int     `arg:"pid"`
	Addr         string  `arg:"addr"`
	Generation   string  `arg:"generation"`
	Mark         int64   `arg:"mark"`
	EpochUs      int64   `arg:"epochUs"`
	TickUs       float64 `arg:"tickUs"`
	Identity     string  `arg:"identity"`
	MachineIDs   []int   `arg:"ids"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a ReleaseArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	a.Identity = identityArg(a.Identity)
	return []string{k.Reserved, k.Events, k.Meta}, argvOf(a)
}
