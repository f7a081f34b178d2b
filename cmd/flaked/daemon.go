package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/flaked/flaked/clock"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// daemon is flaked serve running: the node, the Redis-protocol server on
// its listener and, with --metrics-addr, the HTTP side.
type daemon struct {
	o       serveOptions
	log     zerolog.Logger
	started time.Time
	n       *node.Node
	srv     *server.Server
	ln      net.Listener
	http    *http.Server // nil without --metrics-addr
	api     *http.Server // nil without --http-listen
	watch   *redisWatch  // nil when standalone
}

// startDaemon starts the node, then the server's listener and the HTTP
// side; on a failure it closes what it started. The node refusing its
// options, layout or state file is a usage error.
func startDaemon(ctx context.Context, o serveOptions, log zerolog.Logger) (*daemon, error) {
	d := &daemon{o: o, log: log, started: time.Now()}
	if o.node.Redis != nil {
		t, err := o.doctorTarget()
		if err != nil {
			return nil, err
		}
		if err := checkRedis(ctx, t, log); err != nil {
			return nil, err
		}
		d.watch = newRedisWatch(t, cmp.Or[clock.Clock](o.node.Clock, clock.System()), o.watchInterval, log)
	}
	var err error
	if d.n, err = node.New(ctx, o.node); err != nil {
		err = explainStart(err, o)
		if isConfigError(err) {
			return nil, usageError{err}
		}
		return nil, err
	}
	var gen node.Generator = d.n
	if d.watch != nil {
		gen = watchedNode{d.n, d.watch}
	}
	if d.srv, err = server.New(gen, o.server); err != nil {
		_ = d.closeNode()
		return nil, usageError{err}
	}
	if d.ln, err = net.Listen("tcp", o.listen); err != nil {
		_ = d.closeNode()
		return nil, fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	reg := prometheus.NewRegistry() // /metrics: the server's, the node's and the HTTP API's
	if o.httpListen != "" {
		if d.api, err = startHTTPAPI(o, d.n, reg); err != nil {
			d.ln.Close()
			_ = d.closeNode()
			return nil, err
		}
	}
	if o.metricsAddr != "" {
		if d.http, err = startHTTP(o, d.srv, d.n, d.watch, reg); err != nil {
			if d.api != nil {
				d.api.Close()
			}
			d.ln.Close()
			_ = d.closeNode()
			return nil, err
		}
	}
	return d, nil
}

// run serves until the listener fails or ctx ends (a signal), then stops
// gracefully: in-flight replies are finished within --shutdown-timeout,
// then the lease is released with the exact last tick. stop gives the
// signals their default action back, so a second one exits at once.
func (d *daemon) run(ctx context.Context, stop func()) error {
	mids := d.n.MachineIDs()
	d.log.Info().Str("mode", d.n.Mode().String()).Str("mode_configured", d.o.node.Mode.String()).Ints("machine_ids", mids).
		Str("layout", d.n.Layout().String()).Str("redis", d.o.target).Bool("standalone", d.n.Standalone()).
		Str("listen", d.ln.Addr().String()).Str("metrics", d.o.metricsAddr).Str("http_listen", d.o.httpListen).Str("state_file", d.o.node.StateFile).Str("state_file_from", d.o.stateFrom).
		Str("version", version).Dur("startup", time.Since(d.started)).Msg("flaked serving")

	if d.watch != nil {
		d.watch.start()
		defer d.watch.stop()
	}
	served := make(chan error, 1)
	go func() { served <- d.srv.Serve(d.ln) }()
	var err error
	select {
	case err = <-served: // the listener failed
	case <-ctx.Done():
	}
	stop()
	d.log.Info().Msg("stopping: finishing in-flight replies, then releasing the lease")
	sctx, cancel := context.WithTimeout(context.Background(), d.o.shutdownTimeout)
	defer cancel()
	if serr := d.srv.Shutdown(sctx); serr != nil {
		d.log.Warn().Err(serr).Msg("connections cut at the shutdown timeout")
	}
	if d.api != nil {
		_ = d.api.Shutdown(sctx)
	}
	if d.http != nil {
		_ = d.http.Shutdown(sctx)
	}
	if cerr := d.closeNode(); cerr != nil {
		d.log.Error().Err(cerr).Msg("releasing the lease failed (it expires after its TTL; the reservation stays as granted, which is safe)")
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	d.log.Info().Ints("machine_ids", mids).Msg("stopped cleanly")
	return nil
}

// closeNode releases the lease and flushes the state file, giving Redis
// node.CloseTimeout to answer: a lease not released expires after its TTL.
func (d *daemon) closeNode() error {
	ctx, cancel := context.WithTimeout(context.Background(), node.CloseTimeout)
	defer cancel()
	return d.n.Close(ctx)
}

// doctorTarget is the fleet's Redis as flaked doctor's checks see it, with
// the node's settings, sending only what the node's user may
// (doctor.Target.AsNode).
func (o serveOptions) doctorTarget() (doctor.Target, error) {
	ro := o.node.Registry
	t := doctor.Target{Redis: o.node.Redis, Namespace: ro.Namespace, Layout: ro.Layout, LeaseTTL: ro.LeaseTTL,
		MaxSkew: ro.MaxSkew, Clock: o.node.Clock, AsNode: true, IdentityNone: ro.RedisIdentity == contract.IdentityNone,
		MinReplicas: doctorMinReplicas(ro.MinReplicas)}
	return t, sentinelTarget(&t, o.redisURL, "")
}
