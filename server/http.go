package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHTTPHandler returns the handler of the metrics address:
//   - /metrics: reg in the Prometheus text format, after registering s's
//     metrics in it (flaked_ids_issued_total{mode},
//     flaked_nextid_errors_total, flaked_connections,
//     flaked_connections_total, flaked_commands_total{command},
//     flaked_mode{mode}, flaked_ready, ...). Other parts of the daemon
//     register theirs in the same reg; nil means a new registry.
//   - /healthz: 200 while the server serves, 503 once it shuts down.
//   - /readyz: 200 when the generator is ready, else 503 with the reason.
//
// It fails when reg already holds s's metrics.
func NewHTTPHandler(s *Server, reg *prometheus.Registry) (http.Handler, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if err := reg.Register(newCollector(s)); err != nil {
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.closing.Load():
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
		case !s.gen.Ready():
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: the generator cannot issue IDs now (mode %s)\n", s.gen.Mode())
			for _, kv := range s.gen.Info() {
				fmt.Fprintf(w, "%s:%s\n", kv[0], kv[1])
			}
		default:
			fmt.Fprintf(w, "ready (mode %s)\n", s.gen.Mode())
		}
	})
	return mux, nil
}
