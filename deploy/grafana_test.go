package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

const dashboardFile = "grafana/flaked.json"

// dashboard is the part of Grafana's dashboard model flaked.json uses,
// decoded with unknown fields refused, so a misspelt key (datasorce,
// tagrets) fails instead of being dropped by Grafana without a word.
type dashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	Description   string         `json:"description"`
	Tags          []string       `json:"tags"`
	Timezone      string         `json:"timezone"`
	Editable      bool           `json:"editable"`
	SchemaVersion int            `json:"schemaVersion"`
	Version       int            `json:"version"`
	Refresh       string         `json:"refresh"`
	Time          map[string]any `json:"time"`
	GraphTooltip  int            `json:"graphTooltip"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Annotations map[string]any `json:"annotations"`
	Panels      []panel        `json:"panels"`
}

type variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Datasource *datasource    `json:"datasource"`
	Query      any            `json:"query"` // a string, or {query, refId}
	Definition string         `json:"definition"`
	Refresh    int            `json:"refresh"`
	IncludeAll bool           `json:"includeAll"`
	Multi      bool           `json:"multi"`
	AllValue   string         `json:"allValue"`
	Current    map[string]any `json:"current"`
	Hide       int            `json:"hide"`
	Regex      string         `json:"regex"`
	Sort       int            `json:"sort"`
	Options    []any          `json:"options"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Collapsed   bool                     `json:"collapsed"`
	Datasource  *datasource              `json:"datasource"`
	GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
	Targets     []target                 `json:"targets"`
	FieldConfig map[string]any           `json:"fieldConfig"`
	Options     map[string]any           `json:"options"`
	Panels      []panel                  `json:"panels"` // a collapsed row's
}

type target struct {
	RefID        string      `json:"refId"`
	Datasource   *datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
}

func loadDashboard(t *testing.T, b []byte) dashboard {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels is the dashboard's panels, those inside collapsed rows too.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// The dashboard is one Grafana can load: a uid and title, a Prometheus
// data-source variable every panel and query uses, unique panel ids,
// panels on the 24-column grid, and queries with unique refIds.
func TestGrafana_DashboardIsValid(t *testing.T) {
	d := loadDashboard(t, readFile(t, dashboardFile))
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 30 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and a current schema", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		if _, dup := vars[v.Name]; dup {
			t.Errorf("variable %q twice", v.Name)
		}
		vars[v.Name] = v
	}
	dsVar := ""
	for _, v := range vars {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("no data-source variable of type prometheus: the dashboard would be bound to one Grafana's data source")
	}
	checkDS := func(where string, ds *datasource) {
		if ds == nil || ds.Type != "prometheus" || ds.UID != dsVar {
			t.Errorf("%s: datasource %+v; want {prometheus %s}", where, ds, dsVar)
		}
	}
	for _, v := range vars {
		if v.Type == "query" {
			checkDS("variable "+v.Name, v.Datasource)
		}
	}
	ids := map[int]string{}
	panels := d.allPanels()
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	known := []string{"row", "stat", "timeseries", "state-timeline", "gauge", "bargauge", "table", "text"}
	for _, p := range panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 {
			t.Errorf("%s: want an id > 0", where)
		}
		if other, dup := ids[p.ID]; dup {
			t.Errorf("%s: id also of panel %q", where, other)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || !slices.Contains(known, p.Type) {
			t.Errorf("%s: type %q; want a title and one of %v", where, p.Type, known)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v off the 24-column grid", where, g)
		}
		if p.Type == "row" || p.Type == "text" {
			if len(p.Targets) > 0 {
				t.Errorf("%s: a %s has no queries", where, p.Type)
			}
			continue
		}
		checkDS(where, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q empty or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
			checkDS(where+" query "+tg.RefID, tg.Datasource)
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s query %s: no expr", where, tg.RefID)
			}
		}
	}
}

// grafanaRanges are Grafana's range variables, which PromQL cannot parse;
// any other $ outside a string fails the parse.
var grafanaRanges = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

// labelValues is Grafana's label_values([selector,] label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+?)\s*,\s*)?\w+\s*\)\s*$`)

