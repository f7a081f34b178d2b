package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The unreached list: an entry needs its reason; it matches a branch by
// ID, or by file, kind and source line when an edit above moved the line;
// a guard branch neither reached nor listed is missing; a listed one that
// was reached, or that names nothing, is reported stale.
func TestUnreachedList(t *testing.T) {
	if _, err := ReadUnreached(strings.NewReader("guard.lua:1 then | x\n")); err == nil {
		t.Error("an entry without its reason was accepted")
	}
	list, err := ReadUnreached(strings.NewReader(`# comment

a.lua:7 then | if x -- y then z -- moved: listed at line 7, now line 9
a.lua:3 return | return 1 -- reached after all
mode none->flake: start -- never, in this test
b.lua:1 else | gone -- names nothing
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 || list[0].Text != "if x -- y then z" || list[0].Why != "moved: listed at line 7, now line 9" {
		t.Fatalf("read %+v", list)
	}
	rows := []CoverageRow{
		{ID: "a.lua:9 then", Text: "if x -- y then z", Guard: true},
		{ID: "a.lua:3 return", Text: "return 1", Count: 2, Guard: true},
		{ID: "a.lua:4 return", Text: "return 2", Guard: true},
		{ID: "c.lua:1 then", Text: "if y then", Guard: false},
		{ID: "mode none->flake: start", Guard: true},
	}
	missing, stale := missingRows(rows, list)
	if len(missing) != 1 || missing[0].ID != "a.lua:4 return" {
		t.Errorf("missing %+v, want only a.lua:4 return (c.lua is not a guard file)", missing)
	}
	var st []string
	for _, u := range stale {
		st = append(st, u.ID+" "+u.Why)
	}
	if strings.Join(st, "; ") != "a.lua:3 return reached; b.lua:1 else no such branch or transition" {
		t.Errorf("stale: %v", st)
	}
}

// Every log message transitionTap matches is one the code logs: a message
// reworded in node/ would leave its row at 0 and the coverage check
// failing for no branch of the code (or, listed as unreached, hiding it).
func TestTransitionTap_MessagesExist(t *testing.T) {
	src, err := os.ReadFile("coverage.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	start := strings.Index(body, "func (t *transitionTap) Write")
	end := strings.Index(body[start:], "\n}\n")
	var code strings.Builder
	for _, dir := range []string{"../node", "../fallback", "../coord"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			code.Write(b)
		}
	}
	msgs := regexp.MustCompile(`case "([^"]+)":|HasPrefix\(msg, "([^"]+)"\)`).FindAllStringSubmatch(body[start:start+end], -1)
	if len(msgs) < 5 {
		t.Fatalf("found %d messages in transitionTap.Write", len(msgs))
	}
	for _, m := range msgs {
		msg := m[1] + m[2]
		if msg == "mode" {
			continue
		}
		if !strings.Contains(code.String(), `"`+msg) {
			t.Errorf("transitionTap matches %q, which node/, fallback/ and coord/ do not log", msg)
		}
	}
}
