package contract

// CheckArgs are what one call of check.lua (Check) is given (see
// ClaimArgs). check.lua replies 1 when every lease of MachineIDs is held
// by Token, else 0.
type CheckArgs struct {
	Keys       Keys   `arg:"prefix"` // KEYS 1; the ARGV prefix is Keys.Prefix
	Token      string `arg:"token"`
	MachineIDs []int  `arg:"ids"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a CheckArgs) KeysArgv() ([]string, []any) {
	return []string{a.Keys.Machines}, argvOf(a)
}
