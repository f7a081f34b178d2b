package contract

// MarkArgs are what one call of mark.lua (Mark) is given (see ClaimArgs).
//
// mark.lua replies the mark it replaced, or -1 when {ns}:meta is missing
// (then nothing is set).
type MarkArgs struct {
	Keys Keys // KEYS 1-2 (mark.lua takes no key prefix)
	// Replicas is the new mark: how many replicas must acknowledge a
	// grant before it is used.
	Replicas     int    `arg:"replicas"`
	Host         string `arg:"host"`
	EventsMaxLen int64  `arg:"maxlen"`
}

// KeysArgv returns the KEYS and ARGV of the call.
func (a MarkArgs) KeysArgv() ([]string, []any) {
	return []string{a.Keys.Meta, a.Keys.Events}, argvOf(a)
}
