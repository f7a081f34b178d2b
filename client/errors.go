package client

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// Error is returned when no daemon answered a request. It lists every
// daemon tried, in the order tried, and why each failed. It wraps
// ErrNoDaemon, each attempt's error, and the caller's context error when
// that is what ended the request, so errors.Is finds any of them.
type Error struct {
	Op       string    // the request: "NEXTID", "NEXTIDS 100", "INFO"
	Attempts []Attempt // one per daemon tried
	Ctx      error     // the caller's context error, when it stopped the request
}

// Attempt is one daemon's failure within a request.
type Attempt struct {
	Addr string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flaked client: %s: %v", e.Op, ErrNoDaemon)
	if e.Ctx != nil {
		fmt.Fprintf(&b, " before the context ended (%v)", e.Ctx)
	}
	switch len(e.Attempts) {
	case 0:
		b.WriteString("; no daemon was tried")
	case 1:
		fmt.Fprintf(&b, "; tried 1 daemon: %s: %v", e.Attempts[0].Addr, e.Attempts[0].Err)
	default:
		fmt.Fprintf(&b, "; tried %d daemons:", len(e.Attempts))
		for i, a := range e.Attempts {
			if i > 0 {
				b.WriteByte(';')
			}
			fmt.Fprintf(&b, " %s: %v", a.Addr, a.Err)
		}
	}
	return b.String()
}

// Unwrap returns ErrNoDaemon, the context error if any, and each
// attempt's error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2+len(e.Attempts))
	errs = append(errs, ErrNoDaemon)
	if e.Ctx != nil {
		errs = append(errs, e.Ctx)
	}
	for _, a := range e.Attempts {
		errs = append(errs, a.Err)
	}
	return errs
}

// explain adds to a daemon's error what it most likely means, for the
// failures users meet first. The original error stays wrapped.
func explain(err error, o *Options) error {
	msg := err.Error()
	var hint string
	var ne net.Error
	switch {
	case strings.Contains(msg, "NOAUTH"):
		hint = "the daemon requires a password: set Options.Password, or flaked://:password@host in the URL"
	case strings.Contains(msg, "WRONGPASS"):
		user := o.Username
		if user == "" {
			user = "default"
		}
		hint = fmt.Sprintf("the daemon refused user %q with this password", user)
	case strings.Contains(msg, "without any password configured"):
		hint = "the daemon has no password (--requirepass): drop Options.Password"
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = "nothing listens there: is the daemon running on this address?"
	case errors.As(err, &ne) && ne.Timeout():
		hint = fmt.Sprintf("no answer in time (DialTimeout %v, ReadTimeout %v)", o.DialTimeout, o.ReadTimeout)
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// replyError is a daemon's reply that is not what the protocol promises.
func replyError(format string, args ...any) error {
	return fmt.Errorf("bad reply: "+format, args...)
}

// lateBatchError is a prefetch batch that arrived already older than
// MaxAge.
func lateBatchError(took, maxAge time.Duration) error {
	return fmt.Errorf("flaked client: a prefetch batch took %v to arrive, more than MaxAge %v, so its IDs were dropped: raise MaxAge", took, maxAge)
}
