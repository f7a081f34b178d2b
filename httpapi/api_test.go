package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Every route over real TCP with Go's client, plain and TLS: IDs as
// decimal strings, n bounded with a 400 naming the range, the decoding of
// an issued ID (decimal and base32) naming this node's machine ID, health,
// and JSON errors with 404 and 405 (Allow: GET).
func TestAPI_GoClient_PlainAndTLS(t *testing.T) {
	n := standalone(t)
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			s := serve(t, Options{Generator: n, MaxBatch: 100}, tlsOn)
			var one idBody
			s.getJSON(t, "/v1/id", 200, &one)
			id, err := strconv.ParseUint(one.ID, 10, 64)
			if err != nil {
				t.Fatalf("id %q: not a decimal string", one.ID)
			}
			var many idsBody
			s.getJSON(t, "/v1/ids?n=100", 200, &many)
			if len(many.IDs) != 100 {
				t.Fatalf("/v1/ids?n=100: %d IDs", len(many.IDs))
			}
			ids := []uint64{id}
			for _, v := range many.IDs {
				u, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("id %q: not a decimal string", v)
				}
				ids = append(ids, u)
			}
			idtest.Increasing(t, n.Layout(), "/v1/id then /v1/ids", ids)

			for _, q := range []string{"", "?n=", "?n=0", "?n=-1", "?n=101", "?n=abc", "?n=1&n=2", "?n=1e3"} {
				var e errorBody
				s.getJSON(t, "/v1/ids"+q, 400, &e)
				if !strings.Contains(e.Error, "1..100") {
					t.Errorf("/v1/ids%s: error %q does not name the range 1..100", q, e.Error)
				}
			}

			var p parseBody
			s.getJSON(t, "/v1/parse/"+one.ID, 200, &p)
			want := n.Layout().Decompose(id)
			if p.ID != one.ID || p.MachineID != n.MachineIDs()[0] || p.Tick != want.Tick || p.Sequence != want.Sequence ||
				p.Mode != "flake" || p.Region != nil || p.Time != want.Time.UTC().Format(rfc3339Millis) {
				t.Errorf("/v1/parse/%s = %+v; want the parts %+v of machine ID %v", one.ID, p, want, n.MachineIDs())
			}
			var pb parseBody
			s.getJSON(t, "/v1/parse/"+flake.FormatBase32(id), 200, &pb)
			if pb != p {
				t.Errorf("/v1/parse/<base32> = %+v, want %+v", pb, p)
			}
			for _, bad := range []string{"xyz", "-1", "99999999999999999999", strconv.FormatUint(1<<63, 10)} {
				var e errorBody
				s.getJSON(t, "/v1/parse/"+bad, 400, &e)
				if !strings.Contains(e.Error, bad) && !strings.Contains(e.Error, "9223372036854775807") {
					t.Errorf("/v1/parse/%s: error %q names neither the input nor the range", bad, e.Error)
				}
			}

			var hb healthBody
			s.getJSON(t, "/v1/health", 200, &hb)
			if hb != (healthBody{Status: "ready", Ready: true, Mode: "flake"}) {
				t.Errorf("/v1/health = %+v", hb)
			}

			for _, path := range []string{"/v1/nope", "/v1", "/v1/id/extra", "/v1/parse/", "/favicon.ico"} {
				var e errorBody
				s.getJSON(t, path, 404, &e)
				if !strings.Contains(e.Error, path) {
					t.Errorf("404 of %s: error %q does not name the path", path, e.Error)
				}
			}
			for _, rt := range append(slices.Clone(routes), route{pattern: "/"}) {
				path := strings.NewReplacer("{id}", one.ID, "{tag}", "orders").Replace(rt.pattern)
				for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead} {
					code, h, b := s.do(t, m, path)
					if code != 405 || h.Get("Allow") != "GET" {
						t.Errorf("%s %s: %d Allow %q, want 405 Allow GET", m, path, code, h.Get("Allow"))
					}
					var e errorBody
					if m != http.MethodHead && (json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, m)) {
						t.Errorf("%s %s: body %s, want a JSON error naming the method", m, path, b)
					}
				}
			}
		})
	}
}

