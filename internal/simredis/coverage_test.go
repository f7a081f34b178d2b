package simredis

import (
	"strings"
	"testing"

	"github.com/flaked/flaked/contract"
)

// Every test of this package runs flaked's scripts instrumented, as the
// simulator does: the differential tests (diff_test.go) then show, against
// a real redis-server, that the counters change no reply, no key and no
// error text (line numbers included).
func init() {
	for _, s := range []string{contract.Claim, contract.Renew, contract.Release, contract.Counter, contract.Check, contract.Prune} {
		Cover(s, []Part{{File: "flaked.lua", Lines: strings.Count(s, "\n") + 1}})
	}
}

// A covered script counts each branch it takes, and its errors name the
// same lines as the text the client sent.
func TestCover_CountsBranchesKeepsLines(t *testing.T) {
	src := "local function f(x)\n" +
		"  if x == '1' then return 'one' elseif x == '2' then\n" +
		"    return 'two'\n" +
		"  else\n" +
		"    return redis.call('NOSUCH') -- then else return 'x'\n" +
		"  end\n" +
		"end\n" +
		"local s = \"then else\" return f(ARGV[1])\n"
	Cover(src, []Part{{File: "a.lua", Lines: 2}, {File: "b.lua", Lines: 6}})
	s := New(nil, nil)
	for _, arg := range []string{"1", "1", "2"} {
		if _, err := s.Do([]string{"EVAL", src, "0", arg}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Do([]string{"EVAL", src, "0", "3"})
	if err == nil || !strings.Contains(err.Error(), "@user_script:5.") {
		t.Errorf("error %v: want the line of the call, 5", err)
	}
	counts := s.Coverage(nil)
	got := map[string]uint64{}
	for i, b := range Branches() {
		if i < len(counts) && (b.File == "a.lua" || b.File == "b.lua") {
			got[b.ID()] = counts[i]
		}
	}
	want := map[string]uint64{
		"a.lua:1 function": 4, "a.lua:2 then": 2, "a.lua:2 return": 2, "a.lua:2 then#2": 1,
		"b.lua:1 return": 1, "b.lua:2 else": 1, "b.lua:3 return": 1, "b.lua:6 return": 4,
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("%s ran %d times, want %d (all: %v)", id, got[id], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("branches %v: want exactly %v (nothing inside strings or comments)", got, want)
	}
}

// The scripts the differential tests run are the instrumented ones.
func TestCover_FlakedScriptsInstrumented(t *testing.T) {
	for _, s := range []string{contract.Claim, contract.Renew, contract.Release, contract.Counter} {
		if got := instrumented(s); got == s || !strings.Contains(got, covName) {
			t.Fatalf("script %.40q is not instrumented", s)
		}
	}
}
