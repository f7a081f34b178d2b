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
