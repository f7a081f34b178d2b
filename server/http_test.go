package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	reg := prometheus.NewRegistry()
	h, err := NewHTTPHandler(ts.Server, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewHTTPHandler(ts.Server, reg); err == nil {
		t.Error("registering the metrics twice did not fail")
	}
	web := httptest.NewServer(h)
	defer web.Close()

	rdb := ts.client(t, nil)
	ctx := context.Background()
	rdb.Do(ctx, "NEXTIDS", 7)
	rdb.Do(ctx, "NEXTID")
	rdb.Do(ctx, "NOSUCH")
	ts.gen.g.Close()
	rdb.Do(ctx, "NEXTID") // fails: counted as an error, not as an ID

	code, body := get(t, web.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`flaked_ids_issued_total{mode="flake"} 8`,
		`flaked_ids_issued_total{mode="counter"} 0`,
		`flaked_nextid_errors_total 1`,
		`flaked_connections 1`,
		`flaked_connections_total 1`,
		`flaked_commands_total{command="nextid"} 2`,
		`flaked_commands_total{command="nextids"} 1`,
		`flaked_commands_total{command="unknown"} 1`,
		`flaked_mode{mode="flake"} 1`,
		`flaked_mode{mode="counter"} 0`,
		`flaked_ready 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if code, body := get(t, web.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %q", code, body)
	}
	ts.gen.notReady.Store(true)
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") || !strings.Contains(body, "machine_ids:1") {
		t.Errorf("/readyz when not ready = %d %q", code, body)
	}
	if _, body := get(t, web.URL+"/metrics"); !strings.Contains(body, "flaked_ready 0\n") {
		t.Error("flaked_ready is not 0 when not ready")
	}
	ts.shutdown(t)
	if code, _ := get(t, web.URL+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz after Shutdown = %d", code)
	}
}
