package main

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

// startHTTPAPI serves the HTTP API and the status page on --http-listen:
// TLS with the Redis side's certificate when --tls-cert is set, and
// --requirepass as the bearer token (one secret for both listeners). Its
// request counters go into reg, the registry /metrics serves.
func startHTTPAPI(o serveOptions, n *node.Node, reg prometheus.Registerer) (*http.Server, error) {
	ns := o.node.Registry.Namespace
	ho := httpapi.Options{
		Generator: n, Token: o.server.RequirePass, MaxBatch: o.server.MaxBatch, Registerer: reg, Logger: o.server.Logger,
		Host: o.node.Registry.Owner.Host, PID: o.node.Registry.Owner.PID,
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
	ln, err := net.Listen("tcp", o.httpListen)
	if err != nil {
		return nil, fmt.Errorf("--http-listen %s: %w", o.httpListen, err)
	}
	if o.server.TLSConfig != nil {
		ln = tls.NewListener(ln, o.server.TLSConfig.Clone())
	}
	// net/http's own messages (TLS handshake errors of scanners and of
	// plain-HTTP clients) are client noise: debug level.
	errLog := log.New(debugWriter{o.server.Logger}, "", 0)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	go func() { _ = hs.Serve(ln) }()
	o.server.Logger.Info().Str("addr", ln.Addr().String()).Bool("tls", o.server.TLSConfig != nil).Msg("serving the HTTP API and status page")
	return hs, nil
}

type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
