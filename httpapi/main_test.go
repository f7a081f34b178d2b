package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/testcert"
	"github.com/flaked/flaked/node"
)

// ctxT bounds a test's calls: 30 s.
func ctxT(t *testing.T) context.Context { return idtest.Context(t, 30*time.Second) }

// standalone starts a node on its embedded store: a real generator.
func standalone(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.New(ctxT(t), node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// initRegistry makes the registry of the default namespace and layout on
// rdb, as flaked init does for a new fleet (redistest.InitRegistry): the
// nodes of the tests on Redis start only once it is there.
func initRegistry(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
}

// served is the handler running on a real loopback TCP listener.
type served struct {
	base   string // http://127.0.0.1:port or https://...
	client *http.Client
	caFile string // the TLS certificate (its own CA), "" for plain
}

// serve runs New(o) on 127.0.0.1:0, over TLS when tlsOn (a self-signed
// certificate the client trusts).
func serve(t *testing.T, o Options, tlsOn bool) *served {
	t.Helper()
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 20 * time.Second}}
	if tlsOn {
		cert := testcert.SelfSigned(t)
		s.caFile, _ = testcert.WritePEM(t, cert, t.TempDir())
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		pool := x509.NewCertPool()
		pool.AddCert(cert.Leaf)
		s.base = "https://" + ln.Addr().String()
		s.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return s
}

// do sends a request and returns the status, the headers and the body.
func (s *served) do(t *testing.T, method, path string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// getJSON GETs path, wants status code and decodes the body into v, with
// unknown fields refused.
func (s *served) getJSON(t *testing.T, path string, code int, v any, hdr ...string) http.Header {
	t.Helper()
	got, h, b := s.do(t, http.MethodGet, path, hdr...)
	if got != code {
		t.Fatalf("GET %s: %d %s, want %d", path, got, b, code)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q, want application/json", path, ct)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("GET %s: %s: %v", path, b, err)
	}
	return h
}

// ci reports whether the tests run under CI=true, where a missing tool
// fails instead of skipping.
func ci() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// need returns the path of bin; without it the test is skipped, or fails
// under CI=true.
func need(t *testing.T, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		msg := bin + " not found in PATH; install the Debian package " + pkg + " (scripts/test does as root)"
		if ci() {
			t.Fatalf("%s (CI=true: this test fails instead of skipping)", msg)
		}
		t.Skip(msg)
	}
	return p
}
