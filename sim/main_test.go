//go:build !simbugs

package sim_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/flaked/flaked/internal/simredis"
)

// TestMain records every command the package's runs send to the simulated
// Redis (default schedules, blocks, sequences, every exposure kind), from
// clients and scripts, and fails the package on one internal/simredis does
// not implement, naming it, instead of letting it show up as an error
// reply a run may take for a fault. simredis implements what this records
// and nothing more (its doc lists the commands). Not in the simbugs build,
// whose re-introduced bugs run for the teeth test only.
func TestMain(m *testing.M) {
	stop := simredis.RecordCommands()
	code := m.Run()
	sent := stop()
	var names, missing []string
	for name := range sent {
		names = append(names, name)
		if cmd, _, _ := strings.Cut(name, " "); !simredis.Implemented(cmd) {
			missing = append(missing, fmt.Sprintf("%s (%d times)", strings.ToUpper(name), sent[name]))
		}
	}
	slices.Sort(names)
	slices.Sort(missing)
	if testing.Verbose() {
		fmt.Printf("commands sent to simredis: %s\n", strings.Join(names, ", "))
	}
	if len(missing) > 0 {
		fmt.Printf("FAIL: the simulator sent commands internal/simredis does not implement: %s\n", strings.Join(missing, ", "))
		code = 1
	}
	os.Exit(code)
}
