// Package docs holds the manual (the Markdown pages beside this file) and
// the tests that keep it, the README and the other documents of the
// repository honest: links that resolve, a README short enough to read,
// and no words that date a document instead of describing the system.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository, one folder up from docs/.
const root = ".."

// skipDir is what the walks leave out: other people's code and build
// output.
func skipDir(name string) bool {
	return name == ".git" || name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".")
}

// files returns the repository's files whose names end in one of exts.
func files(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(path, e) {
				out = append(out, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diaryWords date a text or speak of who wrote it rather than of the
// system: history belongs in commit messages, and a manual says what is
// true now.
var diaryWords = regexp.MustCompile(`(?i)\b(sessions?|starting contract|other engineers)\b`)

// TestDocs_NoDiaryWords fails when a Markdown file, or a comment in Go or
// Lua, speaks of sessions, the starting contract or other engineers.
func TestDocs_NoDiaryWords(t *testing.T) {
	for _, path := range files(t, ".md", ".go", ".lua") {
		if strings.HasSuffix(path, "docs_test.go") {
			continue // this file names the words
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			text := line
			switch {
			case strings.HasSuffix(path, ".go"):
				c := strings.Index(line, "//")
				if c < 0 {
					continue
				}
				text = line[c:]
			case strings.HasSuffix(path, ".lua"):
				c := strings.Index(line, "--")
				if c < 0 {
					continue
				}
				text = line[c:]
			}
			if m := diaryWords.FindString(text); m != "" {
				t.Errorf("%s:%d: %q: say what is true now, and put history in the commit message", path, i+1, m)
			}
		}
	}
}

// TestREADME_IsALandingPage keeps the README short, with the licence and
// the pages it links to present.
func TestREADME_IsALandingPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it at most 200 and move the rest to docs/", n)
	}
	for _, want := range []string{"LICENSE", "CONTRIBUTING.md"} {
		if _, err := os.Stat(filepath.Join(root, want)); err != nil {
			t.Errorf("%s: %v", want, err)
		}
	}
	for _, section := range []string{"## Install", "## Run", "go install", "## License"} {
		if !strings.Contains(string(b), section) {
			t.Errorf("README.md has no %q", section)
		}
	}
}

// link is a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocs_LinksResolve checks every relative link of every Markdown file
// names a file or folder that exists (anchors are not checked).
func TestDocs_LinksResolve(t *testing.T) {
	for _, path := range files(t, ".md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s: link %q: %v", path, m[1], err)
			}
		}
	}
}

var testName = regexp.MustCompile(`\b(?:Test|Benchmark|Example)[A-Z][A-Za-z0-9_]*`)
var testFunc = regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?((?:Test|Benchmark|Example)[A-Za-z0-9_]*)\(`)

// TestDocs_NamedTestsExist: every test, benchmark or example a Markdown
// file names is a function of the repository (a name used as a -run
// pattern, such as TestSplitBrain, names the tests it starts).
func TestDocs_NamedTestsExist(t *testing.T) {
	var defined []string
	for _, path := range files(t, "_test.go") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			defined = append(defined, m[1])
		}
	}
	if len(defined) < 100 {
		t.Fatalf("found %d test functions; the walk is wrong", len(defined))
	}
	for _, path := range files(t, ".md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range testName.FindAllString(string(b), -1) {
			if !slices.ContainsFunc(defined, func(d string) bool { return strings.HasPrefix(d, name) }) {
				t.Errorf("%s names %s, which no test file defines", path, name)
			}
		}
	}
}
