package httpapi

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// route is one path of the API: its ServeMux pattern (OpenAPI's path
// syntax too), the one method it answers, the name its requests are
// counted under, and its handler.
type route struct {
	pattern string
	method  string
	name    string
	handle  func(a *api, w http.ResponseWriter, r *http.Request)
}

// routes is the API; openapi.json describes exactly these (a test checks
// both ways). GET only: every GET of an ID is a new ID, so no HEAD (it
// would use IDs up for nothing) and never cached.
//
// GET /v1/seq/{tag}?n=N (named sequences, NEXTSEQ) goes here, beside
// /v1/ids, with its path in openapi.json.
var routes = []route{
	{"/v1/id", http.MethodGet, "id", (*api).id},
	{"/v1/ids", http.MethodGet, "ids", (*api).ids},
	{"/v1/parse/{id}", http.MethodGet, "parse", (*api).parse},
	{"/v1/health", http.MethodGet, "health", (*api).health},
	{"/v1/openapi.json", http.MethodGet, "openapi", (*api).openAPI},
}

//go:embed openapi.json
var openAPIDoc []byte

func (a *api) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// idBody is /v1/id's answer.
type idBody struct {
	ID string `json:"id"`
}

// idsBody is /v1/ids's answer.
type idsBody struct {
	IDs []string `json:"ids"`
}

func (a *api) id(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.issueContext(r)
	defer cancel()
	id, err := a.o.Generator.NextID(ctx)
	if err != nil {
		a.issueError(w, err)
		return
	}
	a.issued.Inc()
	writeJSON(w, http.StatusOK, idBody{strconv.FormatUint(id, 10)})
}

func (a *api) ids(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n < 1 || n > a.o.MaxBatch || len(q["n"]) != 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("n=%q: want one n, an integer in 1..%d", q.Get("n"), a.o.MaxBatch))
		return
	}
	ctx, cancel := a.issueContext(r)
	defer cancel()
	dst := make([]uint64, n)
	got, err := a.o.Generator.NextIDs(ctx, dst)
	// IDs issued before an error are handed out, never returned to the
	// generator; they are lost, not reused. The client gets the error.
	a.issued.Add(float64(got))
	if err != nil {
		a.issueError(w, err)
		return
	}
	out := idsBody{IDs: make([]string, n)}
	for i, id := range dst {
		out.IDs[i] = strconv.FormatUint(id, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) issueContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), a.o.Timeout)
}

// issueError: the generator could not issue safely (not ready, Redis
// away, the clock behind); its error names the cause.
func (a *api) issueError(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, err.Error())
}

// parseBody is /v1/parse/{id}'s answer: PARSE's fields by name. Region is
// there only in a layout with regions.
type parseBody struct {
	ID        string `json:"id"`
	Time      string `json:"time"`
	Tick      int64  `json:"tick"`
	Sequence  int    `json:"sequence"`
	MachineID int    `json:"machine_id"`
	Mode      string `json:"mode"`
	Region    *int   `json:"region,omitempty"`
}

func (a *api) parse(w http.ResponseWriter, r *http.Request) {
	p, err := decode(a.o.Generator.Layout(), r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// rfc3339Millis is RFC 3339 with milliseconds, as PARSE prints times.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// decode reads an ID as PARSE does (decimal, or 13 Crockford base32
// characters) and decomposes it under the fleet's layout.
func decode(l flake.Layout, s string) (parseBody, error) {
	s = strings.TrimSpace(s)
	var (
		id  uint64
		err error
	)
	if len(s) == flake.Base32Len && strings.Trim(s, "0123456789") != "" {
		id, err = flake.ParseBase32(s)
	} else {
		id, err = flake.ParseID(s)
	}
	if err != nil {
		if len(s) > 64 { // no ID is this long; do not echo all of it back
			s = fmt.Sprintf("%s... (%d bytes)", s[:32], len(s))
		}
		return parseBody{}, fmt.Errorf("%w %q: want a decimal integer in 0..%d or %d Crockford base32 characters",
			flake.ErrInvalidID, s, uint64(flake.MaxID), flake.Base32Len)
	}
	if err := l.CheckID(id); err != nil {
		return parseBody{}, err
	}
	p := l.Decompose(id)
	mode := node.ModeFlake
	if l.IsCounterMachineID(p.MachineID) {
		mode = node.ModeCounter
	}
	out := parseBody{ID: strconv.FormatUint(id, 10), Time: p.Time.UTC().Format(rfc3339Millis), Tick: p.Tick,
		Sequence: p.Sequence, MachineID: p.MachineID, Mode: mode.String()}
	if l.BitsRegion > 0 {
		region := p.Region
		out.Region = &region
	}
	return out, nil
}

// healthBody is /v1/health's answer; Reason says why not ready.
type healthBody struct {
	Status string `json:"status"` // "ready" or "not ready"
	Ready  bool   `json:"ready"`
	Mode   string `json:"mode"`
	Reason string `json:"reason,omitempty"`
}

func (a *api) health(w http.ResponseWriter, r *http.Request) {
	g := a.o.Generator
	if g.Ready() {
		writeJSON(w, http.StatusOK, healthBody{Status: "ready", Ready: true, Mode: g.Mode().String()})
		return
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "not ready", Mode: g.Mode().String(), Reason: notReadyReason(g)})
}

// notReadyReason names why the generator cannot issue: the last error of
// whatever failed (the claim, the lease, the counter, the state file),
// else the reason of the current mode.
func notReadyReason(g node.Generator) string {
	info := map[string]string{}
	for _, kv := range g.Info() {
		info[kv[0]] = kv[1]
	}
	for _, k := range []string{"claim_last_error", "lease_last_error", "counter_last_error", "state_file_error"} {
		if v := info[k]; v != "" {
			return fmt.Sprintf("the generator cannot issue IDs now (mode %s): %s: %s", g.Mode(), k, v)
		}
	}
	reason := "the generator cannot issue IDs now (mode " + g.Mode().String() + ")"
	if v := info["mode_reason"]; v != "" {
		reason += ": " + v
	}
	return reason
}
