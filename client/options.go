package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultPort        = 7379
	DefaultDialTimeout = time.Second
	DefaultReadTimeout = 2 * time.Second
	DefaultMaxBatch    = 10_000 // the daemon's default max-batch
	DefaultMaxAge      = time.Second
	DefaultDownFor     = time.Second
	// DefaultWait is Options.Wait: no call waits more than a second for
	// an ID. The daemons' --id-wait (900ms) is shorter, so a
	// daemon's reply naming why it has no ID arrives within it.
	DefaultWait = time.Second
)

// Bounds of Options and arguments.
const (
	MaxAddrs    = 64
	MaxPoolSize = 10_000
	MaxMaxBatch = 1_000_000 // the daemon's largest max-batch
	MaxNextIDs  = 10_000_000
	// MaxBlock is the largest block NextID asks for (NEXTBLOCK's count,
	// Stats.BlockSize): the daemons' limit, server.MaxBlock, which they
	// refuse to exceed.
	MaxBlock   = 1 << 24
	MinTimeout = time.Millisecond
	MaxTimeout = time.Hour
)

// Sentinel errors; the errors returned wrap them and say what was wrong.
var (
	ErrInvalidOptions = errors.New("invalid client options")
	ErrInvalidURL     = errors.New("invalid flaked URL")
	ErrInvalidCount   = errors.New("invalid ID count")
	ErrClosed         = errors.New("client is closed")
	// ErrNoDaemon is wrapped by *Error: no daemon gave an answer.
	ErrNoDaemon = errors.New("no daemon answered")
)

// Options configure a Client. Only Addrs is required; the zero value of
// every other field means its default.
type Options struct {
	// Addrs are the daemons, "host:port" each ("host" alone means port
	// 7379; IPv6 as "[::1]:7379"): 1..64 of them, no repeats.
	Addrs []string
	// Username and Password authenticate each connection (HELLO 2 AUTH,
	// then AUTH for older servers). Username "" with a Password means the
	// daemon's only user, "default".
	Username string
	Password string
	// TLS, when set, makes every connection speak TLS with this config.
	// When its ServerName is empty each daemon's host name is checked.
	TLS *tls.Config
	// DialTimeout bounds connecting to one daemon: 1ms..1h, default 1s.
	// A daemon that does not accept in time is failed over.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for one daemon's reply: 1ms..1h, default
	// 2s. It should exceed the daemons' max-lead (default 1s), the longest
	// a healthy daemon may hold a NEXTID at its sustained rate limit; past
	// it the request goes to the next daemon and the late reply is
	// discarded with its connection.
	ReadTimeout time.Duration
	// WriteTimeout bounds sending one request: 1ms..1h, default
	// ReadTimeout.
	WriteTimeout time.Duration
	// PoolSize is the most connections kept to each daemon: 1..10,000,
	// default go-redis's (10 per GOMAXPROCS).
	PoolSize int
	// MaxBatch is the largest count sent in one NEXTIDS command (keep it
	// at most the daemons' max-batch): 1..1,000,000, default 10,000.
	// NextIDs asks for more as several commands pipelined on one
	// connection.
	MaxBatch int
	// Prefetch, when > 0, serves NextID from blocks (NEXTBLOCK: a block
	// is a few integers, its IDs are handed out in process with one
	// atomic add each), the next fetched in the background when half of
	// the current one is used. Prefetch is the first blocks' size and the
	// smallest: a block used up before the next one arrived, or that
	// lasted less than MaxAge/8, makes the next one twice as large, up to
	// MaxBlock, and one that lasted more than MaxAge/2 halves it
	// (Stats.BlockSize). Daemons that predate NEXTBLOCK are asked for
	// NEXTIDS batches of Prefetch IDs instead, fetched when one batch or
	// less is left (so up to two wait): 1..MaxBatch, default 0 (every
	// NextID is a round trip).
	Prefetch int
	// MaxAge is how long prefetched IDs may wait in the buffer, counted
	// from when their batch was requested (for a block, from the earlier
	// of that and its first ID's tick: its IDs expire with their ticks);
	// older ones are dropped unused, so IDs handed out stay close to real
	// time: 1ms..1h, default 1s. Only with Prefetch.
	MaxAge time.Duration
	// Wait bounds one call as a whole (NextID, NextIDs, NextSeq,
	// NextSeqs), every retry and failover included, when the caller's
	// context ends later: 1ms..1h, default 1s. Past it the call fails with
	// what each daemon tried answered (an *Error with the context's
	// error). A NextID served from blocks waits for a block as long as
	// its context allows instead: Wait bounds each refill, and a refill
	// that fails ends the wait with that error.
	Wait time.Duration
	// DownFor is how long a daemon that failed is tried only after the
	// others: 1ms..1h, default 1s. It is never skipped: when every daemon
	// is down, all are still tried.
	DownFor time.Duration
	// Now is the clock for MaxAge and DownFor; nil means time.Now. Tests
	// set it to drive time.
	Now func() time.Time

	// nextIDsPrefetch makes Prefetch use NEXTIDS batches even when the
	// daemons have NEXTBLOCK (benchmarks compare the two).
	nextIDsPrefetch bool
}

