package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/testcert"
	"github.com/flaked/flaked/seq"
)

// --http-listen serves the API and the page with the Redis side's TLS
// certificate and --requirepass as the token, the fleet read from the
// node's Redis; /metrics has the HTTP API's counters and the alarm
// metrics the alert rules use. A node of a real Redis, in-process.
func TestServe_HTTPListen_TLSTokenFleetMetrics(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	if err := redistest.InitRegistry(context.Background(), srv.Client(t), coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	cert := testcert.SelfSigned(t)
	certFile, keyFile := testcert.WritePEM(t, cert, t.TempDir())
	listen, metrics, api := redistest.FreeAddr(t), redistest.FreeAddr(t), redistest.FreeAddr(t)
	d := startServe(t, "--listen", listen, "--metrics-addr", metrics, "--http-listen", api, "--redis", srv.URL(),
		"--tls-cert", certFile, "--tls-key", keyFile, "--requirepass", "s3cret", "--no-state-file")
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(url string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer s3cret")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("https://"+api+"/v1/id", false); code != 401 {
		t.Errorf("/v1/id without the token: %d %s", code, body)
	}
	code, body := get("https://"+api+"/v1/id", true)
	var one struct{ ID string }
	if code != 200 || json.Unmarshal([]byte(body), &one) != nil {
		t.Fatalf("/v1/id: %d %s", code, body)
	}
	if _, err := strconv.ParseUint(one.ID, 10, 64); err != nil {
		t.Fatalf("/v1/id: id %q", one.ID)
	}
	// The daemon's generator has named sequences: /v1/seq answers on it.
	sq, err := seq.New(srv.Client(t), seq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := idtest.Context(t, 30*time.Second)
	defer sq.Close(ctx)
	if err := sq.Create(ctx, "orders", seq.TagOptions{Start: 1000}); err != nil {
		t.Fatal(err)
	}
	if code, body := get("https://"+api+"/v1/seq/orders?n=2", true); code != 200 || body != `{"tag":"orders","values":[1000,1001]}`+"\n" {
		t.Errorf("/v1/seq/orders?n=2: %d %s", code, body)
	}
	if resp, err := http.Get("http://" + api + "/v1/id"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("plain HTTP on the TLS listener: %d, want Go's 400 refusal", resp.StatusCode)
		}
	}
	code, body = get("https://"+api+"/", true)
	if code != 200 || !strings.Contains(body, `<table id="fleet">`) || strings.Contains(body, "fleet-error") {
		t.Errorf("the status page: %d, no fleet table or an error:\n%.3000s", code, body)
	}
	code, body = get("http://"+metrics+"/metrics", false)
	for _, want := range []string{`flaked_http_requests_total{code="200",route="id"} 1`, `flaked_http_requests_total{code="401",route="id"} 1`,
		"flaked_http_ids_issued_total 1", "flaked_http_seq_values_issued_total 2", "flaked_node_leases_lost_total 0", "flaked_node_leases_fenced_total 0",
		"flaked_node_data_losses_total 0", "flaked_node_clones_total 0", "flaked_layout_end_timestamp_seconds 7.23324773888e+09"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	d.stop()
	if err := <-d.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// A --http-listen that is no host:port is a usage error.
func TestServe_HTTPListen_Invalid_Exit2(t *testing.T) {
	code, _, errs := runT(t, nil, "serve", "--listen", "127.0.0.1:1", "--http-listen", "8080")
	if code != exitUsage || !strings.Contains(errs, "--http-listen") {
		t.Errorf("exit %d, stderr %q; want 2 naming --http-listen", code, errs)
	}
}
