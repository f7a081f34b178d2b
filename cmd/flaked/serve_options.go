package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/daemon"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// serveOptionsFromFlags turns serve's flags into the daemon's options,
// checking what the flags' parsing could not (the ranges it did), and
// warns about settings that work but are risky. Its errors are usage
// errors; it connects to nothing.
func serveOptionsFromFlags(c *cli.Context, log zerolog.Logger) (daemon.Options, error) {
	layout, err := layoutFromFlags(c)
	if err != nil {
		return daemon.Options{}, err
	}
	if err := checkServeLayout(layout, time.Now(), log); err != nil {
		return daemon.Options{}, err
	}
	mode, err := node.ParseMode(defaultMode(c.String("mode"), c.String("redis")))
	if err != nil {
		return daemon.Options{}, usagef("--mode %q: want flake, counter or auto", c.String("mode"))
	}
	o := daemon.Options{Listen: c.String("listen"), MetricsAddr: c.String("metrics-addr"), HTTPListen: c.String("http-listen"), PProf: c.Bool("pprof"),
		Target: "standalone (embedded store)", ShutdownTimeout: c.Duration("shutdown-timeout")}
	if err := checkAddrs(o); err != nil {
		return daemon.Options{}, err
	}
	if err := checkNamespace(c.String("namespace")); err != nil {
		return daemon.Options{}, err
	}
	tlsConfig, err := tlsFromFlags(c)
	if err != nil {
		return daemon.Options{}, err
	}
	if !isLoopback(o.Listen) && c.String("requirepass") == "" {
		log.Warn().Str("listen", o.Listen).Msg("listening off loopback without --requirepass: anyone who reaches the port can take IDs")
	}
	if o.HTTPListen != "" && !isLoopback(o.HTTPListen) && c.String("requirepass") == "" {
		log.Warn().Str("http_listen", o.HTTPListen).Msg("HTTP API off loopback without --requirepass: anyone who reaches the port can take IDs and see the fleet")
	}
	stateFile, stateFrom, err := stateFileFromFlags(c, o.Listen)
	if err != nil {
		return daemon.Options{}, err
	}
	o.StateFrom = stateFrom
	o.Node = node.Options{
		Registry: coord.Options{
			Namespace: c.String("namespace"), Layout: layout, LeaseTTL: c.Duration("lease-ttl"),
			MaxSkew: c.Duration("max-skew"), MaxWait: c.Duration("max-wait"), ReplicaWait: c.Duration("replica-wait"), MinReplicas: minReplicasFromFlags(c),
			Owner: coord.Owner{Addr: o.Listen, Version: version}, RedisIdentity: c.String("redis-identity"),
		},
		StateFile:    stateFile,
		Mode:         mode,
		MachineIDs:   c.Int("machine-ids"),
		MaxLead:      c.Duration("max-lead"),
		ReserveAhead: c.Duration("reserve-ahead"),
		IDWait:       c.Duration("id-wait"),
		Logger:       log,
	}
	if err := contract.CheckIdentity(c.String("redis-identity")); err != nil {
		return daemon.Options{}, usagef("--redis-identity: %v", err)
	}
	if c.Duration("redis-watch-interval") <= 0 {
		return daemon.Options{}, usagef("--redis-watch-interval %v: must be > 0", c.Duration("redis-watch-interval"))
	}
	o.WatchInterval = c.Duration("redis-watch-interval")
	if off := c.Duration("test-clock-offset"); off != 0 {
		o.Node.Clock = clock.NewOffset(off)
		log.Warn().Dur("offset", off).Msg("TEST ONLY: the clock is shifted (--test-clock-offset)")
	}
	if u := c.String("redis"); u != "" {
		if o.Node.Redis, err = redisClient(u); err != nil {
			return daemon.Options{}, err
		}
		// Through Sentinel, a grant made while every Sentinel reports the
		// master up needs no replica's acknowledgement.
		if s, err := coord.NewSentinels(u); err != nil {
			o.Node.Redis.Close()
			return daemon.Options{}, usagef("--redis: %v", err)
		} else if s != nil {
			o.Node.Registry.Sentinels = s
		}
		o.Target = redactURL(u)
		if o.Checks, err = checksTarget(o.Node, u); err != nil {
			o.Node.Redis.Close()
			return daemon.Options{}, err
		}
	}
	if o.Node.Redis == nil && o.Node.StateFile == "" {
		log.Warn().Msg("standalone with --no-state-file: a restart may repeat IDs of the previous run; drop --no-state-file")
	}
	o.Server = server.Options{
		MaxConns: c.Int("max-clients"), MaxBatch: c.Int("max-batch"), MaxLine: c.Int("max-line"),
		MaxBulk: c.Int("max-bulk"), MaxArgs: c.Int("max-args"), IdleTimeout: c.Duration("idle-timeout"),
		RequirePass: c.String("requirepass"), ExecWait: c.Duration("id-wait"), TLSConfig: tlsConfig, Logger: log, Version: version,
		Loops: c.Int("io-loops"),
	}
	return o, nil
}

// checkAddrs checks --listen, --metrics-addr, --http-listen and --pprof,
// which needs --metrics-addr.
func checkAddrs(o daemon.Options) error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return usagef("--listen %q: want host:port: %v", o.Listen, err)
	}
	if o.PProf && o.MetricsAddr == "" {
		return usagef("--pprof needs --metrics-addr (it is served there)")
	}
	if o.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			return usagef("--metrics-addr %q: want host:port: %v", o.MetricsAddr, err)
		}
	}
	if o.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(o.HTTPListen); err != nil {
			return usagef("--http-listen %q: want host:port: %v", o.HTTPListen, err)
		}
	}
	return nil
}

// checksTarget is the fleet's Redis as flaked doctor's checks see it, with
// the node's settings, sending only what the node's user may
// (doctor.Target.AsNode).
func checksTarget(no node.Options, redisURL string) (doctor.Target, error) {
	ro := no.Registry
	t := doctor.Target{Redis: no.Redis, Namespace: ro.Namespace, Layout: ro.Layout, LeaseTTL: ro.LeaseTTL,
		MaxSkew: ro.MaxSkew, Clock: no.Clock, AsNode: true, IdentityNone: ro.RedisIdentity == contract.IdentityNone,
		MinReplicas: doctorMinReplicas(ro.MinReplicas)}
	return t, sentinelTarget(&t, redisURL, "")
}

// tlsFromFlags loads --tls-cert and --tls-key; nil without them.
func tlsFromFlags(c *cli.Context) (*tls.Config, error) {
	cert, key := c.String("tls-cert"), c.String("tls-key")
	if cert == "" && key == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
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

// defaultMode is --mode, or when it is not given the mode a fleet should
// run in: auto with Redis, the only mode whose callers wait no longer than
// --id-wait through a Redis restart, failover or a restart after kill -9
// (docs/decisions.md); flake standalone, where counter mode has only the
// wall clock to go on across restarts.
func defaultMode(flag, redisURL string) string {
	switch {
	case flag != "":
		return flag
	case redisURL != "":
		return node.ModeAuto.String()
	default:
		return node.ModeFlake.String()
	}
}
