package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/httpapi"
	"github.com/flaked/flaked/node"
)

// startHTTPAPI serves the HTTP API and the status page on HTTPListen:
// TLS with the Redis side's certificate when it has one (--tls-cert), and
// its password (--requirepass) as the bearer token (one secret for both
// listeners). Its
// request counters go into reg, the registry /metrics serves.
func startHTTPAPI(o Options, n *node.Node, reg prometheus.Registerer) (*http.Server, error) {
	ns := o.Node.Registry.Namespace
	ho := httpapi.Options{
		Generator: n, Token: o.Server.RequirePass, MaxBatch: o.Server.MaxBatch, Registerer: reg, Logger: o.Server.Logger,
		Host: o.Node.Registry.Owner.Host, PID: o.Node.Registry.Owner.PID,
	}
	// A standalone node has no fleet to show: its embedded store answers
	// TIME at once even inside MULTI, where the audit reads it.
	if !n.Standalone() {
		ho.Fleet = func(ctx context.Context) (*audit.Snapshot, error) { return audit.Read(ctx, n.Store(), ns) }
	}
	h, err := httpapi.New(ho)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("--http-listen %s: %w", o.HTTPListen, err)
	}
	if o.Server.TLSConfig != nil {
		ln = tls.NewListener(ln, o.Server.TLSConfig.Clone())
	}
	// net/http's own messages (TLS handshake errors of scanners and of
	// plain-HTTP clients) are client noise: debug level.
	errLog := log.New(debugWriter{o.Server.Logger}, "", 0)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	go func() { _ = hs.Serve(ln) }()
	o.Server.Logger.Info().Str("addr", ln.Addr().String()).Bool("tls", o.Server.TLSConfig != nil).Msg("serving the HTTP API and status page")
	return hs, nil
}

type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
