package client

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// NewFromURL returns a client for the daemons of a flaked URL; see
// ParseURL.
func NewFromURL(rawURL string) (*Client, error) {
	opts, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(opts)
}

// urlParams are the query parameters of a flaked URL, each setting one
// field of Options.
var urlParams = map[string]func(o *Options, v string) error{
	"prefetch":      intParam(func(o *Options) *int { return &o.Prefetch }),
	"max_batch":     intParam(func(o *Options) *int { return &o.MaxBatch }),
	"pool_size":     intParam(func(o *Options) *int { return &o.PoolSize }),
	"max_age":       durParam(func(o *Options) *time.Duration { return &o.MaxAge }),
	"dial_timeout":  durParam(func(o *Options) *time.Duration { return &o.DialTimeout }),
	"read_timeout":  durParam(func(o *Options) *time.Duration { return &o.ReadTimeout }),
	"write_timeout": durParam(func(o *Options) *time.Duration { return &o.WriteTimeout }),
	"down_for":      durParam(func(o *Options) *time.Duration { return &o.DownFor }),
	"skip_verify": func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		if o.TLS == nil {
			return fmt.Errorf("only with TLS (flakeds://)")
		}
		o.TLS.InsecureSkipVerify = b
		return nil
	},
}

func intParam(field func(*Options) *int) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		*field(o) = n
		return nil
	}
}

func durParam(field func(*Options) *time.Duration) func(*Options, string) error {
	return func(o *Options, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 500ms or 2s")
		}
		*field(o) = d
		return nil
	}
}

// ParseURL reads a flaked URL into Options:
//
//	flaked://[user:password@]host:port[,host2:port...][?param=value&...]
//
// flakeds:// is the same over TLS (the system's roots, each daemon's host
// name checked). Hosts without a port get 7379. User and password are
// URL-escaped; a password alone is written ":password@". Parameters,
// each setting the Options field of the same meaning: prefetch,
// max_batch, pool_size (integers), max_age, dial_timeout, read_timeout,
// write_timeout, down_for (Go durations: 500ms, 2s), skip_verify
// (flakeds only). The Options are checked as New checks them, so an
// error here names what is wrong with the URL; its password is never
// repeated in errors.
func ParseURL(rawURL string) (Options, error) {
	var o Options
	shown := redact(rawURL)
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w %q: "+format, append([]any{ErrInvalidURL, shown}, args...)...)
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	switch {
	case !ok:
		return bad("want flaked://host:port[,host:port...][?param=value...]")
	case strings.EqualFold(scheme, "flaked"):
	case strings.EqualFold(scheme, "flakeds"):
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return bad("scheme %q, want flaked:// or flakeds:// (TLS)", scheme)
	}
	rest, query, _ := strings.Cut(rest, "?")
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, pass, hasPass := strings.Cut(rest[:i], ":")
		var err error
		if o.Username, err = url.PathUnescape(user); err != nil {
			return bad("user name: %v", err)
		}
		if hasPass {
			if o.Password, err = url.PathUnescape(pass); err != nil {
				return bad("password: bad %% escape")
			}
		}
		if o.Password == "" {
			return bad("user %q without a password: write user:password@ (or :password@)", o.Username)
		}
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "/#"); i >= 0 {
		if tail := rest[i:]; tail != "/" {
			return bad("unexpected %q after the hosts: a flaked URL has no path or fragment", tail)
		}
		rest = rest[:i]
	}
	if rest == "" {
		return bad("no host: want flaked://host:port[,host:port...]")
	}
	for _, h := range strings.Split(rest, ",") {
		if h == "" {
			return bad("empty host in the list %q", rest)
		}
		o.Addrs = append(o.Addrs, h)
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	for k, vs := range values {
		set, known := urlParams[k]
		switch {
		case !known:
			return bad("unknown parameter %q: known are %s", k, strings.Join(paramNames(), ", "))
		case len(vs) > 1:
			return bad("parameter %q given %d times", k, len(vs))
		}
		if err := set(&o, vs[0]); err != nil {
			return bad("%s=%q: %v", k, vs[0], err)
		}
	}
	if _, err := o.withDefaults(); err != nil {
		return Options{}, fmt.Errorf("%w %q: %w", ErrInvalidURL, shown, err)
	}
	return o, nil
}

func paramNames() []string {
	names := make([]string, 0, len(urlParams))
	for k := range urlParams {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// redact hides the password of a URL for error messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexByte(rest, '?')
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
