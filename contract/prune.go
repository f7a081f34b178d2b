package contract

// PruneArgs are what one call of prune.lua (Prune) is given (see
// ClaimArgs).
//
// prune.lua replies a flat list: for each item, its machine ID and the
// outcome, "pruned", "live", "recent" or "changed".
type PruneArgs struct {
	Keys Keys `arg:"prefix"` // KEYS 1-3; the ARGV prefix is Keys.Prefix
	// Cutoff: only an ID whose reservation is below this tick is
	// forgotten.
	Cutoff int64  `arg:"cutoff"`
	Host   string `arg:"host"`
	PID    int    `arg:"pid"`
	// IDs are the machine IDs to forget, each with the owner token the
	// audit read, sent as "id:token" items.
	IDs []PruneID `arg:"ids"`
}

// PruneID is one machine ID prune.lua is asked to forget.
type PruneID struct {
	MachineID int
	// Token is the owner token the audit read, "" for none. One with a
	// comma (not flaked's: its tokens are hex) goes without its commas,
	// so it differs from the stored one and the ID is left alone.
	Token string
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a PruneArgs) KeysArgv() ([]string, []any) {
	k := a.Keys
	return []string{k.Machines, k.Reserved, k.Events}, argvOf(a)
}
