package httpapi

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// chromium runs Debian's headless Chromium with a profile of its own on
// url and the given mode flags (--dump-dom, --screenshot=...), and
// returns its standard output. Chromium's helper processes are in its
// process group, which is killed when the run ends or times out.
func chromium(t *testing.T, url string, mode ...string) string {
	t.Helper()
	bin := need(t, "chromium", "chromium")
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, mode...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

// section returns the inner HTML of the element with the given id ("" when
// there is none): enough for the page's flat tables.
func section(dom, tag, id string) (string, bool) {
	m := regexp.MustCompile(`(?s)<` + tag + ` [^>]*id="` + regexp.QuoteMeta(id) + `"[^>]*>(.*?)</` + tag + `>`).FindStringSubmatch(dom)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var rowRE = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)

// bodyRows returns the text of each row of a table's tbody, cells
// separated by " | ".
func bodyRows(table string) []string {
	_, body, _ := strings.Cut(table, "<tbody>")
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		cells := regexp.MustCompile(`(?s)<t[dh][^>]*>(.*?)</t[dh]>`).FindAllStringSubmatch(m[1], -1)
		var texts []string
		for _, c := range cells {
			texts = append(texts, strings.TrimSpace(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(c[1], "")))
		}
		out = append(out, strings.Join(texts, " | "))
	}
	return out
}

// pageWant is what a status page of a fleet node must show.
type pageWant struct {
	mode       string
	machineIDs []int
	owners     map[int]string // machine ID -> a part of its owner's text
	event      string         // an event type of this node's
}

// checkPage lists what is wrong with a rendered status page's DOM: every
// section there, the node's mode and machine IDs, a fleet row per machine
// ID with its owner, and this node's events.
func checkPage(dom string, w pageWant) []string {
	var bad []string
	for _, s := range [][2]string{{"table", "node"}, {"form", "decode-form"}, {"table", "fleet"}, {"table", "events"}, {"p", "fleet-summary"}} {
		if _, ok := section(dom, s[0], s[1]); !ok {
			bad = append(bad, fmt.Sprintf("no <%s id=%q>", s[0], s[1]))
		}
	}
	if e, ok := section(dom, "p", "fleet-error"); ok {
		bad = append(bad, "the fleet is not shown: "+e)
	}
	if m, _ := section(dom, "td", "mode"); !strings.HasPrefix(m, w.mode+" ") {
		bad = append(bad, fmt.Sprintf("mode cell %q, want %s", m, w.mode))
	}
	if r, _ := section(dom, "td", "ready"); !strings.Contains(r, ">ready<") {
		bad = append(bad, fmt.Sprintf("ready cell %q, want ready", r))
	}
	if m, _ := section(dom, "td", "machine-ids"); m != joinInts(w.machineIDs) {
		bad = append(bad, fmt.Sprintf("machine IDs cell %q, want %q", m, joinInts(w.machineIDs)))
	}
	if h, _ := section(dom, "td", "headroom"); !strings.HasSuffix(h, " ms") {
		bad = append(bad, fmt.Sprintf("headroom cell %q, want ms", h))
	}
	if g, _ := section(dom, "td", "grants"); !strings.Contains(g, "lease: used") {
		bad = append(bad, fmt.Sprintf("grants cell %q, want the lease's last grant used", g))
	}
	fleet, _ := section(dom, "table", "fleet")
	rows := bodyRows(fleet)
	for id, owner := range w.owners {
		found := false
		for _, r := range rows {
			found = found || (strings.HasPrefix(r, strconv.Itoa(id)+" | ") && strings.Contains(r, owner))
		}
		if !found {
			bad = append(bad, fmt.Sprintf("no fleet row of machine ID %d owned by %q in %q", id, owner, rows))
		}
	}
	events, _ := section(dom, "table", "events")
	found := false
	for _, r := range bodyRows(events) {
		found = found || strings.Contains(r, " | "+w.event+" | ")
	}
	if !found {
		bad = append(bad, fmt.Sprintf("no %s event in %q", w.event, bodyRows(events)))
	}
	return bad
}

func joinInts(ids []int) string {
	var s []string
	for _, id := range ids {
		s = append(s, strconv.Itoa(id))
	}
	return strings.Join(s, ",")
}