// Fault: many clients at once. Every ID over HTTP is issued once: a
// handler sharing a buffer between requests, or answering one request
// with another's IDs, shows as a duplicate.
func TestAPI_ConcurrentClients_NoDuplicate(t *testing.T) {
	n := standalone(t)
	s := serve(t, Options{Generator: n}, false)
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				path := "/v1/ids?n=250"
				if i%2 == 0 {
					path = "/v1/id"
				}
				code, _, b := s.do(t, http.MethodGet, path)
				if code != 200 {
					t.Errorf("GET %s: %d %s", path, code, b)
					return
				}
				var body struct {
					ID  string   `json:"id"`
					IDs []string `json:"ids"`
				}
				if err := json.Unmarshal(b, &body); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, v := range append(body.IDs, body.ID) {
					if v == "" {
						continue
					}
					u, err := strconv.ParseUint(v, 10, 64)
					if err != nil {
						t.Errorf("id %q", v)
					}
					all = append(all, u)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if want := 8 * (20 + 20*250); len(all) != want {
		t.Fatalf("%d IDs, want %d", len(all), want)
	}
	idtest.Unique(t, n.Layout(), all)
}

// With a token, every route and the page want it: no header or a wrong
// one is a 401 with a JSON error and a challenge (Bearer for the API,
// Basic for the page, which a browser then asks for); the bearer token
// and Basic auth as user "default" pass.
func TestAPI_Token(t *testing.T) {
	n := standalone(t)
	s := serve(t, Options{Generator: n, Token: "s3cret"}, true)
	for _, path := range []string{"/v1/id", "/v1/ids?n=2", "/v1/seq/orders", "/v1/parse/1", "/v1/health", "/v1/openapi.json", "/", "/v1/nope"} {
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Bearer s3cret-"},
			{"Authorization", "Basic " + basic("other", "s3cret")}, {"Authorization", "s3cret"}} {
			code, h, b := s.do(t, http.MethodGet, path, hdr...)
			var e errorBody
			if code != 401 || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, "Bearer") {
				t.Errorf("GET %s with %q: %d %s, want 401 and a JSON error", path, hdr, code, b)
			}
			wantChallenge := "Bearer"
			if !strings.HasPrefix(path, "/v1/") {
				wantChallenge = "Basic"
			}
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), wantChallenge) {
				t.Errorf("GET %s: WWW-Authenticate %q, want %s", path, h.Get("WWW-Authenticate"), wantChallenge)
			}
		}
		want := map[string]int{"/v1/nope": 404, "/v1/seq/orders": 501}[path] // 501: a standalone node has no sequences
		if want == 0 {
			want = 200
		}
		for _, hdr := range [][]string{{"Authorization", "Bearer s3cret"}, {"Authorization", "bearer s3cret"},
			{"Authorization", "Basic " + basic("default", "s3cret")}} {
			if code, _, b := s.do(t, http.MethodGet, path, hdr...); code != want {
				t.Errorf("GET %s with %q: %d %s, want %d", path, hdr, code, b, want)
			}
		}
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// A node that cannot issue (here: closed) answers /v1/health 503 with the
// reason, and /v1/id and /v1/ids 503 with the generator's error and
// Retry-After; it never answers an ID.
func TestAPI_NotReady(t *testing.T) {
	n := standalone(t)
	s := serve(t, Options{Generator: n}, false)
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hb healthBody
	s.getJSON(t, "/v1/health", 503, &hb)
	if hb.Ready || hb.Status != "not ready" || !strings.Contains(hb.Reason, "cannot issue") {
		t.Errorf("/v1/health of a closed node = %+v", hb)
	}
	for _, path := range []string{"/v1/id", "/v1/ids?n=3"} {
		var e errorBody
		h := s.getJSON(t, path, 503, &e)
		if !strings.Contains(e.Error, "closed") || h.Get("Retry-After") == "" {
			t.Errorf("GET %s of a closed node: %q, Retry-After %q; want the generator's error and a Retry-After", path, e.Error, h.Get("Retry-After"))
		}
	}
}

// docs/http.md's curl commands work as shown, over plain HTTP and TLS (curl
// --cacert with the daemon's certificate), with the bearer token: Debian's
// curl, as an operator runs it.
func TestAPI_Curl(t *testing.T) {
	curl := need(t, "curl", "curl")
	n := standalone(t)
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			s := serve(t, Options{Generator: n, Token: "s3cret"}, tlsOn)
			run := func(path string, extra ...string) (int, string) {
				args := append([]string{"-sS", "--max-time", "20", "-w", "\n%{http_code}", "-H", "Authorization: Bearer s3cret"}, extra...)
				if s.caFile != "" {
					args = append(args, "--cacert", s.caFile)
				}
				out, err := exec.CommandContext(ctxT(t), curl, append(args, s.base+path)...).CombinedOutput()
				if err != nil {
					t.Fatalf("curl %s: %v\n%s", path, err, out)
				}
				s := strings.TrimSpace(string(out))
				i := strings.LastIndexByte(s, '\n')
				c, _ := strconv.Atoi(s[i+1:])
				return c, strings.TrimSpace(s[:max(i, 0)])
			}
			code, body := run("/v1/id")
			var one idBody
			if err := json.Unmarshal([]byte(body), &one); code != 200 || err != nil || one.ID == "" {
				t.Fatalf("curl /v1/id: %d %s", code, body)
			}
			code, body = run("/v1/ids?n=3")
			var many idsBody
			if err := json.Unmarshal([]byte(body), &many); code != 200 || err != nil || len(many.IDs) != 3 {
				t.Fatalf("curl /v1/ids?n=3: %d %s", code, body)
			}
			if code, body = run("/v1/parse/" + one.ID); code != 200 || !strings.Contains(body, `"machine_id":`+strconv.Itoa(n.MachineIDs()[0])) {
				t.Errorf("curl /v1/parse: %d %s", code, body)
			}
			if code, body = run("/v1/ids?n=0"); code != 400 || !strings.Contains(body, "1..10000") {
				t.Errorf("curl /v1/ids?n=0: %d %s", code, body)
			}
			if code, body = run("/v1/id", "-X", "POST"); code != 405 {
				t.Errorf("curl -X POST /v1/id: %d %s", code, body)
			}
			if code, body = run("/?decode=" + one.ID); code != 200 || !strings.Contains(body, `id="decoded"`) {
				t.Errorf("curl /?decode=: %d %.200s", code, body)
			}
		})
	}
}
