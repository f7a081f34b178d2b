package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/testcert"
	"github.com/flaked/flaked/server"
)

// A daemon serving TLS: the client verifies its certificate when given
// the CA, refuses it otherwise, and flakeds:// with skip_verify reaches it.
func TestTLS(t *testing.T) {
	cert := testcert.SelfSigned(t)
	f := newFleet(t)
	d := f.start(t, server.Options{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, RequirePass: "pw"})
	ctx := idtest.Context(t, 10*time.Second)

	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	c := newClient(t, client.Options{Addrs: []string{d.addr}, Password: "pw", TLS: &tls.Config{RootCAs: roots}})
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("NextID over TLS: %v", err)
	}

	c, err := client.NewFromURL("flakeds://:pw@" + d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.NextID(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("NextID with an unknown CA = %v, want a certificate error", err)
	}

	c, err = client.NewFromURL("flakeds://:pw@" + d.addr + "?skip_verify=true")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("NextID over TLS, skip_verify: %v", err)
	}

	// Plain text to a TLS daemon fails clearly too, and does not hang.
	c = newClient(t, client.Options{Addrs: []string{d.addr}, Password: "pw", ReadTimeout: 200 * time.Millisecond})
	if _, err := c.NextID(ctx); err == nil {
		t.Fatal("NextID in plain text to a TLS daemon worked")
	}
}
