package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/node"
)

// Defaults of Options.
const (
	DefaultMaxBatch = 10000
	// DefaultTimeout bounds one request's wait for IDs or values: no
	// client waits more than a second (the node's IDWait, 900 ms under
	// flaked serve, ends it first with the reason).
	DefaultTimeout = time.Second
	// fleetCacheFor is how long the status page reuses one read of the
	// registry: a page reloaded in a loop costs Redis one audit read
	// every few seconds, not one per load.
	fleetCacheFor = 2 * time.Second
)

// ErrInvalidOptions is wrapped by New's errors.
var ErrInvalidOptions = errors.New("httpapi: invalid options")

// Options configure the handler. The zero value of each field is its
// default; Generator is required.
type Options struct {
	// Generator issues the IDs and tells the mode, readiness and INFO the
	// page and /v1/health show. /v1/seq needs it to be a Sequencer too
	// (node.Node is); otherwise it answers 501.
	Generator node.Generator
	// Token, if set, is required of every request: "Authorization: Bearer
	// <Token>", or HTTP Basic auth as user "default" with password Token,
	// which a browser asks for on the status page. flaked serve passes
	// --requirepass: one secret for both listeners.
	Token string
	// MaxBatch is the largest n of /v1/ids and /v1/seq; default
	// DefaultMaxBatch.
	MaxBatch int
	// Timeout bounds the wait for IDs or values of one request; default
	// DefaultTimeout.
	Timeout time.Duration
	// Fleet reads the registry for the status page (audit.Read on the
	// node's Redis); nil leaves the fleet out of the page.
	Fleet func(ctx context.Context) (*audit.Snapshot, error)
	// Host and PID identify this process in the registry's events, which
	// the page lists; default os.Hostname() and os.Getpid(), as the
	// registry's owner data.
	Host string
	PID  int
	// Registerer, if set, gets flaked_http_requests_total{route,code},
	// flaked_http_ids_issued_total and
	// flaked_http_seq_values_issued_total.
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
	// Now is the clock of the page's "generated at"; default time.Now.
	Now func() time.Time
}

// api is the handler's state.
type api struct {
	o        Options
	mux      *http.ServeMux
	requests *prometheus.CounterVec
	issued   prometheus.Counter
	// seqIssued counts named sequences' values, apart from IDs: they are
	// another kind of number, and a dashboard adding both would mislead.
	seqIssued prometheus.Counter

	fleetMu   sync.Mutex
	fleetAt   time.Time
	fleetSnap *audit.Snapshot
	fleetErr  error
}

// New returns the handler of the API and the status page.
func New(o Options) (http.Handler, error) {
	if o.Generator == nil {
		return nil, fmt.Errorf("%w: no generator", ErrInvalidOptions)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatch < 1 {
		return nil, fmt.Errorf("%w: MaxBatch %d, want >= 1", ErrInvalidOptions, o.MaxBatch)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %v, want >= 0", ErrInvalidOptions, o.Timeout)
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &api{o: o, mux: http.NewServeMux(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flaked_http_requests_total",
			Help: "HTTP API and status page requests, by route and status code."}, []string{"route", "code"}),
		issued: prometheus.NewCounter(prometheus.CounterOpts{Name: "flaked_http_ids_issued_total",
			Help: "IDs delivered over the HTTP API (flaked_ids_issued_total counts the Redis protocol's)."}),
		seqIssued: prometheus.NewCounter(prometheus.CounterOpts{Name: "flaked_http_seq_values_issued_total",
			Help: "Values of named sequences delivered over the HTTP API (GET /v1/seq/{tag}), all tags."}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{a.requests, a.issued, a.seqIssued} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("httpapi: registering metrics: %w", err)
			}
		}
	}
	for _, rt := range routes {
		a.mux.Handle(rt.pattern, a.route(rt))
	}
	a.mux.Handle("/", a.route(route{pattern: "/", name: "unknown", handle: (*api).notFound}))
	return a, nil
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// route wraps a route's handler: the method check (405 with Allow), the
// token check (401) and the request count.
func (a *api) route(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() { a.requests.WithLabelValues(rt.name, fmt.Sprint(rec.code)).Inc() }()
		w = rec
		if !a.authorized(r) {
			a.unauthorized(w, r)
			return
		}
		if rt.method != "" && r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, rt.method))
			return
		}
		rt.handle(a, w, r)
	})
}

// authorized checks the bearer token, or Basic auth as user "default"
// (what AUTH's one user is called), in constant time.
func (a *api) authorized(r *http.Request) bool {
	if a.o.Token == "" {
		return true
	}
	var got string
	if user, pass, ok := r.BasicAuth(); ok {
		if user != "default" {
			return false
		}
		got = pass
	} else if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		got = strings.TrimSpace(h[7:])
	} else {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(a.o.Token)) == 1
}

func (a *api) unauthorized(w http.ResponseWriter, r *http.Request) {
	a.o.Logger.Warn().Str("addr", r.RemoteAddr).Str("path", r.URL.Path).Msg("HTTP request without the token")
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		w.Header().Set("WWW-Authenticate", `Bearer realm="flaked"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Basic realm="flaked", charset="UTF-8"`)
	}
	writeError(w, http.StatusUnauthorized, "authentication required: send Authorization: Bearer <the daemon's --requirepass>, or Basic auth as user default")
}

// notFound answers every path no route has; "/" itself is the page.
func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on /: use GET", r.Method))
			return
		}
		a.statusPage(w, r)
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %s: see /v1/openapi.json", r.URL.Path))
}

// errorBody is every error's JSON.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{msg})
}

// writeJSON writes v; IDs are never cached (each GET is a new one). No
// HTML escaping: the answer is application/json with nosniff, and "<" in
// an error message stays readable.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := []byte(`{"error":"encoding the reply failed"}` + "\n")
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
	} else {
		b = buf.Bytes()
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