// queryMetrics returns each PromQL query of the dashboard (panels and
// variables) with the metric names it selects, read by Prometheus's own
// parser.
func queryMetrics(t *testing.T, d dashboard) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(where, expr string) {
		e, err := parser.ParseExpr(grafanaRanges.ReplaceAllString(expr, "5m"))
		if err != nil {
			t.Errorf("%s: %q: not PromQL: %v", where, expr, err)
			return
		}
		var names []string
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName {
					if m.Type != labels.MatchEqual {
						t.Errorf("%s: %q: a __name__ %s matcher cannot be checked; name the metric", where, expr, m.Type)
					}
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("%s: %q: a selector without a metric name", where, expr)
			}
			names = append(names, name)
			return nil
		})
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		out[where+": "+expr] = names
	}
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			add(fmt.Sprintf("panel %d %q query %s", p.ID, p.Title, tg.RefID), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil || m[1] == "" {
			t.Errorf("variable %s: query %q: want label_values(<metric>, <label>)", v.Name, q)
			continue
		}
		add("variable "+v.Name, m[1])
	}
	return out
}

// unknownMetrics lists, sorted, the queries naming a metric not in
// exported.
func unknownMetrics(queries map[string][]string, exported map[string]bool) []string {
	var bad []string
	for q, names := range queries {
		for _, n := range names {
			if !exported[n] {
				bad = append(bad, n+" in "+q)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// exportedMetrics starts the built daemon standalone in flake mode and in
// counter mode (the node's flaked_node_* gauges differ by mode: lease and
// reservation figures in flake, segment figures in counter) and returns
// the sample names /metrics serves in either.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	flags := serveFlags(t)
	names := map[string]bool{}
	for _, mode := range []string{"flake", "counter"} {
		r := startServe(t, flags, serveConfig{args: []string{
			"--listen=127.0.0.1:7379", "--metrics-addr=127.0.0.1:9121", "--state-file=/state/" + mode, "--mode=" + mode}})
		code, body := r.get(t, "/metrics")
		if code != 200 {
			t.Fatalf("/metrics in %s mode: %d", mode, code)
		}
		n := 0
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				names[line[:i]] = true
				n++
			}
		}
		if n == 0 || !names["flaked_ready"] {
			t.Fatalf("/metrics in %s mode: no flaked samples read:\n%s", mode, body)
		}
		r.stop(t)
	}
	return names
}

// Every metric the dashboard's queries name is one the daemon exports:
// read from /metrics of the built binary, not from a list kept here.
func TestGrafana_QueriesNameExportedMetrics(t *testing.T) {
	d := loadDashboard(t, readFile(t, dashboardFile))
	queries := queryMetrics(t, d)
	if t.Failed() {
		t.FailNow()
	}
	exported := exportedMetrics(t)
	before := unknownMetrics(queries, exported)
	if len(before) > 0 {
		t.Errorf("the dashboard queries metrics the daemon does not export:\n%s", strings.Join(before, "\n"))
	}

	// The check has teeth: a query naming a metric the daemon lacks (a
	// typo, or one renamed in the daemon) is reported.
	d.Panels = append(d.Panels, panel{ID: 999, Title: "probe", Targets: []target{
		{RefID: "A", Expr: `sum(rate(flaked_ids_issud_total[$__rate_interval])) / on() group_left flaked_ready`}}})
	after := unknownMetrics(queryMetrics(t, d), exported)
	probe := slices.IndexFunc(after, func(s string) bool { return strings.HasPrefix(s, "flaked_ids_issud_total in panel 999") })
	if len(after) != len(before)+1 || probe < 0 {
		t.Errorf("a misspelt metric in a query: reported %q; want it, and only it, added", after)
	}

	// And it sees what the dashboard is about: the figures docs/operating.md
	// promises on it are queried.
	used := map[string]bool{}
	for _, names := range queries {
		for _, n := range names {
			used[n] = true
		}
	}
	for _, want := range []string{"flaked_ids_issued_total", "flaked_mode", "flaked_ready", "flaked_node_reservation_headroom_ms",
		"flaked_node_lease_renewals", "flaked_node_lease_renewal_failures", "flaked_node_nextid_waits", "flaked_connections"} {
		if !used[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
}
