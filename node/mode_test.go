package node_test

import (
	"errors"
	"testing"

	"github.com/flaked/flaked/node"
)

// The names are what logs, INFO, metrics, owner data and mode events
// carry, and what audit reads back: they do not change.
func TestMode_Names(t *testing.T) {
	for m, want := range map[node.Mode]string{
		node.ModeNone: "none", node.ModeFlake: "flake", node.ModeCounter: "counter",
		node.ModeAuto: "auto", node.ModeStopped: "stopped", node.Mode(200): "Mode(200)",
	} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}

func TestParseMode_ConfigurableOnly(t *testing.T) {
	for _, m := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		if got, err := node.ParseMode(m.String()); got != m || err != nil {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, s := range []string{"", "none", "stopped", "Flake", "turbo"} {
		if _, err := node.ParseMode(s); !errors.Is(err, node.ErrInvalidOptions) {
			t.Errorf("ParseMode(%q): err = %v, want ErrInvalidOptions", s, err)
		}
	}
}
