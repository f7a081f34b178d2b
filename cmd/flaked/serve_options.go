package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/flaked/flaked/statefile"

	"github.com/flaked/flaked/clock"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// serveOptions are serve's flags, checked: what the node, the server and
// the listeners are made of.
type serveOptions struct {
	node            node.Options // its Redis, if any, is serve's to close
	server          server.Options
	listen          string
	metricsAddr     string // "" for no HTTP side
	httpListen      string // "" for no HTTP API
	pprof           bool
	target          string // the fleet's Redis (password hidden) or the embedded store, for the log
	stateFrom       string // where the state file's name came from, for the log
	shutdownTimeout time.Duration
	redisURL        string        // --redis, for the checks (doctor.Target)
	watchInterval   time.Duration // of redisWatch
}

// serveOptionsFromFlags checks what the flags' parsing could not (the
// ranges it did) and warns about settings that work but are risky. Its
// errors are usage errors; it connects to nothing.
func serveOptionsFromFlags(c *cli.Context, log zerolog.Logger) (serveOptions, error) {
	layout, err := layoutFromFlags(c)
	if err != nil {
		return serveOptions{}, err
	}
	if err := checkServeLayout(layout, time.Now(), log); err != nil {
		return serveOptions{}, err
	}
	mode, err := node.ParseMode(defaultMode(c.String("mode"), c.String("redis")))
	if err != nil {
		return serveOptions{}, usagef("--mode %q: want flake, counter or auto", c.String("mode"))
	}
	o := serveOptions{listen: c.String("listen"), metricsAddr: c.String("metrics-addr"), httpListen: c.String("http-listen"), pprof: c.Bool("pprof"),
		target: "standalone (embedded store)", shutdownTimeout: c.Duration("shutdown-timeout")}
	if err := o.checkAddrs(); err != nil {
		return serveOptions{}, err
	}
	if err := checkNamespace(c.String("namespace")); err != nil {
		return serveOptions{}, err
	}
	tlsConfig, err := tlsFromFlags(c)
	if err != nil {
		return serveOptions{}, err
	}
	if !isLoopback(o.listen) && c.String("requirepass") == "" {
		log.Warn().Str("listen", o.listen).Msg("listening off loopback without --requirepass: anyone who reaches the port can take IDs")
	}
	if o.httpListen != "" && !isLoopback(o.httpListen) && c.String("requirepass") == "" {
		log.Warn().Str("http_listen", o.httpListen).Msg("HTTP API off loopback without --requirepass: anyone who reaches the port can take IDs and see the fleet")
	}
	stateFile, stateFrom, err := stateFileFromFlags(c, o.listen)
	if err != nil {
		return serveOptions{}, err
	}
	o.stateFrom = stateFrom
	o.node = node.Options{
		Registry: coord.Options{
			Namespace: c.String("namespace"), Layout: layout, LeaseTTL: c.Duration("lease-ttl"),
			MaxSkew: c.Duration("max-skew"), MaxWait: c.Duration("max-wait"), ReplicaWait: c.Duration("replica-wait"), MinReplicas: minReplicasFromFlags(c),
			Owner: coord.Owner{Addr: o.listen, Version: version}, RedisIdentity: c.String("redis-identity"),
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
		return serveOptions{}, usagef("--redis-identity: %v", err)
	}
	if c.Duration("redis-watch-interval") <= 0 {
		return serveOptions{}, usagef("--redis-watch-interval %v: must be > 0", c.Duration("redis-watch-interval"))
	}
	o.watchInterval = c.Duration("redis-watch-interval")
	if u := c.String("redis"); u != "" {
		o.redisURL = u
		if o.node.Redis, err = redisClient(u); err != nil {
			return serveOptions{}, err
		}
		o.target = redactURL(u)
	}
	if off := c.Duration("test-clock-offset"); off != 0 {
		o.node.Clock = clock.NewOffset(off)
		log.Warn().Dur("offset", off).Msg("TEST ONLY: the clock is shifted (--test-clock-offset)")
	}
	if o.node.Redis == nil && o.node.StateFile == "" {
		log.Warn().Msg("standalone with --no-state-file: a restart may repeat IDs of the previous run; drop --no-state-file")
	}
	o.server = server.Options{
		MaxConns: c.Int("max-clients"), MaxBatch: c.Int("max-batch"), MaxLine: c.Int("max-line"),
		MaxBulk: c.Int("max-bulk"), MaxArgs: c.Int("max-args"), IdleTimeout: c.Duration("idle-timeout"),
		RequirePass: c.String("requirepass"), ExecWait: c.Duration("id-wait"), TLSConfig: tlsConfig, Logger: log, Version: version,
		Loops: c.Int("io-loops"),
	}
	return o, nil
}

// checkAddrs checks --listen, --metrics-addr, --http-listen and --pprof,
// which needs --metrics-addr.
func (o serveOptions) checkAddrs() error {
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return usagef("--listen %q: want host:port: %v", o.listen, err)
	}
	if o.pprof && o.metricsAddr == "" {
		return usagef("--pprof needs --metrics-addr (it is served there)")
	}
	if o.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.metricsAddr); err != nil {
			return usagef("--metrics-addr %q: want host:port: %v", o.metricsAddr, err)
		}
	}
	if o.httpListen != "" {
		if _, _, err := net.SplitHostPort(o.httpListen); err != nil {
			return usagef("--http-listen %q: want host:port: %v", o.httpListen, err)
		}
	}
	return nil
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
