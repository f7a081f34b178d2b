// Package daemontest builds the flaked binary for the tests that run the
// daemon as a process: the fleet suite (tests/) and the interop, deploy
// and bench modules. Those modules' paths lie below github.com/flaked/flaked,
// so Go's internal rule lets them import it like the main module's own
// tests do.
//
// The binary is built once per test process, from the main module's
// cmd/flaked with the main module's go.mod and go.sum, whichever module the
// test belongs to; a TestMain that builds ends with os.Exit(Run(m)), which
// removes it. Under go test -short nothing is built: Binary skips.
package daemontest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flaked/flaked/internal/redistest"
)

// mainModule is the path of the module cmd/flaked belongs to.
const mainModule = "github.com/flaked/flaked"

var built struct {
	once sync.Once
	dir  string // removed by Run
	path string
	err  error
}

// Build returns the path of the flaked binary, built on the first call and
// shared by every later one in this process.
func Build() (string, error) {
	built.once.Do(func() {
		// The main module's directory: the module itself, or the directory
		// its replace directive names in interop/, deploy/ and bench/.
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mainModule).Output()
		if err != nil {
			built.err = fmt.Errorf("daemontest: go list -m %s: %w", mainModule, err)
			return
		}
		root := strings.TrimSpace(string(out))
		if built.dir, err = os.MkdirTemp("", "flaked-bin-"); err != nil {
			built.err = err
			return
		}
		path := filepath.Join(built.dir, "flaked")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/flaked")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("daemontest: building flaked in %s: %w\n%s", root, err, out)
			return
		}
		built.path = path
	})
	return built.path, built.err
}

// Binary is Build for a test: it skips under go test -short (the fast tier
// runs no built binary) and fails the test when the build fails.
func Binary(tb testing.TB) string {
	tb.Helper()
	redistest.SkipShort(tb, "a built flaked binary")
	path, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Run runs m's tests and then removes the binary Build made, if it made
// one, and returns m.Run's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}
