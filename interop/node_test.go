package interop

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// jsSafeLayout makes every ID < 2^53, an exact JavaScript Number: 37 bits
// of 10 ms ticks (43 years), 256 IDs per tick, 255 machine IDs.
var jsSafeLayout = []string{"--bits-id", "53", "--bits-sequence", "8", "--bits-machine", "8"}

// requireNode skips (or under CI fails) without node or without
// node/node_modules (npm ci in interop/node, as scripts/interop does).
func requireNode(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("node")
	requireTool(t, "node", "apt-get install nodejs npm", err == nil)
	_, err = os.Stat("node/node_modules/ioredis")
	requireTool(t, "interop/node/node_modules", "run npm ci in interop/node", err == nil)
}

// runNode runs node/test_clients.mjs with env and checks that tests ran
// (the script skips the group whose addresses are not set).
func runNode(t *testing.T, env []string) {
	t.Helper()
	out := runScript(t, 4*time.Minute, env, "node", "--test-reporter=tap", "node/test_clients.mjs")
	m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || !strings.Contains(out, "\n# fail 0") {
		t.Fatalf("node ran no test, or one failed:\n%s", out)
	}
}

// TestNode_Clients runs ioredis and node-redis with their defaults over
// plain TCP, AUTH and TLS against default-layout daemons.
func TestNode_Clients(t *testing.T) {
	requireNode(t)
	f := startFlavours(t)
	runNode(t, f.env(serveControl(t, f.all()...)))
}

// TestNode_JSSafeFleet has both clients take 100,000 IDs each from three
// daemons with the JS-safe layout on one redis-server, as plain Numbers.
func TestNode_JSSafeFleet(t *testing.T) {
	requireNode(t)
	fleet := startFleet(t, 3, jsSafeLayout...)
	urls := make([]string, len(fleet))
	for i, d := range fleet {
		urls[i] = "redis://" + d.addr()
	}
	runNode(t, []string{"FLAKED_FLEET_URLS=" + strings.Join(urls, ",")})
}
