package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// Ranges of serve's flags that no package owns: server.Options only needs
// IdleTimeout >= 0, and the shutdown timeout is this command's own.
const (
	maxIdleTimeout     = 24 * time.Hour
	minShutdownTimeout = time.Second
	maxShutdownTimeout = 10 * time.Minute
)

func serveFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "listen", Value: "127.0.0.1:7379", EnvVars: envVars("listen"),
			Usage: "host:port of the Redis-protocol listener (loopback by default; set --requirepass off loopback)"},
		&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"),
			Usage: "the fleet's Redis URL: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]; empty runs standalone on an embedded store"},
		&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
			Usage: "the fleet's namespace (keys {ns}:...), 1..64 of A-Z a-z 0-9 . _ -"},
		&cli.StringFlag{Name: "state-file", EnvVars: envVars("state-file"),
			Usage: "local state file (machine IDs and reservation) that makes restarts reuse the ID and stay unique; empty for none (standalone: restarts are then unsafe)"},
		&cli.StringFlag{Name: "mode", Value: node.ModeFlake.String(), EnvVars: envVars("mode"),
			Usage: "flake (time-based), counter (Redis counter segments) or auto (flake, counter while flake is unsafe)"},
		durationFlag("lease-ttl", coord.DefaultLeaseTTL, coord.MinLeaseTTL, coord.MaxLeaseTTL,
			"machine-ID lease TTL (renewed every TTL/3)"),
		durationFlag("max-lead", flake.DefaultMaxLead, 0, node.MaxMaxLead, "how far IDs may run ahead of the clock"),
		durationFlag("max-wait", 0, 0, coord.MaxMaxWait,
			"how far the clock may be behind a machine ID's reservation before the ID is given up (auto: counter mode; 0: the data-loss horizon + 2s, about 6s, where the horizon is max-lead + 2s reserve-ahead + max-skew + a tick)"),
		durationFlag("max-skew", coord.DefaultMaxSkew, coord.MinMaxSkew, coord.MaxMaxSkew,
			"largest difference of the local clock from Redis TIME"),
		intFlag("machine-ids", 1, 1, node.MaxMachineIDs, "machine IDs this node leases (k x 25,600 IDs/s at the default layout)"),
		&cli.StringFlag{Name: "metrics-addr", EnvVars: envVars("metrics-addr"),
			Usage: "host:port of HTTP /metrics, /healthz, /readyz; empty for none"},
		&cli.StringFlag{Name: "requirepass", EnvVars: envVars("requirepass"),
			Usage: "password clients must AUTH with (user \"default\"); empty for none"},
		&cli.StringFlag{Name: "tls-cert", EnvVars: envVars("tls-cert"), Usage: "PEM certificate: serve TLS (with --tls-key)"},
		&cli.StringFlag{Name: "tls-key", EnvVars: envVars("tls-key"), Usage: "PEM private key of --tls-cert"},
		intFlag("max-clients", server.DefaultMaxConns, 1, server.MaxMaxConns, "client connections served at once"),
		intFlag("max-batch", server.DefaultMaxBatch, 1, server.MaxMaxBatch, "largest NEXTIDS count"),
		intFlag("max-line", server.DefaultMaxLine, server.MinMaxLine, server.MaxMaxLine, "longest inline request or RESP header line, bytes"),
		intFlag("max-bulk", server.DefaultMaxBulk, server.MinMaxBulk, server.MaxMaxBulk, "longest RESP argument, bytes"),
		intFlag("max-args", server.DefaultMaxArgs, server.MinMaxArgs, server.MaxMaxArgs, "most arguments of one request"),
		intFlag("io-loops", 0, -1, server.MaxLoops, "epoll event loops serving plain-TCP clients on Linux; 0: one per two cores (GOMAXPROCS/2, at least 1), -1: a goroutine per connection"),
		durationFlag("idle-timeout", 0, 0, maxIdleTimeout, "close connections idle this long; 0 means never"),
		durationFlag("shutdown-timeout", 10*time.Second, minShutdownTimeout, maxShutdownTimeout,
			"how long a graceful stop waits for in-flight replies"),
		&cli.BoolFlag{Name: "pprof", EnvVars: envVars("pprof"),
			Usage: "also serve Go's /debug/pprof/ on --metrics-addr (profiling; keep that address private)"},
		&cli.DurationFlag{Name: "test-clock-offset", EnvVars: envVars("test-clock-offset"), Hidden: true,
			Usage: "TEST ONLY: shift this node's clock (fault injection: clock rollback); never in production"},
	}
	return append(flags, layoutFlags()...)
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the daemon: IDs over a Redis-compatible protocol (redis-cli -p 7379 NEXTID)",
		Description: "Without --redis the node runs standalone on an embedded store; with --state-file its\n" +
			"restarts reuse the machine ID and stay unique. SIGINT or SIGTERM stops gracefully (in-flight\n" +
			"replies are finished, the lease released with the exact last tick, the state file flushed);\n" +
			"a second signal exits at once.",
		Flags:  serveFlags(),
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	log := *zerolog.Ctx(c.Context)
	layout, err := layoutFromFlags(c)
	if err != nil {
		return err
	}
	mode, err := node.ParseMode(c.String("mode"))
	if err != nil {
		return usagef("--mode %q: want flake, counter or auto", c.String("mode"))
	}
	listen := c.String("listen")
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return usagef("--listen %q: want host:port: %v", listen, err)
	}
	if c.Bool("pprof") && c.String("metrics-addr") == "" {
		return usagef("--pprof needs --metrics-addr (it is served there)")
	}
	if ma := c.String("metrics-addr"); ma != "" {
		if _, _, err := net.SplitHostPort(ma); err != nil {
			return usagef("--metrics-addr %q: want host:port: %v", ma, err)
		}
	}
	if _, err := coord.NewRegistry(nil, coord.Options{Namespace: c.String("namespace")}); err != nil {
		return usageError{fmt.Errorf("--namespace: %w", err)}
	}
	var tlsConfig *tls.Config
	if cert, key := c.String("tls-cert"), c.String("tls-key"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return usagef("--tls-cert and --tls-key go together")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	if !isLoopback(listen) && c.String("requirepass") == "" {
		log.Warn().Str("listen", listen).Msg("listening off loopback without --requirepass: anyone who reaches the port can take IDs")
	}

	var rdb redis.UniversalClient
	target := "standalone (embedded store)"
	if u := c.String("redis"); u != "" {
		if rdb, err = coord.NewClient(u); err != nil {
			return usageError{fmt.Errorf("--redis: %w", err)}
		}
		defer rdb.Close()
		target = redactURL(u)
	}
	var clk flake.Clock
	if off := c.Duration("test-clock-offset"); off != 0 {
		clk = flake.NewOffsetClock(off)
		log.Warn().Dur("offset", off).Msg("TEST ONLY: the clock is shifted (--test-clock-offset)")
	}
	if rdb == nil && c.String("state-file") == "" {
		log.Warn().Msg("standalone without --state-file: a restart may repeat IDs of the previous run; set --state-file")
	}

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	n, err := node.New(ctx, node.Options{
		Redis: rdb,
		Registry: coord.Options{
			Namespace: c.String("namespace"), Layout: layout, LeaseTTL: c.Duration("lease-ttl"),
			MaxSkew: c.Duration("max-skew"), MaxWait: c.Duration("max-wait"),
			Owner: coord.Owner{Addr: listen, Version: version},
		},
		StateFile:  c.String("state-file"),
		Mode:       mode,
		MachineIDs: c.Int("machine-ids"),
		MaxLead:    c.Duration("max-lead"),
		Clock:      clk,
		Logger:     log,
	})
	if err != nil {
		if isConfigError(err) {
			return usageError{err}
		}
		return err
	}
	closeNode := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return n.Close(cctx)
	}
	srv, err := server.New(n, server.Options{
		MaxConns: c.Int("max-clients"), MaxBatch: c.Int("max-batch"), MaxLine: c.Int("max-line"),
		MaxBulk: c.Int("max-bulk"), MaxArgs: c.Int("max-args"), IdleTimeout: c.Duration("idle-timeout"),
		RequirePass: c.String("requirepass"), TLSConfig: tlsConfig, Logger: log, Version: version,
		Loops: c.Int("io-loops"),
	})
	if err != nil {
		_ = closeNode()
		return usageError{err}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = closeNode()
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	var httpSrv *http.Server
	if ma := c.String("metrics-addr"); ma != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			newNodeCollector(n))
		h, err := server.NewHTTPHandler(srv, reg)
		if err != nil {
			ln.Close()
			_ = closeNode()
			return err
		}
		mln, err := net.Listen("tcp", ma)
		if err != nil {
			ln.Close()
			_ = closeNode()
			return fmt.Errorf("--metrics-addr %s: %w", ma, err)
		}
		if c.Bool("pprof") {
			mux := http.NewServeMux()
			mux.Handle("/", h)
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			h = mux
		}
		httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = httpSrv.Serve(mln) }()
	}

	mids := n.MachineIDs()
	log.Info().Str("mode", n.Mode().String()).Str("mode_configured", mode.String()).Ints("machine_ids", mids).
		Str("layout", n.Layout().String()).Str("redis", target).Bool("standalone", n.Standalone()).
		Str("listen", ln.Addr().String()).Str("metrics", c.String("metrics-addr")).Str("state_file", c.String("state-file")).
		Str("version", version).Dur("startup", time.Since(started)).Msg("flaked serving")

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served: // the listener failed
	case <-ctx.Done():
	}
	stop() // from here the default action applies: a second signal exits at once
	log.Info().Msg("stopping: finishing in-flight replies, then releasing the lease")
	sctx, cancel := context.WithTimeout(context.Background(), c.Duration("shutdown-timeout"))
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn().Err(serr).Msg("connections cut at the shutdown timeout")
	}
	if httpSrv != nil {
		_ = httpSrv.Shutdown(sctx)
	}
	if cerr := closeNode(); cerr != nil {
		log.Error().Err(cerr).Msg("releasing the lease failed (it expires after its TTL; the reservation stays as granted, which is safe)")
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	log.Info().Ints("machine_ids", mids).Msg("stopped cleanly")
	return nil
}

