package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The manual's flags, defaults, environment variables, INFO fields,
// metrics, HTTP routes and ACL commands are checked against the code here:
// a default or a name stated in a page must be the code's.

// cliFlag is one flag of one command as `flaked <command> --help` prints it.
type cliFlag struct {
	cmd, name, def, env string
}

var helpLine = regexp.MustCompile(`^\s+--([a-z0-9-]+)(?:, -[a-z])?(?: value)?\s`)
var helpDefault = regexp.MustCompile(`\(default: ("[^"]*"|[^)]*)\)`)
var helpEnv = regexp.MustCompile(`\[\$([A-Z0-9_]+)\]\s*$`)

// flakedFlags reads every command's flags from the built binary's help.
func flakedFlags(t *testing.T) []cliFlag {
	t.Helper()
	bin := buildFlaked(t)
	cmds := []string{"serve", "init", "parse", "plan", "version", "healthcheck", "audit", "whois", "doctor",
		"seq list", "seq show", "seq create", "seq restore", "audit history", "audit verify", "audit prune", "audit replicas"}
	var out []cliFlag
	for _, cmd := range cmds {
		b, err := exec.Command(bin, append(strings.Fields(cmd), "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("flaked %s --help: %v\n%s", cmd, err, b)
		}
		for _, line := range strings.Split(string(b), "\n") {
			m := helpLine.FindStringSubmatch(line)
			if m == nil || m[1] == "help" {
				continue
			}
			f := cliFlag{cmd: cmd, name: m[1]}
			if d := helpDefault.FindAllStringSubmatch(line, -1); d != nil {
				f.def = strings.Trim(d[len(d)-1][1], `"`)
			}
			if e := helpEnv.FindStringSubmatch(line); e != nil {
				f.env = e[1]
			}
			out = append(out, f)
		}
	}
	if len(out) < 50 {
		t.Fatalf("read %d flags from flaked's help; its format changed?", len(out))
	}
	return out
}

// tableRow is a row of a Markdown table whose first cell names flags.
type tableRow struct {
	page, line string
	flags      []string // without --
	cmd        string   // "(plan)" in the first cell: the command
	def, env   string   // cells of the "default" and "env var" columns
}

var flagCell = regexp.MustCompile("`--([a-z0-9-]+)`")
var cmdCell = regexp.MustCompile(`\(([a-z]+(?: [a-z]+)?)\)`)

// flagRows are the rows of every docs/ table with a "default" column whose
// first cell names flags.
func flagRows(t *testing.T) []tableRow {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []tableRow
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		defCol, envCol := -1, -1
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "|") {
				defCol, envCol = -1, -1
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			if defCol < 0 && envCol < 0 && !flagCell.MatchString(cells[0]) {
				for i, c := range cells {
					switch strings.TrimSpace(c) {
					case "default":
						defCol = i
					case "env var":
						envCol = i
					}
				}
				continue
			}
			if defCol < 0 || len(cells) <= defCol {
				continue
			}
			r := tableRow{page: page, line: line, def: strings.TrimSpace(cells[defCol])}
			for _, m := range flagCell.FindAllStringSubmatch(cells[0], -1) {
				r.flags = append(r.flags, m[1])
			}
			if m := cmdCell.FindStringSubmatch(cells[0]); m != nil {
				r.cmd = m[1]
			}
			if envCol >= 0 {
				r.env = strings.Trim(strings.TrimSpace(cells[envCol]), "`")
			}
			if len(r.flags) > 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// docDefaults splits a default cell into one default per flag: "63, 8,
// 16" for three flags, or one default for all.
func docDefaults(cell string, n int) []string {
	cell = strings.ReplaceAll(cell, "`", "")
	parts := strings.Split(cell, ", ")
	if len(parts) >= n && n > 1 {
		return parts[:n]
	}
	out := make([]string, n)
	for i := range out {
		out[i] = cell
	}
	return out
}

var docValue = regexp.MustCompile(`^(-?[0-9][0-9,.]*(?: ?(?:B|KiB|MiB|ms|s|m|h))?|[^\s:]+(?::[0-9]+)?)`)

// sameDefault says whether the page's default (its cell's first value,
// "none" for no value) is the code's; a cell may state a condition ("1
// with ..., else 0").
func sameDefault(doc, code string) bool {
	if strings.HasPrefix(doc, "none") {
		return code == "" || code == "0s"
	}
	if code == "" {
		return true // computed at run time; the cell says how
	}
	if strings.Contains(doc, "else "+code) {
		return true
	}
	if first, _, _ := strings.Cut(doc, " "); strings.TrimRight(first, ":,") == code {
		return true
	}
	v := docValue.FindString(doc)
	v = strings.ReplaceAll(v, ",", "")
	if v == code {
		return true
	}
	if d1, err1 := time.ParseDuration(strings.ReplaceAll(v, " ", "")); err1 == nil {
		if d2, err2 := time.ParseDuration(code); err2 == nil {
			return d1 == d2
		}
	}
	for unit, mult := range map[string]int64{" KiB": 1 << 10, " MiB": 1 << 20} {
		if n, ok := strings.CutSuffix(v, unit); ok {
			a, err := strconv.ParseInt(n, 10, 64)
			return err == nil && strconv.FormatInt(a*mult, 10) == code
		}
	}
	return false
}

// TestDocs_FlagTablesMatchTheCode: every flag a docs/ table lists exists,
// with the table's default and environment variable.
func TestDocs_FlagTablesMatchTheCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flaked")
	}
	flags := flakedFlags(t)
	rows := flagRows(t)
	if len(rows) < 30 {
		t.Fatalf("found %d flag rows in docs/ tables; the tables' shape changed?", len(rows))
	}
	for _, r := range rows {
		defs := docDefaults(r.def, len(r.flags))
		for i, name := range r.flags {
			var cands []cliFlag
			for _, f := range flags {
				if f.name == name && (r.cmd == "" || f.cmd == r.cmd || strings.HasSuffix(f.cmd, " "+r.cmd)) {
					cands = append(cands, f)
				}
			}
			if len(cands) == 0 {
				t.Errorf("%s: --%s (%s) is no flag of flaked%s", r.page, name, r.cmd, map[bool]string{true: "", false: " " + r.cmd}[r.cmd == ""])
				continue
			}
			if !slices.ContainsFunc(cands, func(f cliFlag) bool { return sameDefault(defs[i], f.def) }) {
				t.Errorf("%s: --%s: the page's default %q, the code's %q", r.page, name, defs[i], cands[0].def)
			}
			if r.env != "" && len(r.flags) == 1 && !slices.ContainsFunc(cands, func(f cliFlag) bool { return f.env == r.env }) {
				t.Errorf("%s: --%s: the page's env var %s, the code's %s", r.page, name, r.env, cands[0].env)
			}
		}
	}
}

