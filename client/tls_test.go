package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/server"
)

// selfSigned is a certificate for 127.0.0.1, its own CA.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// A daemon serving TLS: the client verifies its certificate when given
// the CA, refuses it otherwise, and flakeds:// with skip_verify reaches it.
func TestTLS(t *testing.T) {
	cert := selfSigned(t)
	f := newFleet(t)
	d := f.start(t, server.Options{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, RequirePass: "pw"})
	ctx := ctxT(t, 10*time.Second)

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
