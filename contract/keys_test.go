package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flaked/flaked/scripts/lua"
)

// allScripts is the text of every script, guard included.
var allScripts = guard + lua.Claim + lua.Renew + lua.Release + lua.Counter + Check + Prune + lua.Init + lua.Mark

func TestCheckNamespace(t *testing.T) {
	for _, ns := range []string{"flaked", "a", "prod-eu.1_x", strings.Repeat("n", 64)} {
		if err := CheckNamespace(ns); err != nil {
			t.Errorf("CheckNamespace(%q) = %v", ns, err)
		}
	}
	for _, ns := range []string{"", "a b", "a:b", "a}b", "{a}", "ü", strings.Repeat("n", 65)} {
		if err := CheckNamespace(ns); err == nil || !strings.Contains(err.Error(), "want 1..64 of A-Z a-z 0-9 . _ -") {
			t.Errorf("CheckNamespace(%q) = %v, want the rule", ns, err)
		}
	}
}

// TestKeys_PerIDKeysAsScriptsBuildThem: the scripts build the lease and
// owner keys from the prefix (prefix .. 'lease:' .. id); Keys must name
// the same ones, and no other.
func TestKeys_PerIDKeysAsScriptsBuildThem(t *testing.T) {
	var built []string
	for _, m := range regexp.MustCompile(`\.\. '(\w+:)' \.\.`).FindAllStringSubmatch(allScripts, -1) {
		if !slices.Contains(built, m[1]) {
			built = append(built, m[1])
		}
	}
	slices.Sort(built)
	if want := []string{"lease:", "owner:"}; !slices.Equal(built, want) {
		t.Fatalf("the scripts build per-ID keys %q, Keys knows %q", built, want)
	}
	k := NewKeys("ns")
	if k.Lease("7") != k.Prefix+"lease:7" || k.Owner("7") != k.Prefix+"owner:7" ||
		k.LeasePrefix != "{ns}:lease:" || k.OwnerPrefix != "{ns}:owner:" {
		t.Errorf("per-ID keys %q %q %q %q", k.Lease("7"), k.Owner("7"), k.LeasePrefix, k.OwnerPrefix)
	}
}

// TestFields_InScripts: every field and event name of fields.go that the
// scripts write is in their text, quoted as they write it (those marked
// "Go only" are written by Go code alone).
func TestFields_InScripts(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "fields.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok {
				t.Fatalf("%s is not a string literal", vs.Names[0])
			}
			name, _ := strconv.Unquote(lit.Value)
			goOnly := vs.Comment != nil && strings.HasPrefix(vs.Comment.Text(), "Go only")
			if !goOnly && !strings.Contains(allScripts, "'"+name+"'") {
				t.Errorf("%s = %q is in no script (a name only Go writes is marked Go only)", vs.Names[0], name)
			}
			n++
		}
	}
	if n < 50 {
		t.Fatalf("only %d constants read from fields.go", n)
	}
}