// isConfigError reports whether a start failure is the user's input (exit
// status 2): options, layout, a corrupt or foreign state file. Redis being
// away, no machine ID being free, or a state file that cannot be written
// are failures (1).
func isConfigError(err error) bool {
	if errors.Is(err, coord.ErrStateIO) {
		return false // a full or read-only disk is the host's fault, not the flags'
	}
	for _, e := range []error{node.ErrInvalidOptions, coord.ErrInvalidOptions, coord.ErrLayoutMismatch,
		coord.ErrStateCorrupt, coord.ErrStateMismatch, coord.ErrStateLocked} {
		if errors.Is(err, e) {
			return true
		}
	}
	var pe *os.PathError
	return errors.As(err, &pe) && !errors.Is(err, os.ErrDeadlineExceeded)
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redactURL hides the password of a Redis URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// nodeCollector exposes the node's numeric INFO fields as gauges
// flaked_node_<key> (lease renewals and failures, reservation headroom,
// NextID waits, mode switches, counter segments ...).
type nodeCollector struct {
	n *node.Node
}

func newNodeCollector(n *node.Node) prometheus.Collector { return nodeCollector{n} }

func (nodeCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: keys depend on the mode

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, kv := range c.n.Info() {
		v, err := strconv.ParseFloat(kv[1], 64)
		if err != nil || strings.HasPrefix(kv[0], "tick_") || kv[0] == "machine_ids" {
			continue
		}
		d := prometheus.NewDesc("flaked_node_"+kv[0], "node INFO field "+kv[0], nil, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
}
