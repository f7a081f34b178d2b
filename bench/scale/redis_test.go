package scale

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/redistest"
)

// need skips unless FLAKED_SCALE is set: these are measurements, minutes
// long, not checks for every go test.
func need(t *testing.T) {
	t.Helper()
	if os.Getenv("FLAKED_SCALE") == "" {
		t.Skip("a scale measurement: set FLAKED_SCALE=1 (scripts/bench scale)")
	}
}

// rounds is FLAKED_SCALE_ROUNDS, default 3.
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("FLAKED_SCALE_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// redisStats is what INFO says about the server's work and memory.
type redisStats struct {
	cpu      float64 // used_cpu_sys + used_cpu_user, seconds
	commands int64   // total_commands_processed
	memory   int64   // used_memory, bytes
	calls    map[string]int64
}

func stats(t testing.TB, rdb *redis.Client) redisStats {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "stats", "memory", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	s := redisStats{calls: map[string]int64{}}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case k == "total_commands_processed":
			s.commands, _ = strconv.ParseInt(v, 10, 64)
		case k == "used_memory":
			s.memory, _ = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(k, "cmdstat_"):
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			s.calls[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(calls, 10, 64)
		}
	}
	return s
}

// callsSince is the commands by name since before, most first, as
// "evalsha 1200, xadd 30".
func callsSince(before, after redisStats) string {
	type kv struct {
		k string
		v int64
	}
	var out []kv
	for k, v := range after.calls {
		if d := v - before.calls[k]; d > 0 && k != "info" {
			out = append(out, kv{k, d})
		}
	}
	slices.SortFunc(out, func(a, b kv) int { return int(b.v - a.v) })
	var parts []string
	for _, e := range out {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}

// pct is the q-quantile of sorted durations.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// ms is d in milliseconds with two decimals.
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

// TestMain removes the flaked binary daemontest built for the run.
func TestMain(m *testing.M) { os.Exit(daemontest.Run(m)) }

// load is the host's load average, to print beside the figures.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// nodeClient is one node's own go-redis client. Its buffers are 4 KiB,
// not go-redis's 32 KiB each way: a thousand nodes in this one process
// would otherwise allocate 64 MB at the gate, and the benchmark would
// measure its own garbage collector. A node's calls are small. Like the
// clients redisurl.NewClient makes for flaked serve, it sends no CLIENT
// SETINFO on connecting (two more commands per connection otherwise).
func nodeClient(srv *redistest.Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadBufferSize: 4096, WriteBufferSize: 4096, DisableIdentity: true})
}

// agedRegistry starts a redis-server that takes 20,000 clients with a
// registry in it whose loss floor is behind, as in a fleet whose Redis
// has run for a while (redistest.InitRegistry): flaked init's floor, a
// horizon + 1 s, would be measured otherwise.
func agedRegistry(t *testing.T) (*redistest.Server, *redis.Client) {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"maxclients 20000"}})
	admin := srv.Client(t)
	if err := redistest.InitRegistry(context.Background(), admin, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	return srv, admin
}
