package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/simredis"
	"github.com/flaked/flaked/scripts/lua"
)

// Coverage is what a run (or a hunt) reached: how often each branch of the
// Lua scripts ran (indexed as simredis.Branches) and each transition of a
// node's mode machine was taken (by name, Transitions).
type Coverage struct {
	Branches    []uint64
	Transitions map[string]int
	Rules       map[string]int // the replica rules' outcomes (Rules)
}

func (c *Coverage) add(o Coverage) {
	for len(c.Branches) < len(o.Branches) {
		c.Branches = append(c.Branches, 0)
	}
	for i, v := range o.Branches {
		c.Branches[i] += v
	}
	if c.Transitions == nil {
		c.Transitions = map[string]int{}
	}
	for k, v := range o.Transitions {
		c.Transitions[k] += v
	}
	if c.Rules == nil {
		c.Rules = map[string]int{}
	}
	for k, v := range o.Rules {
		c.Rules[k] += v
	}
}

// The scripts the simulated Redis counts, with the files they are made
// of, in the order contract's lua.go puts them together (checked here:
// a script that is not its files would be counted on the wrong lines).
func init() {
	part := func(file, text string) simredis.Part {
		return simredis.Part{File: file, Lines: strings.Count(text, "\n")}
	}
	args, events, guard := part("args.lua", lua.Args), part("events.lua", lua.Events), part("guard.lua", lua.Guard)
	replicas := part("replicas.lua", lua.Replicas)
	for _, s := range []struct {
		script string
		files  []string
		parts  []simredis.Part
	}{
		{contract.Claim, []string{lua.Args, lua.Events, lua.Guard, lua.Replicas, lua.Claim}, []simredis.Part{args, events, guard, replicas, part("claim.lua", lua.Claim)}},
		{contract.Renew, []string{lua.Args, lua.Events, lua.Guard, lua.Replicas, lua.Renew}, []simredis.Part{args, events, guard, replicas, part("renew.lua", lua.Renew)}},
		{contract.Counter, []string{lua.Args, lua.Events, lua.Guard, lua.Replicas, lua.Counter}, []simredis.Part{args, events, guard, replicas, part("counter.lua", lua.Counter)}},
		{contract.Release, []string{lua.Args, lua.Events, lua.Guard, lua.Release}, []simredis.Part{args, events, guard, part("release.lua", lua.Release)}},
		{contract.Init, []string{lua.Args, lua.Events, lua.Guard, lua.Init}, []simredis.Part{args, events, guard, part("init.lua", lua.Init)}},
		{contract.Check, []string{lua.Args, lua.Check}, []simredis.Part{args, part("check.lua", lua.Check)}},
		{contract.Prune, []string{lua.Args, lua.Events, lua.Prune}, []simredis.Part{args, events, part("prune.lua", lua.Prune)}},
	} {
		if s.script != strings.Join(s.files, "") {
			panic("sim: a script is not the files its coverage names; update sim/coverage.go")
		}
		simredis.Cover(s.script, s.parts)
	}
}

// writingFiles are the files of the scripts that write the registry or
// the counter (those that start with guard.lua): their branches are the
// guard branches a CI seed set must reach, or list in unreached.txt.
var writingFiles = []string{"args.lua", "events.lua", "guard.lua", "replicas.lua", "claim.lua", "renew.lua", "release.lua", "counter.lua", "init.lua"}

// Transitions are the moves of a node's mode machine (node/doc.go) and the
// lease events within flake mode, as the simulator tells them from the
// nodes' log lines.
var Transitions = []string{
	"none->flake: start",
	"none->counter: configured",
	"none->counter: auto, flake unsafe at start",
	"none->stopped: close",
	"flake->counter: auto, no machine ID held",
	"flake->counter: auto, lease lost",
	"flake->counter: auto, reservation spent",
	"flake->counter: auto, clock behind the floor",
	"flake->counter: auto, clock skewed from Redis",
	"counter->flake: auto, healthy for RecoverAfter",
	"counter->flake: auto, failed (stays counter)",
	"counter->counter: counter failed to start",
	"flake->stopped: close",
	"counter->stopped: close",
	"flake: lease lost",
	"flake: lease fenced",
	"flake: resumed",
	"claim: clone of a state file",
	"claim: clock behind the preferred IDs' reservation",
}

