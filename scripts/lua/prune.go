package lua

// PruneArgs are what one call of prune.lua (Prune) is given, in the order
// of its header comment (see ClaimArgs).
type PruneArgs struct {
	Keys   Keys   `argv:"key prefix"` // KEYS 1-3; ARGV 1 is Keys.Prefix
	Cutoff int64  `argv:"cutoff tick"`
	Host   string `argv:"host"`
	PID    int    `argv:"pid"`
	// IDs are the machine IDs to forget, each with the owner token the
	// audit read: the rest of ARGV, a pair each.
	IDs []PruneID `argv:"pairs"`
}

// PruneID is one machine ID prune.lua is asked to forget.
type PruneID struct {
	MachineID int
	Token     string // the owner token the audit read, "" for none
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a PruneArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	argv := make([]any, 0, 4+2*len(a.IDs))
	argv = append(argv, k.Prefix, a.Cutoff, a.Host, a.PID)
	for _, p := range a.IDs {
		argv = append(argv, p.MachineID, p.Token)
	}
	return []string{k.Machines, k.Reserved, k.Events}, argv
}
