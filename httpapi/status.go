package httpapi

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/contract"
)

//go:embed status.html
var statusHTML string

// statusTmpl is parsed once, at start: a template that does not parse
// fails every test of the package, not a page load.
var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"ms":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"msPtr": fmtTimePtr,
	"age":   fmtAgeMs,
	"count": func(m map[audit.State]int, s string) int { return m[audit.State(s)] },
}).Parse(statusHTML))

// Limits of the page: a large fleet's table is cut (flaked audit lists
// all of it), and the events are the last ones of this process.
const (
	maxMachineRows = 500
	maxEvents      = 20
	// recentLoss is how long a possible data loss is named, as in flaked
	// audit's table.
	recentLoss = 24 * time.Hour
)

// statusData is what the page shows.
type statusData struct {
	Generated   time.Time
	Mode        string
	Ready       bool
	Reason      string // why not ready
	Configured  string
	ModeReason  string
	MachineIDs  string
	Namespace   string
	Layout      string
	Headroom    string   // reservation headroom, "" when not in flake mode
	Grants      []string // what the last grants waited for, per kind (grantText)
	Info        [][2]string
	Decode      string // the ID asked for, "" when none
	Decoded     *parseBody
	DecodeError string

	Standalone bool
	FleetShown bool // Options.Fleet is set
	FleetError string
	Report     *audit.Report
	DataLoss   *audit.DataLoss // the report's, within recentLoss
	Machines   []audit.Machine // at most maxMachineRows
	MoreRows   int
	Events     []eventRow
}

type eventRow struct {
	Time      time.Time
	Type      string
	MachineID string
	Details   string
}

func (a *api) statusPage(w http.ResponseWriter, r *http.Request) {
	g := a.o.Generator
	d := statusData{Generated: a.o.Now(), Mode: g.Mode().String(), Ready: g.Ready(), Layout: g.Layout().String(), Info: g.Info()}
	info := map[string]string{}
	for _, kv := range d.Info {
		info[kv[0]] = kv[1]
	}
	d.Standalone = info["standalone"] == "yes"
	d.Configured, d.ModeReason, d.MachineIDs, d.Namespace = info["mode_configured"], info["mode_reason"], info["machine_ids"], info["namespace"]
	if v, ok := info["reservation_headroom_ms"]; ok {
		d.Headroom = v + " ms"
	}
	for _, kind := range []string{"lease", "counter"} {
		if t := grantText(kind, info); t != "" {
			d.Grants = append(d.Grants, t)
		}
	}
	if !d.Ready {
		d.Reason = notReadyReason(g)
	}
	if q := r.URL.Query().Get("decode"); q != "" {
		d.Decode = q
		if p, err := decode(g.Layout(), q); err != nil {
			d.DecodeError = err.Error()
		} else {
			d.Decoded = &p
		}
	}
	if a.o.Fleet != nil {
		d.FleetShown = true
		snap, err := a.fleet(r.Context())
		if err != nil {
			d.FleetError = err.Error()
		} else {
			d.Report = audit.Build(snap)
			if l := d.Report.DataLoss; l != nil && l.At.After(d.Report.Now.Add(-recentLoss)) {
				d.DataLoss = l
			}
			d.Machines = d.Report.Machines
			if len(d.Machines) > maxMachineRows {
				d.MoreRows = len(d.Machines) - maxMachineRows
				d.Machines = d.Machines[:maxMachineRows]
			}
			d.Events = a.ownEvents(snap, d.MachineIDs)
		}
	}
	// Rendered whole before anything is sent: a template error is a 500
	// with the error, never half a page.
	var b bytes.Buffer
	if err := statusTmpl.Execute(&b, d); err != nil {
		a.o.Logger.Error().Err(err).Msg("status page")
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	_, _ = w.Write(b.Bytes())
}

// fleet reads the registry, at most once per fleetCacheFor.
func (a *api) fleet(ctx context.Context) (*audit.Snapshot, error) {
	a.fleetMu.Lock()
	defer a.fleetMu.Unlock()
	if now := time.Now(); a.fleetAt.IsZero() || now.Sub(a.fleetAt) >= fleetCacheFor {
		ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
		defer cancel()
		a.fleetSnap, a.fleetErr = a.o.Fleet(ctx)
		if a.fleetErr != nil {
			a.fleetErr = fmt.Errorf("reading the registry: %w", a.fleetErr)
		}
		a.fleetAt = now
	}
	return a.fleetSnap, a.fleetErr
}

// ownEvents are the last events of this process: those its owner data
// wrote (host and pid) and those about the machine IDs it holds now,
// newest first.
func (a *api) ownEvents(s *audit.Snapshot, machineIDs string) []eventRow {
	held := map[int]bool{}
	for _, f := range strings.Split(machineIDs, ",") {
		if id, err := strconv.Atoi(f); err == nil {
			held[id] = true
		}
	}
	var out []eventRow
	for i := len(s.Events) - 1; i >= 0 && len(out) < maxEvents; i-- {
		e := s.Events[i]
		o := e.Owner()
		if !(o.Host == a.o.Host && o.PID == a.o.PID) && !held[e.MachineID] {
			continue
		}
		row := eventRow{Time: e.At(), Type: e.Type, MachineID: "-"}
		if e.MachineID >= 0 {
			row.MachineID = strconv.Itoa(e.MachineID)
		}
		var det []string
		for j := 0; j+1 < len(e.Fields); j += 2 {
			if k := e.Fields[j]; e.Fields[j+1] != "" && !slices.Contains(hiddenFields, k) {
				det = append(det, k+"="+e.Fields[j+1])
			}
		}
		row.Details = strings.Join(det, " ")
		out = append(out, row)
	}
	return out
}

// hiddenFields are event fields the page leaves out: who wrote it (the
// page is this process's) and whole owner tokens, which are credentials.
var hiddenFields = []string{contract.FieldType, contract.FieldMachineID, contract.FieldHost, contract.FieldPID, contract.FieldAddr, "version",
	contract.FieldToken, contract.FieldPrevToken, contract.FieldHolder, contract.FieldFenced, contract.OwnerFromToken, contract.FieldAtMs}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func fmtAgeMs(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// grantText says, from a node's INFO, what its last grant of a kind
// (lease: claims and renewals; counter: segments) was safe by, or why it
// was refused: "" when the node has made none of that kind.
func grantText(kind string, info map[string]string) string {
	p := kind + "_grant_"
	switch {
	case info[p+"refused"] == "1":
		return kind + ": refused: " + info[p+"refused_why"]
	case info[p+"safe_by"] == "sentinels":
		return kind + ": used: every Sentinel reported the master up (the replicas were not waited for)"
	case info[p+"safe_by"] == "replicas":
		if info[p+"replicas_needed"] == "0" {
			return kind + ": used: no replica to wait for"
		}
		return fmt.Sprintf("%s: used: %s of %s replicas acknowledged (the master lists %s)", kind,
			info[p+"replicas_acked"], info[p+"replicas_needed"], cmp.Or(info[p+"replicas_listed"], "none"))
	}
	return ""
}
