package main

import (
	"errors"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/daemon"
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
	// defaultIDWait is --id-wait: the longest a request for an ID waits
	// (no client waits more than a second through any fault).
	// Every wait inside a request (a reservation or counter segment in
	// flight, a mode switch) is bounded by it; it is a little under the Go
	// client's 1 s bound (client.DefaultWait), so the daemon's error
	// naming the cause reaches the client before the client gives up.
	defaultIDWait = 900 * time.Millisecond
	// defaultListen is serve's --listen, where healthcheck looks by default.
	defaultListen = "127.0.0.1:7379"
)

func serveFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "listen", Value: defaultListen, EnvVars: envVars("listen"),
			Usage: "host:port of the Redis-protocol listener (loopback by default; set --requirepass off loopback)"},
		&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"),
			Usage: "the fleet's Redis URL: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]; empty runs standalone on an embedded store"},
		&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
			Usage: "the fleet's namespace (keys {ns}:...), 1..64 of A-Z a-z 0-9 . _ -"},
		&cli.StringFlag{Name: "mode", EnvVars: envVars("mode"),
			Usage: "flake (time-based), counter (Redis counter segments) or auto (flake, counter while flake is unsafe); default auto with --redis, flake standalone"},
		durationFlag("lease-ttl", coord.DefaultLeaseTTL, coord.MinLeaseTTL, coord.MaxLeaseTTL,
			"machine-ID lease TTL (renewed every TTL/3)"),
		durationFlag("max-lead", flake.DefaultMaxLead, 0, node.MaxMaxLead, "how far IDs may run ahead of the clock when a tick's sequence is used up"),
		durationFlag("reserve-ahead", node.DefaultReserveAhead, node.MinReserveAhead, node.MaxReserveAhead,
			"how far ahead of use each reservation reaches: a flake node holds all of it but a second (half of it under 2s), and issues through a Redis that is slow or paused for that long; "+
				"the data-loss horizon grows with it, and with it how far ahead of the clock IDs run for a while after a Redis restart or failover or a restart after kill -9; keep it the same across the fleet and pass it to flaked init"),
		durationFlag("max-wait", 0, 0, coord.MaxMaxWait,
			"how far the clock may be behind a machine ID's reservation before the ID is given up (auto: counter mode; 0: the data-loss horizon + 2s, about 16s, where the horizon is max-lead + reserve-ahead + max-skew + a tick)"),
		durationFlag("id-wait", defaultIDWait, 0, node.MaxIDWait,
			"the longest a NEXTID/NEXTIDS/NEXTBLOCK (and the HTTP API) waits for an ID while the node cannot issue (claiming again, Redis slow or restarting) before it answers an error saying what the node waits for and until when; keep it below the clients' read timeout (go-redis: 3s)"),
		durationFlag("max-skew", coord.DefaultMaxSkew, coord.MinMaxSkew, coord.MaxMaxSkew,
			"largest difference of the local clock from Redis TIME"),
		durationFlag("replica-wait", coord.DefaultReplicaWait, coord.MinReplicaWait, coord.MaxReplicaWait,
			"how long a claim, renewal or counter segment the Sentinels do not vouch for waits for the replicas to acknowledge it (WAIT) before it is refused and retried; no wait without replicas"),
		intFlag("min-replicas", 0, 0, coord.MaxMinReplicas,
			minReplicasUsage),
		intFlag("machine-ids", 1, 1, node.MaxMachineIDs, "machine IDs this node leases (k x 25,600 IDs/s at the default layout)"),
		&cli.StringFlag{Name: "metrics-addr", EnvVars: envVars("metrics-addr"),
			Usage: "host:port of HTTP /metrics, /healthz, /readyz; empty for none"},
		&cli.StringFlag{Name: "http-listen", EnvVars: envVars("http-listen"),
			Usage: "host:port of the HTTP API (/v1/...) and status page (/); TLS with --tls-cert, --requirepass as its bearer token; empty for none"},
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
		&cli.StringFlag{Name: "redis-identity", Value: contract.IdentityInfo, EnvVars: envVars("redis-identity"),
			Usage: "info: the scripts read the server's identity (INFO run_id, master_replid) and maxmemory-policy, and refuse to write when they cannot; " +
				"none: for a server that truly hides INFO, read nothing: Redis losing writes (a restart from an old snapshot, a failover to a replica that missed writes) goes unnoticed and IDs may repeat after one"},
		&cli.DurationFlag{Name: "redis-watch-interval", Value: daemon.DefaultRedisWatchInterval, EnvVars: envVars("redis-watch-interval"), Hidden: true,
			Usage: "how often the checks of what can change on a running Redis re-run (tests shorten it)"},
		&cli.DurationFlag{Name: "test-clock-offset", EnvVars: envVars("test-clock-offset"), Hidden: true,
			Usage: "TEST ONLY: shift this node's clock (fault injection: clock rollback); never in production"},
	}
	flags = append(flags, stateFileFlags()...)
	return append(flags, layoutFlags()...)
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the daemon: IDs over a Redis-compatible protocol (redis-cli -p 7379 NEXTID)",
		Description: "Without --redis the node runs standalone on an embedded store; its state file (on by\n" +
			"default, see --state-file) keeps restarts unique and reusing the machine ID. SIGINT or SIGTERM stops gracefully (in-flight\n" +
			"replies are finished, the lease released with the exact last tick, the state file flushed);\n" +
			"a second signal exits at once.",
		Flags:  serveFlags(),
		Action: serve,
	}
}

// serve checks the flags, starts the daemon (the node, the server and the
// HTTP side), and runs it until a signal or a failed listener.
func serve(c *cli.Context) error {
	log := *zerolog.Ctx(c.Context)
	o, err := serveOptionsFromFlags(c, log)
	if err != nil {
		return err
	}
	if o.Node.Redis != nil {
		defer o.Node.Redis.Close()
	}
	if s, ok := o.Node.Registry.Sentinels.(*coord.SentinelSet); ok {
		defer s.Close()
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := daemon.Start(ctx, o, log)
	if err != nil {
		err = explainStart(err, o)
		if errors.As(err, new(daemon.ConfigError)) {
			return usageError{err}
		}
		return err
	}
	return d.Run(ctx, stop)
}