var envName = regexp.MustCompile(`\bFLAKED_[A-Z0-9_]*[A-Z0-9]\b`)

// TestDocs_EnvVarsExist: every FLAKED_ variable the manual and the deploy
// files name is a flag's, or one the test scripts and examples read
// (FLAKED_URL: the daemon's address in the client examples).
func TestDocs_EnvVarsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flaked")
	}
	known := map[string]bool{}
	for _, f := range flakedFlags(t) {
		known[f.env] = true
	}
	// What scripts/ and the test code read (test knobs, the examples' URL).
	for _, path := range append(files(t, "_test.go"), append(filesUnder(t, "scripts"), filesUnder(t, "interop")...)...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`Getenv\("(FLAKED_[A-Z0-9_]+)"\)|\$\{?(FLAKED_[A-Z0-9_]+)|(FLAKED_[A-Z0-9_]+)=`).FindAllStringSubmatch(string(b), -1) {
			known[m[1]+m[2]+m[3]] = true
		}
	}
	var pages []string
	for _, p := range append(files(t, ".md"), append(filesUnder(t, "deploy"), filepath.Join(root, "Dockerfile"), filepath.Join(root, "docker-compose.yml"))...) {
		if !strings.HasSuffix(p, "_test.go") {
			pages = append(pages, p)
		}
	}
	for _, path := range pages {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range envName.FindAllString(string(b), -1) {
			if !known[name] && !strings.HasSuffix(name, "_") {
				t.Errorf("%s names %s, which no flag has and nothing reads", path, name)
			}
		}
	}
}

// filesUnder are the files below dir (relative to the repository).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goSource is the non-test Go source of the repository whose files
// contain marker ("" for all), concatenated: the INFO fields and metrics
// are found wherever their packages live.
func goSource(t *testing.T, marker string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range files(t, ".go") {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), marker) {
			b.Write(src)
		}
	}
	return b.String()
}

