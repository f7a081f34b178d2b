package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
)

// unsafeGauge reads flaked_redis_unsafe{check} from w.
func unsafeGauge(t *testing.T, w *redisWatch, check string) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	w.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "check" && l.GetValue() == check {
				return d.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no flaked_redis_unsafe{check=%q}", check)
	return 0
}

// Fault: maxmemory-policy set to allkeys-lru on a running Redis (CONFIG
// SET), then back. The watch, driven by a hand-moved clock, reports it at
// its next run (error log, gauge, INFO's checks) and clears it once fixed;
// the writing scripts refuse in between (tests/TestRedisEviction_*).
func TestRedisWatch_LivePolicyChange(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := context.Background()
	clock := clocktest.New(time.Now())
	var logs idtest.LogBuffer
	w := newRedisWatch(doctor.Target{Redis: rdb, AsNode: true}, clock, 10*time.Second, zerolog.New(&logs))
	w.start()
	defer w.stop()

	clock.Advance(10 * time.Second)
	if got := w.checks(); len(got) != 0 || unsafeGauge(t, w, "eviction") != 0 || unsafeGauge(t, w, "identity") != 0 {
		t.Fatalf("healthy Redis: unsafe %v\n%s", got, logs.String())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second)
	if got := w.checks(); len(got) != 0 {
		t.Fatalf("before the next run: unsafe %v", got)
	}
	clock.Advance(time.Second)
	if got := w.checks(); strings.Join(got, ",") != "eviction" || unsafeGauge(t, w, "eviction") != 1 {
		t.Fatalf("allkeys-lru: unsafe %v, want [eviction]\n%s", got, logs.String())
	}
	if l := logs.String(); !strings.Contains(l, `"level":"error"`) || !strings.Contains(l, "allkeys-lru") || !strings.Contains(l, "noeviction") {
		t.Fatalf("no error log naming the policy and the fix:\n%s", l)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if got := w.checks(); len(got) != 0 || unsafeGauge(t, w, "eviction") != 0 {
		t.Fatalf("back to noeviction: unsafe %v", got)
	}
	if !strings.Contains(logs.String(), "safe again") {
		t.Fatalf("no log of the fix:\n%s", logs.String())
	}
}
