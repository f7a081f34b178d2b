package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// docs/protocol.md's snippets of "Using flaked from your language" are these
// files, whole. Each runnable one prints the ID, how many NEXTIDS gave,
// the machine ID from PARSE, and, for some, a last check ("True"/"true").
var examples = []string{
	"examples/python/nextid.py",
	"examples/python/nextblock.py",
	"node/examples/ioredis.mjs",
	"node/examples/nextblock.mjs",
	"node/examples/node-redis.mjs",
	"node/examples/js-safe.mjs",
	"examples/go/goredis/main.go",
	"examples/go/rueidis/main.go",
	"examples/java/NextId.java", // not run: no Java Redis client on this machine
}

// TestDocs_ContainsEachExample keeps docs/protocol.md true: each example file
// appears in it verbatim.
func TestDocs_ContainsEachExample(t *testing.T) {
	page, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range examples {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), "\n"+string(b)+"```\n") {
			t.Errorf("docs/protocol.md does not contain %s verbatim as a fenced block (copy the file into it)", path)
		}
	}
}

// TestExamples_Python runs the redis-py snippet against a daemon.
func TestExamples_Python(t *testing.T) {
	requireTool(t, "redis-py for "+python, "apt-get install python3-redis", havePythonRedis())
	d := newDaemon(t, "plain")
	d.mustStart()
	checkExample(t, d, python, "examples/python/nextid.py")
	checkExample(t, d, python, "examples/python/nextblock.py")
	// The block decoder's other branch: a node interleaving machine IDs.
	multi := newDaemon(t, "three-machine-ids", "--machine-ids", "3")
	multi.mustStart()
	checkExample(t, multi, python, "examples/python/nextblock.py")
}

// TestExamples_Node runs the ioredis and node-redis snippets against a
// default-layout daemon, and the JS-safe one against a JS-safe daemon;
// the block decoder also against a node interleaving machine IDs.
func TestExamples_Node(t *testing.T) {
	requireNode(t)
	d := newDaemon(t, "plain")
	d.mustStart()
	checkExample(t, d, "node", "node/examples/ioredis.mjs")
	checkExample(t, d, "node", "node/examples/node-redis.mjs")
	checkExample(t, d, "node", "node/examples/nextblock.mjs")
	multi := newDaemon(t, "three-machine-ids", "--machine-ids", "3")
	multi.mustStart()
	checkExample(t, multi, "node", "node/examples/nextblock.mjs")
	safe := newDaemon(t, "js-safe", jsSafeLayout...)
	safe.mustStart()
	checkExample(t, safe, "node", "node/examples/js-safe.mjs")
}

// TestExamples_Go builds and runs the go-redis and rueidis snippets.
func TestExamples_Go(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "./examples/go/goredis", "./examples/go/rueidis")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := newDaemon(t, "plain")
	d.mustStart()
	checkExample(t, d, filepath.Join(dir, "goredis"))
	checkExample(t, d, filepath.Join(dir, "rueidis"))
}

// checkExample runs one snippet with FLAKED_URL set to d, then checks what
// it printed: an ID that PARSE's parts make again, 100 IDs, the machine ID
// PARSE gave, and a last "true" if it printed a fourth field.
func checkExample(t *testing.T, d *daemon, name string, args ...string) {
	t.Helper()
	what := strings.Join(append([]string{name}, args...), " ")
	out := runScript(t, time.Minute, []string{"FLAKED_URL=redis://" + d.addr()}, name, args...)
	f := strings.Fields(out)
	if len(f) < 3 || len(f) > 4 {
		t.Fatalf("%s printed %q: want the ID, 100, the machine ID [, true]", what, out)
	}
	parts, l := parseWithGoRedis(t, d, f[0])
	if err := l.exact(f[0], parts.tick, parts.seq, parts.machine, parts.mode); err != nil {
		t.Errorf("%s: %v", what, err)
	}
	if f[1] != "100" || f[2] != f2s(parts.machine) || (len(f) == 4 && !strings.EqualFold(f[3], "true")) {
		t.Errorf("%s printed %q: want %s 100 %d [true]", what, out, f[0], parts.machine)
	}
}

type parsed struct {
	tick, seq, machine int64
	mode               string
}

// parseWithGoRedis asks d for PARSE id and INFO flaked over go-redis.
func parseWithGoRedis(t *testing.T, d *daemon, id string) (parsed, daemonLayout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: d.addr()})
	defer c.Close()
	info, err := c.Info(ctx, "flaked").Result()
	if err != nil {
		t.Fatal(err)
	}
	l, err := layoutFromInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "PARSE", id).Slice()
	if err != nil || len(v) != 5 {
		t.Fatalf("PARSE %s: %v %v", id, v, err)
	}
	p := parsed{mode: toString(v[4])}
	p.tick, _ = v[1].(int64)
	p.seq, _ = v[2].(int64)
	p.machine, _ = v[3].(int64)
	return p, l
}
