package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/flaked/flaked/internal/redistest"
)

const (
	rulesFile     = "prometheus/alerts.yml"
	rulesTestFile = "prometheus/alerts_test.yml"
)

// ruleFile is a Prometheus rule file as alerts.yml uses it, decoded with
// unknown fields refused.
type ruleFile struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadRules(t *testing.T, b []byte) []alertRule {
	t.Helper()
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// wantAlerts are the conditions the rules must cover (docs/operating.md, Deploying).
// FlakedRedisUnsafe is flaked serve's watch of the doctor's live checks.
var wantAlerts = []string{"FlakedNotReady", "FlakedLeaseLost", "FlakedLeaseFenced", "FlakedCloneDetected", "FlakedDataLossDetected",
	"FlakedReservationHeadroomLow", "FlakedCounterModeEngaged", "FlakedTimeBitsRunningOut", "FlakedRedisUnsafe"}

// promtool returns Debian's promtool, or skips (fails under CI=true).
func needBin(t *testing.T, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		msg := fmt.Sprintf("%s not found in PATH: install the Debian package %s (scripts/test does as root)", bin, pkg)
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s (CI=true: this test fails instead of skipping)", msg)
		}
		t.Skip(msg)
	}
	return p
}

func runPromtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, needBin(t, "promtool", "prometheus"), args...).CombinedOutput()
	return string(out), err
}

// promtool check rules accepts the rules, and every alert docs/operating.md
// promises is there with a severity, a summary and a description.
func TestAlerts_PromtoolCheckRules(t *testing.T) {
	if out, err := runPromtool(t, "check", "rules", rulesFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	rules := loadRules(t, readFile(t, rulesFile))
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: want a summary and a description", r.Alert)
		}
	}
	for _, w := range wantAlerts {
		if !slices.Contains(names, w) {
			t.Errorf("no alert %s in %s", w, rulesFile)
		}
	}
}

// The unit tests of alerts_test.yml pass; and they have teeth: the rules
// with the counter-mode alert's exception dropped (a node started with
// --mode=counter would page) or the lease-lost window widened fail them.
func TestAlerts_PromtoolTestRules(t *testing.T) {
	if out, err := runPromtool(t, "test", "rules", rulesTestFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
	rules, tests := string(readFile(t, rulesFile)), readFile(t, rulesTestFile)
	for name, mutate := range map[string][2]string{
		"counter mode without the --mode=counter exception": {"\n          unless on(instance, job) flaked_mode_configured{mode=\"counter\"} == 1", ""},
		"lease lost window 1h":                              {"increase(flaked_node_leases_lost_total[10m])", "increase(flaked_node_leases_lost_total[1h])"},
		"headroom without the reserve errors":               {"\n          and increase(flaked_node_reserve_errors[5m]) > 0", ""},
	} {
		if !strings.Contains(rules, mutate[0]) {
			t.Fatalf("%s: %q not in %s", name, mutate[0], rulesFile)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(strings.Replace(rules, mutate[0], mutate[1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "alerts_test.yml"), tests, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := runPromtool(t, "test", "rules", filepath.Join(dir, "alerts_test.yml")); err == nil {
			t.Errorf("rules with %s: the unit tests passed\n%s", name, out)
		}
	}
}

// Every metric the rules name is one the daemon exports (read from the
// built binary's /metrics, flake and counter mode).
func TestAlerts_RulesNameExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	for _, r := range loadRules(t, readFile(t, rulesFile)) {
		e, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Errorf("%s: %q: %v", r.Alert, r.Expr, err)
			continue
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && !exported[vs.Name] {
				t.Errorf("%s: %s is not a metric of the daemon", r.Alert, vs.Name)
			}
			return nil
		})
	}
}

// A real Prometheus (Debian's prometheus, on a free loopback port, a
// temporary config and storage) scrapes the built daemon with alerts.yml
// loaded: the target is up, a flaked metric is ingested, every rule is
// loaded, and an alert fires: the daemon runs a 53-bit layout whose time
// bits end in about 17 days (FlakedTimeBitsRunningOut, warning and
// critical, no `for`), and no other alert does.
func TestAlerts_RealPrometheusScrapesDaemon(t *testing.T) {
	bin := needBin(t, "prometheus", "prometheus")
	epoch := time.Now().Add(-480 * 24 * time.Hour).UTC().Truncate(time.Hour)
	r := startServe(t, serveFlags(t), serveConfig{args: []string{"--listen=127.0.0.1:7379", "--metrics-addr=127.0.0.1:9121",
		"--state-file=/state/node", "--bits-id=53", "--bits-sequence=8", "--bits-machine=13", "--epoch=" + epoch.Format(time.RFC3339)}})

	dir := t.TempDir()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: flaked
    static_configs:
      - targets: [%q]
`, rules, r.metricsAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	web := redistest.FreeAddr(t)
	var logs strings.Builder
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { // the process this test started, by its PID
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})

	api := func(path string, v any) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+web+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var env struct {
			Status string          `json:"status"`
			Data   json.RawMessage `json:"data"`
		}
		return resp.StatusCode == 200 && json.Unmarshal(b, &env) == nil && env.Status == "success" && json.Unmarshal(env.Data, v) == nil
	}
	// waitFor polls Prometheus's API until cond holds, for up to 60 s.
	waitFor := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			select {
			case <-done:
				t.Fatalf("prometheus exited while waiting for %s:\n%s", what, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60 s; last: %s\nprometheus log:\n%s", what, state, logs.String())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	waitFor("the daemon's target up", func() (bool, string) {
		var d struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
		ok := api("/api/v1/targets", &d)
		return ok && len(d.ActiveTargets) == 1 && d.ActiveTargets[0].Health == "up", fmt.Sprintf("%+v", d)
	})
	waitFor("flaked_ready ingested", func() (bool, string) {
		var d struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		ok := api("/api/v1/query?query="+url.QueryEscape(`flaked_ready{job="flaked"}`), &d)
		return ok && len(d.Result) == 1 && d.Result[0].Value[1] == "1", fmt.Sprintf("%+v", d)
	})
	var want []string
	for _, r := range loadRules(t, readFile(t, rulesFile)) {
		want = append(want, r.Alert)
	}
	sort.Strings(want)
	waitFor("every rule loaded", func() (bool, string) {
		var d struct {
			Groups []struct {
				File  string `json:"file"`
				Rules []struct {
					Name   string `json:"name"`
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		}
		var got []string
		healthy := true
		ok := api("/api/v1/rules?type=alert", &d)
		for _, g := range d.Groups {
			for _, r := range g.Rules {
				got = append(got, r.Name)
				healthy = healthy && r.Health != "err"
			}
		}
		sort.Strings(got)
		return ok && healthy && slices.Equal(got, want), fmt.Sprintf("%+v", d)
	})
	waitFor("FlakedTimeBitsRunningOut firing, warning and critical, and nothing else", func() (bool, string) {
		var d struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		ok := api("/api/v1/alerts", &d)
		var got []string
		for _, a := range d.Alerts {
			got = append(got, a.Labels["alertname"]+"/"+a.Labels["severity"]+"/"+a.State+"/"+a.Labels["job"])
		}
		sort.Strings(got)
		return ok && slices.Equal(got, []string{"FlakedTimeBitsRunningOut/critical/firing/flaked", "FlakedTimeBitsRunningOut/warning/firing/flaked"}),
			fmt.Sprintf("%q", got)
	})
}
