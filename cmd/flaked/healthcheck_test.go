package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/testcert"
)

func TestHealthcheck(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready (mode flake)\n"))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"flaked", "healthcheck", "--url", srv.URL}, &out, &errOut); code != exitOK {
		t.Fatalf("ready endpoint: exit %d, %s", code, errOut.String())
	}
	ready = false
	errOut.Reset()
	if code := run([]string{"flaked", "healthcheck", "--url", srv.URL}, &out, &errOut); code != exitFailure || !bytes.Contains(errOut.Bytes(), []byte("503")) {
		t.Fatalf("unready endpoint: exit %d, %q; want 1 naming the 503", code, errOut.String())
	}
	if code := run([]string{"flaked", "healthcheck", "--url", "http://127.0.0.1:1/readyz"}, &out, &errOut); code != exitFailure {
		t.Fatalf("nothing listening: exit %d", code)
	}
	if code := run([]string{"flaked", "healthcheck", "--timeout", "0s"}, &out, &errOut); code != exitUsage {
		t.Fatalf("--timeout 0: exit %d, want 2", code)
	}
}

// healthcheck with no flags finds a daemon started with none (the README's
// `flaked serve` then `flaked healthcheck`), and with the daemon's
// --requirepass and --tls-cert one started with them; a wrong password, a
// certificate other than the daemon's and a port nobody serves are exit 1.
func TestHealthcheck_SpeaksTheDaemonsProtocol(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.WritePEM(t, testcert.SelfSigned(t), dir)
	otherDir := t.TempDir()
	otherCert, _ := testcert.WritePEM(t, testcert.SelfSigned(t), otherDir)
	for _, tc := range []struct {
		name  string
		serve []string // extra serve flags
		ok    []string // healthcheck flags that pass
		bad   []string // healthcheck flags that fail
	}{
		{"plain", nil, nil, []string{"--tls-cert", certFile}},
		{"requirepass", []string{"--requirepass", "s3cret"}, []string{"--requirepass", "s3cret"}, []string{"--requirepass", "wrong"}},
		{"tls", []string{"--tls-cert", certFile, "--tls-key", keyFile}, []string{"--tls-cert", certFile}, []string{"--tls-cert", otherCert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := redistest.FreeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			var logs idtest.LogBuffer
			done := make(chan error, 1)
			go func() {
				done <- newApp(io.Discard, &logs).RunContext(ctx, append([]string{"flaked", "serve", "--listen", listen,
					"--state-file", filepath.Join(t.TempDir(), "node.state"), "--log-format", "json"}, tc.serve...))
			}()
			defer func() {
				cancel()
				<-done
			}()
			poll.UntilNil(t, 20*time.Second, "flaked serving", func() error {
				if !strings.Contains(logs.String(), `"message":"flaked serving"`) {
					return fmt.Errorf("not serving:\n%s", logs.String())
				}
				return nil
			})
			// The listen address reaches healthcheck as it reaches serve
			// in a container: through FLAKED_LISTEN.
			env := map[string]string{"FLAKED_LISTEN": listen}
			if code, out, errOut := runT(t, env, append([]string{"healthcheck"}, tc.ok...)...); code != exitOK || !strings.Contains(out, "ready (mode flake)") {
				t.Fatalf("healthcheck %v: exit %d, %q %q; want 0 and ready", tc.ok, code, out, errOut)
			}
			if code, _, errOut := runT(t, env, append([]string{"healthcheck"}, tc.bad...)...); code != exitFailure {
				t.Fatalf("healthcheck %v: exit %d, %q; want 1", tc.bad, code, errOut)
			}
		})
	}
	if code, _, errOut := runT(t, nil, "healthcheck", "--listen", redistest.FreeAddr(t), "--timeout", "500ms"); code != exitFailure || !strings.Contains(errOut, "--listen") {
		t.Fatalf("nothing listening: exit %d, %q; want 1 naming --listen", code, errOut)
	}
}

func TestHealthcheck_Loopback(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:7379": "127.0.0.1:7379", "[::]:7379": "127.0.0.1:7379", ":7379": "127.0.0.1:7379", "10.0.0.1:7379": "10.0.0.1:7379"} {
		if got := loopback(in); got != want {
			t.Errorf("loopback(%q) = %q, want %q", in, got, want)
		}
	}
}
