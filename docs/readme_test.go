package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// TestREADME_RunsAsWritten runs the README's ```sh blocks in order, as a
// newcomer types them, in one bash in an empty directory holding a copy of
// deploy/redis, with a flaked built from this checkout first in PATH: one
// node with its HTTP API, then a fleet of three nodes on a local
// redis-server with init, doctor and audit, and its stop. The ```go blocks
// run at their place, each as the body of a main function (the fleet is
// up then). What the test does besides running the lines as written:
//
//   - The block with `go install` (the Install section) is skipped: the
//     binary is built here.
//   - Every port the README names (127.0.0.1:N, -p N, --port N, and 7379,
//     serve's default listen port, given through FLAKED_LISTEN) is replaced,
//     wherever it appears, by a free port, the same one for each.
//   - After a line that starts a process in the background (ending in &),
//     the script waits until the ports of that line answer, as a reader
//     waits for the log line.
//   - A line whose comment is `# → TEXT` (`// → TEXT` in Go) must print
//     TEXT, with every run of digits standing for any digits.
//
// At the end every process the blocks started must have exited: the README
// stops what it starts.
func TestREADME_RunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flaked and runs redis-server")
	}
	redistest.Require(t, "redis-server", "redis-cli", "curl")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(b))
	dir := t.TempDir()
	bin := buildFlaked(t)

	ports := readmePorts(blocks)
	for p := range ports {
		ports[p] = strconv.Itoa(redistest.FreePort(t))
	}
	var script strings.Builder
	script.WriteString(scriptPreamble)
	var checks []outputCheck
	gos := 0
	for _, bl := range blocks {
		text := substitutePorts(bl.text, ports)
		switch {
		case bl.lang == "sh" && strings.Contains(text, "go install"):
			continue
		case bl.lang == "sh":
			for _, line := range strings.Split(text, "\n") {
				cmd, want := splitExpected(line, "#")
				switch {
				case want != "":
					out := fmt.Sprintf(".out.%d", len(checks))
					checks = append(checks, outputCheck{cmd: cmd, want: want, file: out})
					fmt.Fprintf(&script, "{ %s ; } > %s\ncat %s\n", cmd, out, out)
				case strings.HasSuffix(withoutComment(cmd), "&"):
					fmt.Fprintf(&script, "%s\n", line)
					for _, p := range linePorts(withoutComment(cmd), ports["7379"]) {
						fmt.Fprintf(&script, "waitport %s\n", p)
					}
				default:
					fmt.Fprintf(&script, "%s\n", line)
				}
			}
		case bl.lang == "go":
			prog, want := buildGoBlock(t, text, gos)
			out := fmt.Sprintf(".out.go%d", gos)
			if want != "" {
				checks = append(checks, outputCheck{cmd: "the Go block " + strconv.Itoa(gos+1), want: want, file: out})
			}
			fmt.Fprintf(&script, "%s > %s\ncat %s\n", prog, out, out)
			gos++
		}
	}
	if gos == 0 || len(checks) == 0 {
		t.Fatalf("README.md: %d Go blocks, %d outputs to check; the test reads ```sh and ```go blocks and `# → ` comments", gos, len(checks))
	}
	if err := os.CopyFS(filepath.Join(dir, "deploy", "redis"), os.DirFS(filepath.Join(root, "deploy", "redis"))); err != nil {
		t.Fatal(err)
	}
	scriptFile := filepath.Join(t.TempDir(), "readme.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "readme.log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptFile)
	cmd.Dir = dir
	cmd.Env = readmeEnv(dir, bin, ports["7379"])
	// The log is a file, not a pipe: a background process the script left
	// running would keep a pipe open and Wait with it.
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	output := func() string {
		b, _ := os.ReadFile(logFile)
		return string(b)
	}
	if runErr != nil {
		t.Fatalf("the README's blocks failed: %v\n--- script\n%s\n--- output\n%s", runErr, script.String(), output())
	}
	for _, c := range checks {
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); !shape(c.want).MatchString(got) {
			t.Errorf("%s printed %q; the README says it prints %q", c.cmd, got, c.want)
		}
	}
	// What the README starts, it stops (the processes take a moment to exit
	// after their stop command returned).
	deadline := time.Now().Add(15 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("processes the README started still run after its blocks ended\n--- output\n%s", output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("--- output\n%s", output())
	}
}

// scriptPreamble stops the script at the first failing command, traces
// each line into the log and defines waitport.
const scriptPreamble = `set -e -o pipefail
PS4='+ '
set -x
waitport() {
  { set +x; } 2>/dev/null
  local i
  for i in $(seq 400); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then set -x; return 0; fi
    sleep 0.05
  done
  echo "nothing answers on port $1" >&2
  return 1
}
`

