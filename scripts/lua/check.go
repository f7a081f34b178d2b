package lua

// CheckArgs are what one call of check.lua (Check) is given, in the order
// of its header comment (see ClaimArgs).
type CheckArgs struct {
	Keys       Keys   `argv:"key prefix"` // KEYS 1; ARGV 1 is Keys.Prefix
	Token      string `argv:"token"`
	MachineIDs []int  `argv:"machine IDs"` // the rest of ARGV
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a CheckArgs) KeysArgv() ([]string, []any) {
	return []string{a.Keys.Machines}, appendInts([]any{a.Keys.Prefix, a.Token}, a.MachineIDs)
}