// transitionTap reads a run's node log lines (JSON) and counts the
// transitions they show.
type transitionTap struct {
	seen map[string]int
}

func (t *transitionTap) Write(p []byte) (int, error) {
	msg := jsonField(p, "message")
	var name string
	switch msg {
	case "mode":
		from, to, reason := jsonField(p, "from"), jsonField(p, "to"), jsonField(p, "reason")
		name = from + "->" + to + ": " + modeReason(from, to, reason)
	case "returning to flake mode failed; staying in counter mode":
		name = "counter->flake: auto, failed (stays counter)"
	case "counter mode failed to start":
		name = "counter->counter: counter failed to start"
	case "lease lost":
		name = "flake: lease lost"
	case "flake mode resumed":
		name = "flake: resumed"
	case "clock is behind the reservation of the preferred machine IDs; claiming others":
		name = "claim: clock behind the preferred IDs' reservation"
	default:
		switch {
		case strings.HasPrefix(msg, "lease fenced"):
			name = "flake: lease fenced"
		case strings.HasPrefix(msg, "the state file's machine ID is held by a live process"):
			name = "claim: clone of a state file"
		default:
			return len(p), nil
		}
	}
	t.seen[name]++
	return len(p), nil
}

// modeReason names the cause of a mode event.
func modeReason(from, to, reason string) string {
	switch {
	case to == "stopped":
		return "close"
	case from == "none" && to == "flake":
		return "start"
	case from == "none" && reason == "mode counter":
		return "configured"
	case from == "none":
		return "auto, flake unsafe at start"
	case to == "flake":
		return "auto, healthy for RecoverAfter"
	case strings.HasPrefix(reason, "no machine ID held"):
		return "auto, no machine ID held"
	case strings.HasPrefix(reason, "reservation spent"):
		return "auto, reservation spent"
	case strings.Contains(reason, "clock is behind"):
		return "auto, clock behind the floor"
	case strings.Contains(reason, "clock is skewed"):
		return "auto, clock skewed from Redis"
	}
	return "auto, lease lost"
}

// jsonField returns the string value of "name" in a zerolog line (no
// unescaping: the names and messages matched need none).
func jsonField(p []byte, name string) string {
	key := []byte(`"` + name + `":"`)
	i := bytes.Index(p, key)
	if i < 0 {
		return ""
	}
	rest := p[i+len(key):]
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '\\':
			j++
		case '"':
			return string(rest[:j])
		}
	}
	return ""
}

// Unreached is one entry of the list of guard branches and transitions
// the CI seed set is allowed not to reach: what (the source line too, for
// a branch), and why.
type Unreached struct {
	ID, Text, Why string
}

// matches reports whether the entry names row: by its ID, or, for a
// branch whose line moved (an edit above it), by file, kind and source
// line.
func (u Unreached) matches(r CoverageRow) bool {
	if u.ID == r.ID {
		return true
	}
	if u.Text == "" || u.Text != r.Text {
		return false
	}
	uf, uk := splitID(u.ID)
	rf, rk := splitID(r.ID)
	return uf == rf && uk == rk
}

// splitID splits "file:line kind" into file and kind.
func splitID(id string) (file, kind string) {
	loc, kind, _ := strings.Cut(id, " ")
	file, _, _ = strings.Cut(loc, ":")
	return file, kind
}

// ReadUnreached reads a list: one entry a line, "ID | source line -- why"
// (the ID and the source line as the coverage table prints them: file:line
// kind, or "mode " and a transition, which has no source line), blank
// lines and lines starting with # ignored. An entry without its reason is
// an error.
func ReadUnreached(r io.Reader) ([]Unreached, error) {
	var out []Unreached
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The reason follows the last " -- " (a source line may hold one).
		k := strings.LastIndex(line, " -- ")
		if k < 0 || strings.TrimSpace(line[k+4:]) == "" {
			return nil, fmt.Errorf("line %d: %q: want \"ID -- why it is not reached\"", n, line)
		}
		id, why := line[:k], line[k+4:]
		id, text, _ := strings.Cut(id, " | ")
		out = append(out, Unreached{ID: strings.TrimSpace(id), Text: strings.TrimSpace(text), Why: strings.TrimSpace(why)})
	}
	return out, sc.Err()
}

