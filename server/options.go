package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Options.
const (
	DefaultMaxConns = 10000
	DefaultMaxBatch = 10000
	DefaultMaxLine  = 64 << 10 // Redis's inline request limit
	DefaultMaxBulk  = 64 << 10
	DefaultMaxArgs  = 1024
)

// Bounds of Options.
const (
	MaxMaxConns = 1_000_000
	MaxMaxBatch = 1_000_000
	MinMaxLine  = 64
	MaxMaxLine  = 64 << 20
	MinMaxBulk  = 64
	MaxMaxBulk  = 512 << 20 // Redis's proto-max-bulk-len default
	MinMaxArgs  = 8         // HELLO 2 AUTH user pass SETNAME name
	MaxMaxArgs  = 1 << 20
	MaxLoops    = 1024
)

// ErrInvalidOptions is wrapped by New's errors about Options.
var ErrInvalidOptions = errors.New("invalid server options")

// Options configure a Server. The zero value serves with the defaults: no
// password, no TLS, no idle timeout, silent logs.
//
// One RESP request is buffered whole before it runs, so a client can make
// the server hold at most about MaxArgs × (MaxBulk + 24) bytes for it.
type Options struct {
	// MaxConns is how many client connections are served at once:
	// 1..1,000,000, 0 means 10,000. The next one is answered
	// "-ERR max number of clients reached" and closed.
	MaxConns int
	// MaxBatch is the largest count NEXTIDS accepts: 1..1,000,000,
	// 0 means 10,000.
	MaxBatch int
	// MaxLine is the longest inline request (a line of text, as nc or
	// telnet send), in bytes before its newline; it also bounds the header
	// lines of RESP requests: 64..64 MiB, 0 means 64 KiB.
	MaxLine int
	// MaxBulk is the longest argument of a RESP request, in bytes:
	// 64..512 MiB, 0 means 64 KiB.
	MaxBulk int
	// MaxArgs is the most arguments (command name included) of one
	// request: 8..1,048,576, 0 means 1024.
	MaxArgs int
	// IdleTimeout closes a connection that sends no complete request for
	// this long, and bounds how long a reply may wait for a client that
	// does not read it, and a TLS handshake: >= 0, 0 means never (TLS
	// handshakes then get 10 s).
	IdleTimeout time.Duration
	// ExecWait bounds the waits for IDs of one MULTI/EXEC as a whole, so
	// a transaction of k requests does not wait k times each one's bound:
	// past it the requests left answer errors. >= 0, 0 means none beyond
	// each request's own; flaked serve sets it to --id-wait.
	ExecWait time.Duration
	// RequirePass, when not empty, is the password of the "default" user:
	// until AUTH (or HELLO ... AUTH) gives it, every command but AUTH,
	// HELLO and QUIT is answered "-NOAUTH Authentication required.".
	RequirePass string
	// TLSConfig, when set, makes Serve speak TLS on its listener.
	TLSConfig *tls.Config
	// Logger receives connection, abuse and panic logs; the zero Logger
	// is silent. Repeated warnings (abuse, rejected clients, generator
	// errors) are sampled to a few per second.
	Logger zerolog.Logger
	// Loops is the number of epoll event loops that serve plain TCP
	// connections on Linux (loop_linux.go): 1..1024; 0 means
	// DefaultLoops(); -1 means none, a goroutine per connection (always the
	// case with TLS, elsewhere than Linux, or with a generator that is not
	// a node.TryGenerator).
	Loops int
	// Version is what INFO reports as flaked_version (HELLO and INFO's
	// redis_version report RedisVersion); "" means the
	// main module's version from the build info, or "dev".
	Version string
}

const defaultHandshakeTimeout = 10 * time.Second

// DefaultLoops is the number of event loops when Options.Loops is 0: one
// per two of the cores Go may use (GOMAXPROCS), at least one. Each loop
// keeps a core busy under load the way redis-server's one thread does, and
// leaves the others to the node's own goroutines, the handed-off
// connections and the kernel's network work.
func DefaultLoops() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func (o Options) withDefaults() (Options, error) {
	def := func(v *int, d, lo, hi int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < lo || *v > hi {
			return fmt.Errorf("%w: %s %d, valid range is %d..%d (0 means %d)", ErrInvalidOptions, name, *v, lo, hi, d)
		}
		return nil
	}
	err := errors.Join(
		def(&o.MaxConns, DefaultMaxConns, 1, MaxMaxConns, "MaxConns"),
		def(&o.MaxBatch, DefaultMaxBatch, 1, MaxMaxBatch, "MaxBatch"),
		def(&o.MaxLine, DefaultMaxLine, MinMaxLine, MaxMaxLine, "MaxLine"),
		def(&o.MaxBulk, DefaultMaxBulk, MinMaxBulk, MaxMaxBulk, "MaxBulk"),
		def(&o.MaxArgs, DefaultMaxArgs, MinMaxArgs, MaxMaxArgs, "MaxArgs"),
	)
	switch {
	case o.Loops == 0:
		o.Loops = DefaultLoops()
	case o.Loops < -1 || o.Loops > MaxLoops:
		err = errors.Join(err, fmt.Errorf("%w: Loops %d, valid range is 1..%d (0 means %d here, -1 means none)", ErrInvalidOptions, o.Loops, MaxLoops, DefaultLoops()))
	}
	if o.ExecWait < 0 {
		err = errors.Join(err, fmt.Errorf("%w: ExecWait %v, must be >= 0 (0 means none)", ErrInvalidOptions, o.ExecWait))
	}
	if o.IdleTimeout < 0 {
		err = errors.Join(err, fmt.Errorf("%w: IdleTimeout %v, must be >= 0 (0 means none)", ErrInvalidOptions, o.IdleTimeout))
	}
	if err != nil {
		return o, err
	}
	if o.Version == "" {
		o.Version = "dev"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			o.Version = bi.Main.Version
		}
	}
	return o, nil
}
