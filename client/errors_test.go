package client_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/server"
)

// Daemons that cannot answer: the error names each one and why, and the
// request does not outlast the timeouts.
func TestNextID_NoDaemonAnswers_ErrorNamesEach(t *testing.T) {
	refused, hung := closedAddr(t), blackHole(t)
	for _, prefetch := range []int{0, 10} {
		c := newClient(t, client.Options{
			Addrs:       []string{refused, hung},
			ReadTimeout: 100 * time.Millisecond,
			Prefetch:    prefetch,
		})
		start := time.Now()
		_, err := c.NextID(idtest.Context(t, 10*time.Second))
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("prefetch %d: NextID took %v to fail", prefetch, took)
		}
		var ce *client.Error
		if !errors.As(err, &ce) {
			t.Fatalf("prefetch %d: NextID = %v, want a *client.Error", prefetch, err)
		}
		if len(ce.Attempts) != 2 {
			t.Fatalf("prefetch %d: %d attempts, want both daemons: %v", prefetch, len(ce.Attempts), err)
		}
		if !errors.Is(err, client.ErrNoDaemon) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("prefetch %d: errors.Is(ErrNoDaemon, ECONNREFUSED) false for %v", prefetch, err)
		}
		msg := err.Error()
		for _, want := range []string{
			refused + ": dial tcp", "connection refused", "is the daemon running",
			hung + ": ", "i/o timeout", "ReadTimeout 100ms",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("prefetch %d: error %q does not say %q", prefetch, msg, want)
			}
		}
	}
}

// The caller's deadline ends the request, and the error says so.
func TestNextID_ContextDeadline(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{blackHole(t)}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.NextID(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NextID = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("NextID returned %v after its 50ms deadline", took)
	}
	if !strings.Contains(err.Error(), "before the context ended") {
		t.Errorf("error %q does not say the context ended", err)
	}
	// The caller's deadline is not the daemon's fault.
	if st := c.Stats().Daemons[0]; st.Failures != 0 || st.Down {
		t.Errorf("daemon marked failed after the caller's deadline: %+v", st)
	}
}

func TestAUTH(t *testing.T) {
	f := newFleet(t)
	d := f.start(t, server.Options{RequirePass: "s3cret"})
	ctx := idtest.Context(t, 10*time.Second)
	for _, tc := range []struct {
		name     string
		opts     client.Options
		url      string
		wantErrs []string // "" when it should work
	}{
		{"no password", client.Options{}, "", []string{"NOAUTH Authentication required", "requires a password: set Options.Password"}},
		{"wrong password", client.Options{Password: "nope"}, "", []string{"WRONGPASS", `refused user "default"`}},
		{"wrong user", client.Options{Username: "admin", Password: "s3cret"}, "", []string{"WRONGPASS", `refused user "admin"`}},
		{"password", client.Options{Password: "s3cret"}, "", nil},
		{"user and password", client.Options{Username: "default", Password: "s3cret"}, "", nil},
		{"URL", client.Options{}, "flaked://:s3cret@" + d.addr, nil},
		{"URL without password", client.Options{}, "flaked://" + d.addr, []string{"NOAUTH"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *client.Client
			if tc.url != "" {
				var err error
				if c, err = client.NewFromURL(tc.url); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
			} else {
				tc.opts.Addrs = []string{d.addr}
				c = newClient(t, tc.opts)
			}
			_, err := c.NextID(ctx)
			if tc.wantErrs == nil {
				if err != nil {
					t.Fatalf("NextID: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("NextID worked without the right password")
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), d.addr) {
				t.Errorf("error %q does not name the daemon", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	// A password for a daemon that has none.
	open := f.start(t, server.Options{})
	c := newClient(t, client.Options{Addrs: []string{open.addr}, Password: "x"})
	if _, err := c.NextID(ctx); err != nil {
		t.Errorf("a password given to a daemon without one: %v (Redis accepts it too)", err)
	}
}
