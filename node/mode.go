package node

import "fmt"

// Mode is a mode of a node. Options.Mode configures one of ModeFlake,
// ModeCounter and ModeAuto; Node.Mode is the one IDs are issued in now,
// ModeFlake or ModeCounter; mode events and their log lines also name
// ModeNone (before the start) and ModeStopped (after Close). doc.go draws
// the moves between them.
type Mode uint8

// Modes of a node.
const (
	// ModeNone is no mode yet: where a node's first mode event comes from.
	// As Options.Mode it means the default, ModeFlake.
	ModeNone Mode = iota
	// ModeFlake: time-based IDs under leased machine IDs.
	ModeFlake
	// ModeCounter: IDs from the Redis counter, under the reserved machine ID.
	ModeCounter
	// ModeAuto is configured only: flake, falling back to counter while
	// flake is unsafe.
	ModeAuto
	// ModeStopped: closed, where a node's last mode event goes.
	ModeStopped
)

var modeNames = [...]string{ModeNone: "none", ModeFlake: "flake", ModeCounter: "counter", ModeAuto: "auto", ModeStopped: "stopped"}

// String is the mode's name in logs, INFO, metrics, the owner data and
// mode events (audit reads them there).
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// configurable reports whether m is a mode Options.Mode may name.
func (m Mode) configurable() bool { return m == ModeFlake || m == ModeCounter || m == ModeAuto }

// ParseMode reads a mode a node can be configured with: "flake",
// "counter" or "auto".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeFlake, ModeCounter, ModeAuto} {
		if s == m.String() {
			return m, nil
		}
	}
	return ModeNone, fmt.Errorf("%w: mode %q: want %s, %s or %s", ErrInvalidOptions, s, ModeFlake, ModeCounter, ModeAuto)
}