// CoverageRow is one line of the coverage table.
type CoverageRow struct {
	ID    string // file:line kind, or a transition
	Text  string // the source line
	Count uint64
	Guard bool // a branch of a writing script, or a transition
}

// Rows returns the coverage table: every branch of the covered scripts,
// then every transition.
func (c Coverage) Rows() []CoverageRow {
	var rows []CoverageRow
	for i, b := range simredis.Branches() {
		var n uint64
		if i < len(c.Branches) {
			n = c.Branches[i]
		}
		rows = append(rows, CoverageRow{ID: b.ID(), Text: b.Text, Count: n, Guard: slices.Contains(writingFiles, b.File)})
	}
	for _, t := range Transitions {
		rows = append(rows, CoverageRow{ID: "mode " + t, Count: uint64(c.Transitions[t]), Guard: true})
	}
	for _, t := range Rules {
		rows = append(rows, CoverageRow{ID: "rule " + t, Count: uint64(c.Rules[t]), Guard: true})
	}
	return rows
}

// Missing returns the guard rows never reached and not listed, and the
// listed entries that were reached after all or name nothing (a list
// that is kept honest).
func (c Coverage) Missing(list []Unreached) (missing []CoverageRow, stale []Unreached) {
	return missingRows(c.Rows(), list)
}

func missingRows(rows []CoverageRow, list []Unreached) (missing []CoverageRow, stale []Unreached) {
	used := make([]bool, len(list))
	for _, r := range rows {
		listed := false
		for i, u := range list {
			if u.matches(r) {
				listed, used[i] = true, true
			}
		}
		if r.Guard && r.Count == 0 && !listed {
			missing = append(missing, r)
		}
		if r.Count > 0 && listed {
			stale = append(stale, Unreached{ID: r.ID, Why: "reached"})
		}
	}
	for i, u := range list {
		if !used[i] {
			stale = append(stale, Unreached{ID: u.ID, Why: "no such branch or transition"})
		}
	}
	return missing, stale
}

// PrintCoverage writes the table: each row's count and source line,
// a summary per file.
func PrintCoverage(w io.Writer, c Coverage) {
	rows := c.Rows()
	type tally struct{ all, reached int }
	per := map[string]*tally{}
	var files []string
	for _, r := range rows {
		f, _, _ := strings.Cut(r.ID, ":")
		switch {
		case strings.HasPrefix(r.ID, "mode "):
			f = "mode machine"
		case strings.HasPrefix(r.ID, "rule mark"):
			f = "mark rule"
		case strings.HasPrefix(r.ID, "rule sentinel"):
			f = "Sentinel rule"
		}
		if per[f] == nil {
			per[f] = &tally{}
			files = append(files, f)
		}
		per[f].all++
		if r.Count > 0 {
			per[f].reached++
		}
		mark := " "
		if r.Count == 0 {
			mark = "!"
		}
		fmt.Fprintf(w, "%s %10d  %-28s %s\n", mark, r.Count, r.ID, clipText(r.Text, 70))
	}
	fmt.Fprintln(w, "reached per file:")
	for _, f := range files {
		fmt.Fprintf(w, "  %-14s %3d of %3d\n", f, per[f].reached, per[f].all)
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// CheckCoverage checks c against the list in file path: every guard
// branch and transition reached or listed with its reason, and nothing
// listed that was reached. It returns the problems, one a line.
func CheckCoverage(c Coverage, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	list, err := ReadUnreached(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	missing, stale := c.Missing(list)
	var out []string
	for _, r := range missing {
		out = append(out, fmt.Sprintf("not reached and not listed in %s: %s  (%s)", path, r.ID, r.Text))
	}
	for _, u := range stale {
		out = append(out, fmt.Sprintf("listed in %s but %s: %s", path, u.Why, u.ID))
	}
	return out, nil
}
