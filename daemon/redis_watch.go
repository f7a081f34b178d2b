package daemon

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/node"
)

// DefaultRedisWatchInterval is how often flaked serve re-runs the checks of
// what can change on a running Redis (doctor.RunLive: CONFIG SET
// maxmemory-policy, ACL SETUSER, persistence settings). The writing
// scripts refuse at once whatever the interval (guard.lua); the watch is
// what says so in the log, the metric and INFO.
const DefaultRedisWatchInterval = 10 * time.Second

// redisWatch re-runs doctor.RunLive every interval on the clock and keeps
// which checks are unsafe now: an error log when one becomes unsafe, an
// info log when it is fixed, the gauge flaked_redis_unsafe{check} and the
// INFO field redis_unsafe.
type redisWatch struct {
	t        doctor.Target
	clock    clock.Clock
	interval time.Duration
	log      zerolog.Logger

	mu      sync.Mutex
	unsafe  map[string]doctor.Result // by check
	timer   clock.Timer
	stopped bool
	runs    int
}

// unsafeGauged are the checks the gauge always exports (0 or 1): those
// guard.lua's refusals name.
var unsafeGauged = []string{contract.UnsafeIdentity, contract.UnsafeEviction}

func newRedisWatch(t doctor.Target, clk clock.Clock, interval time.Duration, log zerolog.Logger) *redisWatch {
	return &redisWatch{t: t, clock: clk, interval: interval, log: log, unsafe: map[string]doctor.Result{}}
}

// start schedules the first run an interval from now.
func (w *redisWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = w.clock.AfterFunc(w.interval, w.tick)
}

func (w *redisWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *redisWatch) tick() {
	ctx, cancel := context.WithTimeout(context.Background(), min(w.interval, doctor.CheckTimeout))
	defer cancel()
	w.update(doctor.RunLive(ctx, w.t))
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.timer = w.clock.AfterFunc(w.interval, w.tick)
	}
}

// update records one run's results and logs the changes.
func (w *redisWatch) update(rs []doctor.Result) {
	now := map[string]doctor.Result{}
	for _, r := range rs {
		if r.Status == doctor.Unsafe {
			if _, seen := now[r.Check]; !seen {
				now[r.Check] = r
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs++
	for check, r := range now {
		if _, was := w.unsafe[check]; !was {
			w.log.Error().Str("check", check).Str("server", r.Server).Str("fix", r.Fix).
				Msg("the fleet's Redis became unsafe: the writing scripts refuse to grant until it is fixed: " + r.Detail)
		}
	}
	for check := range w.unsafe {
		if _, still := now[check]; !still {
			w.log.Info().Str("check", check).Msg("the fleet's Redis is safe again: granting resumes")
		}
	}
	w.unsafe = now
}

// checks names the unsafe checks, sorted.
func (w *redisWatch) checks() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.unsafe))
	for c := range w.unsafe {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Describe is unchecked: the labels are the checks that failed.
func (w *redisWatch) Describe(chan<- *prometheus.Desc) {}

var unsafeDesc = prometheus.NewDesc("flaked_redis_unsafe",
	"1 while a check of the fleet's Redis fails (flaked doctor): the writing scripts refuse to grant", []string{"check"}, nil)

// Collect exports flaked_redis_unsafe{check}.
func (w *redisWatch) Collect(ch chan<- prometheus.Metric) {
	bad := w.checks()
	labels := slices.Clone(unsafeGauged)
	for _, c := range bad {
		if !slices.Contains(labels, c) {
			labels = append(labels, c)
		}
	}
	for _, c := range labels {
		v := 0.0
		if slices.Contains(bad, c) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(unsafeDesc, prometheus.GaugeValue, v, c)
	}
}

// watchedNode is the node as the server sees it, its INFO with the field
// redis_unsafe: the checks failing now, comma separated, "" for none.
type watchedNode struct {
	*node.Node
	w *redisWatch
}

func (g watchedNode) Info() [][2]string {
	return append(g.Node.Info(), [2]string{"redis_unsafe", strings.Join(g.w.checks(), ",")})
}

// standaloneStore exports flaked_redis_unsafe{check} at 0 for a standalone
// node: its embedded store is never an unsafe Redis, and with the series
// present every node looks alike to dashboards and alert rules.
type standaloneStore struct{}

func (standaloneStore) Describe(chan<- *prometheus.Desc) {}

func (standaloneStore) Collect(ch chan<- prometheus.Metric) {
	for _, c := range unsafeGauged {
		ch <- prometheus.MustNewConstMetric(unsafeDesc, prometheus.GaugeValue, 0, c)
	}
}