// The status page of a node of a real fleet (redis-server, three nodes,
// one stopped), rendered by headless Chromium: the DOM has every section
// with this node's mode, machine IDs and events and a row per machine ID
// of the fleet with its owner; the decode form decodes an ID and names a
// bad one; a screenshot is taken (FLAKED_SCREENSHOT=path.png keeps it).
// A page that breaks (a section missing, a template error) fails the
// checks: see the teeth at the end.
func TestStatusPage_Chromium(t *testing.T) {
	redistest.SkipShort(t, "Chromium")
	need(t, "chromium", "chromium")
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	initRegistry(t, rdb)
	start := func(host string, k int) *node.Node {
		n, err := node.New(ctxT(t), node.Options{Redis: rdb, MachineIDs: k, Registry: coord.Options{Owner: coord.Owner{Host: host, Addr: host + ":7379"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
	a, b, c := start("node-a", 2), start("node-b", 1), start("node-c", 1)
	owners := map[int]string{b.MachineIDs()[0]: "node-b pid", c.MachineIDs()[0]: "node-c pid"}
	for _, id := range a.MachineIDs() {
		owners[id] = "node-a pid"
	}
	if err := c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	id, err := a.NextID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, Options{Generator: a, Host: "node-a", PID: os.Getpid(),
		Fleet: func(ctx context.Context) (*audit.Snapshot, error) { return audit.Read(ctx, rdb, "") }}, false)
	want := pageWant{mode: "flake", machineIDs: a.MachineIDs(), owners: owners, event: "claim"}

	dom := chromium(t, s.base+"/", "--dump-dom")
	if bad := checkPage(dom, want); len(bad) > 0 {
		t.Fatalf("the status page in Chromium:\n%s\n\nDOM:\n%s", strings.Join(bad, "\n"), dom)
	}
	if rows := bodyRows(mustSection(t, dom, "table", "fleet")); len(rows) != 4 || !strings.Contains(strings.Join(rows, "\n"), "released") {
		t.Errorf("fleet rows %q, want 4 (node-c's released)", rows)
	}

	dom = chromium(t, s.base+"/?decode="+strconv.FormatUint(id, 10), "--dump-dom")
	dec := bodyRows("<tbody>" + mustSection(t, dom, "table", "decoded"))
	p := a.Layout().Decompose(id)
	if len(dec) < 6 || dec[0] != "ID | "+strconv.FormatUint(id, 10) || dec[4] != "Machine ID | "+strconv.Itoa(p.MachineID) || dec[5] != "Mode | flake" {
		t.Errorf("decoded rows %q, want ID %d with machine ID %d", dec, id, p.MachineID)
	}
	if !strings.Contains(dom, `value="`+strconv.FormatUint(id, 10)+`"`) {
		t.Error("the form does not keep the ID asked for")
	}
	dom = chromium(t, s.base+"/?decode=not-an-id", "--dump-dom")
	if e, ok := section(dom, "p", "decode-error"); !ok || !strings.Contains(e, "not-an-id") {
		t.Errorf("decode of a bad ID: error %q, want one naming it", e)
	}

	png := os.Getenv("FLAKED_SCREENSHOT")
	if png == "" {
		png = filepath.Join(t.TempDir(), "status.png")
	}
	chromium(t, s.base+"/?decode="+strconv.FormatUint(id, 10), "--screenshot="+png, "--window-size=1280,1100", "--hide-scrollbars")
	img, err := os.ReadFile(png)
	if err != nil || len(img) < 10_000 || string(img[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, %v; want a PNG", png, len(img), err)
	}
	t.Logf("screenshot: %s (%d bytes)", png, len(img))

	// Teeth: the checks fail on a page without its fleet table, and on
	// what a template error serves (a 500 with the error, no page).
	if bad := checkPage(strings.Replace(dom, `id="fleet"`, `id="fleat"`, 1), want); len(bad) == 0 {
		t.Error("a page without its fleet table passed the checks")
	}
	old := statusTmpl
	statusTmpl = template.Must(template.New("status").Parse(`<table id="node">{{.NoSuchField}}</table>`))
	defer func() { statusTmpl = old }()
	code, _, body := s.do(t, http.MethodGet, "/")
	if code != 500 || !strings.Contains(string(body), "NoSuchField") {
		t.Errorf("a template error: %d %s, want 500 naming it", code, body)
	}
	if bad := checkPage(chromium(t, s.base+"/", "--dump-dom"), want); len(bad) == 0 {
		t.Error("the page of a template error passed the checks")
	}
}

func mustSection(t *testing.T, dom, tag, id string) string {
	t.Helper()
	s, ok := section(dom, tag, id)
	if !ok {
		t.Fatalf("no <%s id=%q> in\n%s", tag, id, dom)
	}
	return s
}

// A standalone node's page (Go's client, no browser): the node's section
// and the standalone note instead of a fleet; the decode form answers in
// the page, a bad ID with an error naming it, HTML-escaped.
func TestStatusPage_Standalone(t *testing.T) {
	n := standalone(t)
	s := serve(t, Options{Generator: n}, false)
	code, h, b := s.do(t, http.MethodGet, "/")
	page := string(b)
	if code != 200 || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", code, h.Get("Content-Type"))
	}
	for _, want := range []string{`<table id="node">`, `id="standalone"`, `<form method="get" action="/" id="decode-form">`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET /: no %s in\n%s", want, page)
		}
	}
	if strings.Contains(page, `id="fleet"`) {
		t.Error("a standalone page shows a fleet table")
	}
	_, _, b = s.do(t, http.MethodGet, "/?decode=%3Cscript%3E")
	if e, ok := section(string(b), "p", "decode-error"); !ok || !strings.Contains(e, "&lt;script&gt;") {
		t.Errorf("decode of <script>: error %q, want it named and escaped", e)
	}
}
