// Package docs holds the manual (the Markdown pages beside this file) and
// the tests that keep it, the README and the other documents of the
// repository honest: links that resolve, a README short enough to read,
// and no words that date a document instead of describing the system.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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
// names a file or folder that exists, and an anchor a heading of the page
// it names (a page's sections are where other pages send the reader).
func TestDocs_LinksResolve(t *testing.T) {
	for _, path := range files(t, ".md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			page, anchor, _ := strings.Cut(target, "#")
			file := path
			if page != "" {
				file = filepath.Join(filepath.Dir(path), page)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %q: %v", path, target, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !anchors(t, file)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor %q", path, target, file, anchor)
			}
		}
	}
}

var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)

// anchors returns the anchors GitHub makes for the headings of a Markdown
// file: lower case, punctuation but hyphens and underscores dropped,
// spaces made hyphens, a repeated one numbered from -1.
func anchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Headings inside code blocks (shell comments) are not headings.
	var text strings.Builder
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			text.WriteString(l + "\n")
		}
	}
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(text.String(), -1) {
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
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

// packageDirs returns the repository's package directories, slash-ended
// and relative to the root: every directory of the main module that holds
// Go files, and the root of each other module (bench/, deploy/,
// interop/), whose own packages its README or map describe.
func packageDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		if skipDir(d.Name()) {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel) + "/"
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			dirs = append(dirs, rel)
			return filepath.SkipDir
		}
		if goFiles, _ := filepath.Glob(filepath.Join(path, "*.go")); len(goFiles) > 0 {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// firstCell is a Markdown table row's first cell; backtickedDir a
// `path/` in it.
var firstCell = regexp.MustCompile("(?m)^\\| *([^|]*)\\|")
var backtickedDir = regexp.MustCompile("`([^`]+/)`")

// TestDocs_PackageMapsListEveryPackage: CONTRIBUTING.md's layout map and
// design.md's package table give every package directory a row of its own
// (its path, in backticks, in the row's first cell), so a reader who
// follows either finds each package and its one job. Fault: a package
// added, moved or renamed without its row.
func TestDocs_PackageMapsListEveryPackage(t *testing.T) {
	dirs := packageDirs(t)
	for _, want := range []string{"flake/", "internal/segment/", "cmd/flaked/", "scripts/lua/", "bench/"} {
		if !slices.Contains(dirs, want) {
			t.Fatalf("the walk found %v, without %s: the walk is wrong", dirs, want)
		}
	}
	for _, doc := range []string{"CONTRIBUTING.md", "docs/design.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, cell := range firstCell.FindAllStringSubmatch(string(b), -1) {
			for _, p := range backtickedDir.FindAllStringSubmatch(cell[1], -1) {
				rows = append(rows, p[1])
			}
		}
		for _, dir := range dirs {
			if !slices.Contains(rows, dir) {
				t.Errorf("%s: no row for %s: add one that says what the package is for", doc, dir)
			}
		}
		for _, row := range rows {
			if strings.HasSuffix(row, "/") && !slices.Contains(dirs, row) {
				if _, err := os.Stat(filepath.Join(root, row)); err != nil {
					t.Errorf("%s: a row for %s, which does not exist", doc, row)
				}
			}
		}
	}
}