type block struct{ lang, text string }

type outputCheck struct{ cmd, want, file string }

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// fencedBlocks are the Markdown file's fenced code blocks, in order.
func fencedBlocks(md string) []block {
	var out []block
	for _, m := range fence.FindAllStringSubmatch(md, -1) {
		out = append(out, block{lang: m[1], text: strings.TrimRight(m[2], "\n")})
	}
	return out
}

var portRef = regexp.MustCompile(`(?:127\.0\.0\.1:|-p |--port )(\d{4,5})\b`)

// readmePorts are the ports the blocks name, and serve's default.
func readmePorts(blocks []block) map[string]string {
	ports := map[string]string{"7379": ""}
	for _, bl := range blocks {
		for _, m := range portRef.FindAllStringSubmatch(bl.text, -1) {
			ports[m[1]] = ""
		}
	}
	return ports
}

// substitutePorts replaces each port, as a whole number, by its stand-in.
func substitutePorts(text string, ports map[string]string) string {
	for from, to := range ports {
		text = regexp.MustCompile(`\b`+from+`\b`).ReplaceAllString(text, to)
	}
	return text
}

// linePorts are the ports a background command serves on: those it names,
// or serve's default listen port.
func linePorts(cmd, defaultListen string) []string {
	var out []string
	for _, m := range portRef.FindAllStringSubmatch(cmd, -1) {
		out = append(out, m[1])
	}
	if strings.Contains(cmd, "flaked serve") && !strings.Contains(cmd, "--listen") {
		out = append(out, defaultListen)
	}
	return out
}

// splitExpected splits a line at its `→` comment: the command and what it
// prints ("" when the comment says something else).
func splitExpected(line, comment string) (cmd, want string) {
	before, after, ok := strings.Cut(line, comment+" → ")
	if !ok {
		return line, ""
	}
	return strings.TrimSpace(before), strings.TrimSpace(after)
}

// withoutComment is a shell line without its comment (the README's
// comments follow a space; no command of it has a # of its own).
func withoutComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

var digits = regexp.MustCompile(`[0-9]+`)

// shape is want with each run of digits matching any digits.
func shape(want string) *regexp.Regexp {
	parts := digits.Split(want, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, "[0-9]+") + "$")
}

// readmeEnv is the newcomer's environment: the built flaked first in PATH,
// HOME and the state directory in the test's directory, no FLAKED_
// variables but serve's default listen port moved to a free one.
func readmeEnv(dir, bin, listenPort string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLAKED_") || slices.Contains([]string{"PATH", "HOME", "STATE_DIRECTORY", "REDISCLI_AUTH"}, k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir,
		"STATE_DIRECTORY="+filepath.Join(dir, "state"),
		"FLAKED_LISTEN=127.0.0.1:"+listenPort,
	)
}

// buildFlaked builds cmd/flaked once for the package's tests. It is the
// one place these tests get their binary from.
func buildFlaked(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "flaked-docs-")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.bin = dir, filepath.Join(dir, "flaked")
		out, err := exec.Command("go", "build", "-o", built.bin, filepath.Join(root, "cmd", "flaked")).CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build ./cmd/flaked: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// goImports are what the README's Go blocks may use; each is referenced
// once, so a block that leaves one unused still compiles.
const goImports = `import (
	"context"
	"fmt"
	"log"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/redisurl"
	"github.com/flaked/flaked/node"
)

var _, _, _ = fmt.Sprint, log.Fatal, context.Background
var _, _, _ = client.NewFromURL, redisurl.NewClient, node.New
`

// buildGoBlock builds a Go block as the body of main, with ctx in scope,
// in a module of its own that replaces flaked by this checkout (the
// module cache has every dependency: no network). It returns the binary
// and what the block's `// → ` comment says it prints.
func buildGoBlock(t *testing.T, body string, i int) (bin, want string) {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(body, "\n") {
		cmd, w := splitExpected(line, "//")
		if w != "" {
			want = w
		}
		lines = append(lines, "\t"+cmd)
	}
	repo, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module readme\n\ngo 1.24\n\nrequire github.com/flaked/flaked v0.0.0\n\nreplace github.com/flaked/flaked => " + repo + "\n"
	src := "package main\n\n" + goImports + "\nfunc main() {\n\tctx := context.Background()\n" + strings.Join(lines, "\n") + "\n}\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(dir, fmt.Sprintf("readme-go-%d", i+1))
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("the README's Go block %d does not compile:\n%s\n--- as main.go\n%s", i+1, out, src)
		}
		t.Fatal(err)
	}
	return bin, want
}