// infoKeys are the fields of the daemon's INFO: those of every list of
// INFO pairs ([][2]string: node.Info's, the daemon's additions) and of the
// server's own sections (add("field", ...)).
func infoKeys(t *testing.T) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{"([a-z][a-z0-9_]*)", `).FindAllStringSubmatch(goSource(t, "[][2]string"), -1) {
		keys[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`add\("([a-z][a-z0-9_]*)"`).FindAllStringSubmatch(goSource(t, "func infoFlaked"), -1) {
		keys[m[1]] = true
	}
	if len(keys) < 30 || !keys["mode_configured"] || !keys["flaked_version"] {
		t.Fatalf("found %d INFO fields; the way they are listed changed?", len(keys))
	}
	return keys
}

var backticked = regexp.MustCompile("`([^`]+)`")
var snake = regexp.MustCompile(`^([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?::\S*)?$`)

// TestDocs_INFOFieldsAndMetricsExist: an INFO field a page names next to
// the word INFO is one the daemon reports (or redis-server's, which
// flaked reads); a flaked_ metric a page names is one the code defines,
// directly or as flaked_node_<INFO field>.
func TestDocs_INFOFieldsAndMetricsExist(t *testing.T) {
	keys := infoKeys(t)
	// redis-server's fields that guard.lua and doctor read.
	for _, k := range []string{"run_id", "master_replid", "maxmemory_policy", "connected_slaves"} {
		keys[k] = true
	}
	metrics := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(flaked_[a-z0-9_]+)"`).FindAllStringSubmatch(goSource(t, "prometheus"), -1) {
		metrics[m[1]] = true
	}
	for k := range keys {
		metrics["flaked_node_"+k] = true
	}
	pages := append(files(t, ".md"), filepath.Join(root, "deploy", "grafana", "flaked.json"))
	for _, path := range pages {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range regexp.MustCompile(`\bflaked_[a-z0-9_]*[a-z0-9]\b`).FindAllString(line, -1) {
				if !metrics[m] && !keys[m] && !strings.HasPrefix(m, "flaked_sim") {
					t.Errorf("%s:%d: %s is no metric of flaked", path, i+1, m)
				}
			}
			at := strings.Index(line, "INFO")
			if at < 0 || strings.HasSuffix(path, ".json") {
				continue
			}
			for _, m := range backticked.FindAllStringSubmatchIndex(line, -1) {
				if m[0] < at || m[0] > at+80 {
					continue // not next to the word INFO
				}
				if s := snake.FindStringSubmatch(line[m[2]:m[3]]); s != nil && !keys[s[1]] && !strings.HasPrefix(s[1], "flaked_") {
					t.Errorf("%s:%d: INFO field %q: the daemon reports no such field", path, i+1, s[1])
				}
			}
		}
	}
}

// TestDocs_HTTPRoutesExist: every /v1/ path a page names is a route of
// httpapi's table, and every route is in docs/http.md.
func TestDocs_HTTPRoutesExist(t *testing.T) {
	routes := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{"(/v1/[^"]*)", http\.Method`).FindAllStringSubmatch(goSource(t, "var routes"), -1) {
		routes[m[1]] = true
	}
	if len(routes) < 3 {
		t.Fatalf("found %d routes in httpapi; the routes table changed shape?", len(routes))
	}
	pattern := func(p string) string { // /v1/seq/orders -> /v1/seq/{tag}
		for r := range routes {
			re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(regexp.QuoteMeta(r), `[^/]+`) + "$")
			if re.MatchString(p) {
				return r
			}
		}
		return ""
	}
	for _, path := range files(t, ".md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`/v1/[A-Za-z0-9_.{}/-]*[A-Za-z0-9_}]`).FindAllString(string(b), -1) {
			if pattern(m) == "" {
				t.Errorf("%s names %s, no route of httpapi (routes.go)", path, m)
			}
		}
	}
	b, err := os.ReadFile("http.md")
	if err != nil {
		t.Fatal(err)
	}
	for r := range routes {
		if !strings.Contains(string(b), r) {
			t.Errorf("docs/http.md does not list the route %s", r)
		}
	}
}

// TestDocs_ACLMatchesTheScripts: the node user of deploy/redis/acl.conf
// may run every command flaked's Lua scripts call, and docs/operating.md's
// table lists exactly the users file's commands for each user.
func TestDocs_ACLMatchesTheScripts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "redis", "acl.conf"))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "user" {
			continue
		}
		for _, f := range fields[2:] {
			if c, ok := strings.CutPrefix(f, "+"); ok && !strings.HasPrefix(c, "@") {
				users[fields[1]] = append(users[fields[1]], strings.ToUpper(c))
			}
		}
	}
	node := users["flaked-node"]
	if len(node) == 0 {
		t.Fatal("deploy/redis/acl.conf has no flaked-node user")
	}
	called := map[string]bool{}
	for _, path := range files(t, ".lua") {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`).FindAllStringSubmatch(string(src), -1) {
			called[strings.ToUpper(m[1])] = true
		}
	}
	if len(called) < 5 {
		t.Fatalf("found %d commands in the Lua scripts; they moved?", len(called))
	}
	for c := range called {
		if !slices.Contains(node, c) {
			t.Errorf("a script calls %s, which acl.conf's flaked-node may not run", c)
		}
	}
	page, err := os.ReadFile("operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for user, cmds := range users {
		var row string
		for _, line := range strings.Split(string(page), "\n") {
			if strings.HasPrefix(line, "| `"+user+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/operating.md's ACL table has no row for %s", user)
			continue
		}
		if strings.Contains(row, "what `flaked-audit` may") {
			cmds = slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return slices.Contains(users["flaked-audit"], c) })
		}
		words := map[string]bool{}
		for _, w := range regexp.MustCompile(`[A-Z]+(?:\\?\|[A-Z]+)?`).FindAllString(row, -1) {
			words[strings.ReplaceAll(w, `\|`, "|")] = true
		}
		for _, c := range cmds {
			if !words[c] {
				t.Errorf("docs/operating.md's ACL row of %s does not name %s, which acl.conf grants", user, c)
			}
		}
	}
}
