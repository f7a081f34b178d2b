// Package daemon is flaked serve put together: the node, the
// Redis-protocol server on its listener, the HTTP side (metrics, health,
// pprof, the alert rules' series), the HTTP API and status page, and the
// watch that re-runs flaked doctor's live checks while it serves. It
// starts them in order, closes what it started when one fails, and stops
// them gracefully. cmd/flaked only turns the flags into Options.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/redisinfo"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
	"github.com/flaked/flaked/statefile"
)

// Options are what a daemon is made of; flaked serve's flags give each.
type Options struct {
	Node   node.Options // its Redis, if any, is the caller's to close
	Server server.Options
	// Listen is the Redis-protocol listener's host:port (--listen).
	Listen string
	// MetricsAddr serves /metrics, /healthz and /readyz, and with PProf
	// Go's /debug/pprof/ (--metrics-addr); "" for no HTTP side.
	MetricsAddr string
	PProf       bool
	// HTTPListen serves the HTTP API and status page (--http-listen); ""
	// for none.
	HTTPListen string
	// ShutdownTimeout bounds a graceful stop's wait for in-flight replies.
	ShutdownTimeout time.Duration
	// Checks is the fleet's Redis as flaked doctor's checks see it: run
	// before the node starts (an unsafe result refuses the start) and the
	// live ones every WatchInterval while it serves. Unused standalone.
	Checks        doctor.Target
	WatchInterval time.Duration
	// Target and StateFrom are for the start's log line: the fleet's Redis
	// (password hidden) or the embedded store, and where the state file's
	// name came from.
	Target, StateFrom string
}

// Daemon is flaked serve running: the node, the Redis-protocol server on
// its listener and, with MetricsAddr and HTTPListen, the HTTP side.
type Daemon struct {
	o       Options
	log     zerolog.Logger
	started time.Time
	n       *node.Node
	srv     *server.Server
	ln      net.Listener
	http    *http.Server // nil without MetricsAddr
	api     *http.Server // nil without HTTPListen
	watch   *redisWatch  // nil when standalone
}

// ConfigError is a start failure caused by the options, that is the
// user's input: the node's options, layout or state file, the server's
// options.
type ConfigError struct{ Err error }

func (e ConfigError) Error() string { return e.Err.Error() }
func (e ConfigError) Unwrap() error { return e.Err }

// Start checks the fleet's Redis, starts the node, then the server's
// listener and the HTTP side; on a failure it closes what it started.
func Start(ctx context.Context, o Options, log zerolog.Logger) (*Daemon, error) {
	d := &Daemon{o: o, log: log, started: time.Now()}
	if o.Node.Redis != nil {
		if err := checkRedis(ctx, o.Checks, log); err != nil {
			return nil, err
		}
		d.watch = newRedisWatch(o.Checks, cmp.Or[clock.Clock](o.Node.Clock, clock.System()), o.WatchInterval, log)
	}
	var err error
	if d.n, err = node.New(ctx, o.Node); err != nil {
		if isConfigError(err) {
			return nil, ConfigError{err}
		}
		return nil, err
	}
	var gen node.Generator = d.n
	if d.watch != nil {
		gen = watchedNode{d.n, d.watch}
	}
	if d.srv, err = server.New(gen, o.Server); err != nil {
		_ = d.closeNode()
		return nil, ConfigError{err}
	}
	if d.ln, err = net.Listen("tcp", o.Listen); err != nil {
		_ = d.closeNode()
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	reg := prometheus.NewRegistry() // /metrics: the server's, the node's and the HTTP API's
	if o.HTTPListen != "" {
		if d.api, err = startHTTPAPI(o, d.n, reg); err != nil {
			d.ln.Close()
			_ = d.closeNode()
			return nil, err
		}
	}
	if o.MetricsAddr != "" {
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

// Run serves until the listener fails or ctx ends (a signal), then stops
// gracefully: in-flight replies are finished within ShutdownTimeout, then
// the lease is released with the exact last tick. stop gives the signals
// their default action back, so a second one exits at once.
func (d *Daemon) Run(ctx context.Context, stop func()) error {
	mids := d.n.MachineIDs()
	d.log.Info().Str("mode", d.n.Mode().String()).Str("mode_configured", d.o.Node.Mode.String()).Ints("machine_ids", mids).
		Str("layout", d.n.Layout().String()).Str("redis", d.o.Target).Bool("standalone", d.n.Standalone()).
		Str("listen", d.ln.Addr().String()).Str("metrics", d.o.MetricsAddr).Str("http_listen", d.o.HTTPListen).Str("state_file", d.o.Node.StateFile).Str("state_file_from", d.o.StateFrom).
		Str("version", d.o.Server.Version).Dur("startup", time.Since(d.started)).Msg("flaked serving")

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
	sctx, cancel := context.WithTimeout(context.Background(), d.o.ShutdownTimeout)
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
func (d *Daemon) closeNode() error {
	ctx, cancel := context.WithTimeout(context.Background(), node.CloseTimeout)
	defer cancel()
	return d.n.Close(ctx)
}

// checkRedis runs flaked doctor's checks before a node starts: an unsafe
// result refuses the start, naming each with its fix; costly ones are
// logged at warn.
func checkRedis(ctx context.Context, t doctor.Target, log zerolog.Logger) error {
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	err := t.Redis.Time(pctx).Err() // TIME: the node's user may (PING it may not)
	pcancel()
	if err != nil {
		// Redis away is the node's to handle (auto mode, retries); the
		// scripts refuse unsafe writes whenever it comes back, and the
		// watch reports them.
		log.Warn().Err(err).Msg("cannot check the fleet's Redis now (flaked doctor's checks): unreachable; checking again while serving")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, doctor.CheckTimeout)
	defer cancel()
	rs := doctor.Run(ctx, t)
	var unsafe []string
	for _, r := range rs {
		switch r.Status {
		case doctor.Unsafe:
			unsafe = append(unsafe, fmt.Sprintf("%s: %s (fix: %s)", r.Check, r.Detail, r.Fix))
		case doctor.Costly:
			log.Warn().Str("check", r.Check).Str("server", r.Server).Str("fix", r.Fix).Msg(r.Detail)
		}
	}
	if len(unsafe) > 0 {
		msg := strings.Join(unsafe, "; ")
		if redisinfo.HasNoPerm(msg) {
			msg += " (" + redisinfo.ACLHint + ")"
		}
		return fmt.Errorf("the fleet's Redis is unsafe for flaked (flaked doctor --redis URL says more): %s", msg)
	}
	return nil
}

// isConfigError reports whether a start failure is the user's input (exit
// status 2): options, layout, a corrupt or foreign state file. Redis being
// away, no machine ID being free, or a state file that cannot be written
// are failures (1), and so is a namespace without a registry (NOREGISTRY):
// an operator step (flaked init) missing or still under way, after which
// a supervisor's restart succeeds (systemd's RestartPreventExitStatus=2
// would stop restarting it).
func isConfigError(err error) bool {
	if errors.Is(err, statefile.ErrIO) {
		return false // a full or read-only disk is the host's fault, not the flags'
	}
	for _, e := range []error{node.ErrInvalidOptions, coord.ErrInvalidOptions, coord.ErrLayoutMismatch, fallback.ErrLayoutMismatch,
		statefile.ErrCorrupt, statefile.ErrMismatch, statefile.ErrLocked} {
		if errors.Is(err, e) {
			return true
		}
	}
	var pe *os.PathError
	return errors.As(err, &pe) && !errors.Is(err, os.ErrDeadlineExceeded)
}
