package simredis

import (
	"strings"
	"sync"
	"sync/atomic"
)

// recording counts, while on, the commands every Server of the process
// runs, from clients and from scripts, unknown ones included: what the
// simulator actually sends, which is what this package must implement
// (the TestMain of sim/).
var recording struct {
	on    atomic.Bool
	mu    sync.Mutex
	names map[string]int
}

// RecordCommands starts counting the commands run by every Server and
// returns the function that stops and returns the counts, by lower-case
// name; a command with a subcommand (SCRIPT LOAD, XINFO STREAM) counts
// under both words. Not for concurrent recordings.
func RecordCommands() (stop func() map[string]int) {
	recording.mu.Lock()
	recording.names = map[string]int{}
	recording.mu.Unlock()
	recording.on.Store(true)
	return func() map[string]int {
		recording.on.Store(false)
		recording.mu.Lock()
		defer recording.mu.Unlock()
		out := recording.names
		recording.names = nil
		return out
	}
}

// Implemented reports whether the Server runs the command name (any case).
func Implemented(name string) bool { return lookup(name) != nil }

// withSubcommand are the commands whose first argument names what they do.
var withSubcommand = map[string]bool{"script": true, "xinfo": true}

func record(args []string) {
	if !recording.on.Load() || len(args) == 0 {
		return
	}
	name := strings.ToLower(args[0])
	if withSubcommand[name] && len(args) > 1 {
		name += " " + strings.ToLower(args[1])
	}
	recording.mu.Lock()
	if recording.names != nil {
		recording.names[name]++
	}
	recording.mu.Unlock()
}
