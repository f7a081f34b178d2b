package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
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