// withDefaults checks o and fills in the defaults. Addresses get their
// port and lose nothing else.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	switch {
	case len(o.Addrs) == 0:
		bad("no daemon address: want 1..%d \"host:port\" in Addrs", MaxAddrs)
	case len(o.Addrs) > MaxAddrs:
		bad("%d daemon addresses, valid range is 1..%d", len(o.Addrs), MaxAddrs)
	}
	addrs := make([]string, 0, len(o.Addrs))
	seen := map[string]bool{}
	for _, a := range o.Addrs {
		norm, err := normalizeAddr(a)
		if err != nil {
			bad("%v", err)
			continue
		}
		if seen[norm] {
			bad("daemon address %q given twice", a)
			continue
		}
		seen[norm] = true
		addrs = append(addrs, norm)
	}
	o.Addrs = addrs
	if o.Username != "" && o.Password == "" {
		bad("username %q without a password", o.Username)
	}

	dur := func(v *time.Duration, def time.Duration, name string) {
		if *v == 0 {
			*v = def
		}
		if *v < MinTimeout || *v > MaxTimeout {
			bad("%s %v, valid range is %v..%v (0 means %v)", name, *v, MinTimeout, MaxTimeout, def)
		}
	}
	dur(&o.DialTimeout, DefaultDialTimeout, "DialTimeout")
	dur(&o.ReadTimeout, DefaultReadTimeout, "ReadTimeout")
	dur(&o.WriteTimeout, o.ReadTimeout, "WriteTimeout")
	dur(&o.DownFor, DefaultDownFor, "DownFor")
	dur(&o.Wait, DefaultWait, "Wait")

	if o.PoolSize < 0 || o.PoolSize > MaxPoolSize {
		bad("PoolSize %d, valid range is 1..%d (0 means go-redis's default)", o.PoolSize, MaxPoolSize)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatch < 1 || o.MaxBatch > MaxMaxBatch {
		bad("MaxBatch %d, valid range is 1..%d (0 means %d)", o.MaxBatch, MaxMaxBatch, DefaultMaxBatch)
	}
	if o.Prefetch < 0 || o.Prefetch > o.MaxBatch {
		bad("Prefetch %d, valid range is 0..MaxBatch (%d); 0 means no prefetch", o.Prefetch, o.MaxBatch)
	}
	if o.MaxAge != 0 && o.Prefetch == 0 {
		bad("MaxAge %v without Prefetch: MaxAge bounds the age of prefetched IDs", o.MaxAge)
	}
	dur(&o.MaxAge, DefaultMaxAge, "MaxAge")
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, errors.Join(errs...)
}

// normalizeAddr checks a daemon address and adds the default port.
func normalizeAddr(a string) (string, error) {
	if a == "" {
		return "", errors.New("empty daemon address: want \"host:port\"")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		// "host" or "::1" alone: the default port.
		if ip := net.ParseIP(a); ip != nil || !strings.ContainsAny(a, ":[]") {
			host, port = a, strconv.Itoa(DefaultPort)
		} else {
			return "", fmt.Errorf("daemon address %q: want \"host:port\" (IPv6 as \"[::1]:7379\")", a)
		}
	}
	if host == "" {
		return "", fmt.Errorf("daemon address %q has no host: want \"host:port\"", a)
	}
	if strings.ContainsAny(host, " /?#@,") {
		return "", fmt.Errorf("daemon address %q: host %q is not a host name or IP address", a, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("daemon address %q: port %q, want a number in 1..65535", a, port)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
