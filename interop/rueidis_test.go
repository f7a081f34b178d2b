package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestRueidis runs rueidis with its defaults (RESP3, client-side caching,
// so CLIENT TRACKING at connect) over plain TCP, AUTH and TLS.
func TestRueidis(t *testing.T) {
	f := startFlavours(t)
	for _, c := range []struct {
		d   *daemon
		opt rueidis.ClientOption
	}{
		{f.plain, rueidis.ClientOption{}},
		{f.auth, rueidis.ClientOption{Password: password}},
		{f.tls, rueidis.ClientOption{TLSConfig: &tls.Config{RootCAs: caPool(t, f.ca)}}},
	} {
		t.Run(c.d.name, func(t *testing.T) {
			c.opt.InitAddress = []string{c.d.addr()}
			rc, err := rueidis.NewClient(c.opt)
			if err != nil {
				t.Fatalf("rueidis.NewClient with its defaults: %v", err)
			}
			defer rc.Close()
			r := rueidisRun{t: t, c: rc, d: c.d}
			r.layout = r.layoutOf()
			t.Run("tracking", r.tracking)
			t.Run("NEXTID", r.nextID)
			t.Run("NEXTID STRING", r.nextIDString)
			t.Run("NEXTIDS", r.nextIDs)
			t.Run("INFO", r.info)
			t.Run("pipeline", r.pipeline)
			t.Run("transaction", r.transaction)
			t.Run("reconnect", r.reconnect)
		})
	}
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", file)
	}
	return p
}

// rueidisRun is one client's checks against one daemon.
type rueidisRun struct {
	t      *testing.T
	c      rueidis.Client
	d      *daemon
	layout daemonLayout
}

func (r rueidisRun) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (r rueidisRun) do(t *testing.T, args ...string) rueidis.RedisResult {
	t.Helper()
	return r.c.Do(r.ctx(t), r.c.B().Arbitrary(args...).Build())
}

func (r rueidisRun) layoutOf() daemonLayout {
	r.t.Helper()
	info, err := r.do(r.t, "INFO", "flaked").ToString()
	if err != nil {
		r.t.Fatalf("INFO flaked: %v", err)
	}
	l, err := layoutFromInfo(info)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

// checkExact asks PARSE for text's parts and checks them against it.
func (r rueidisRun) checkExact(t *testing.T, text string) {
	t.Helper()
	parts, err := r.do(t, "PARSE", text).ToArray()
	if err != nil || len(parts) != 5 {
		t.Fatalf("PARSE %s: %v (%d parts)", text, err, len(parts))
	}
	var n [3]int64
	for i := range n {
		if n[i], err = parts[i+1].AsInt64(); err != nil {
			t.Fatalf("PARSE %s part %d: %v", text, i+1, err)
		}
	}
	mode, _ := parts[4].ToString()
	if err := r.layout.exact(text, n[0], n[1], n[2], mode); err != nil {
		t.Error(err)
	}
}

// tracking: rueidis turned client-side caching on at connect (CLIENT
// TRACKING ON OPTIN), as it does by default; the daemon says so.
func (r rueidisRun) tracking(t *testing.T) {
	info, err := r.do(t, "CLIENT", "TRACKINGINFO").AsMap()
	if err != nil {
		t.Fatalf("CLIENT TRACKINGINFO: %v", err)
	}
	f := info["flags"]
	flags, err := f.AsStrSlice()
	if err != nil || !slices.Contains(flags, "on") {
		t.Errorf("CLIENT TRACKINGINFO flags %v (%v): rueidis's default turns tracking on", flags, err)
	}
}

func (r rueidisRun) nextID(t *testing.T) {
	id, err := r.do(t, "NEXTID").AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	r.checkExact(t, strconv.FormatInt(id, 10))
}

func (r rueidisRun) nextIDString(t *testing.T) {
	id, err := r.do(t, "NEXTID", "STRING").ToString()
	if err != nil {
		t.Fatal(err)
	}
	r.checkExact(t, id)
}

func (r rueidisRun) nextIDs(t *testing.T) {
	ids, err := r.do(t, "NEXTIDS", "100").AsIntSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 100 {
		t.Fatalf("%d IDs, want 100", len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d follows %d", ids[i], ids[i-1])
		}
	}
	r.checkExact(t, strconv.FormatInt(ids[99], 10))
}

func (r rueidisRun) info(t *testing.T) {
	info, err := r.do(t, "INFO").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nmode:flake", "\nready:1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO has no %q:\n%s", want[1:], info)
		}
	}
}

// pipeline: DoMulti writes the commands together and reads the replies.
func (r rueidisRun) pipeline(t *testing.T) {
	b := r.c.B()
	res := r.c.DoMulti(r.ctx(t), b.Arbitrary("NEXTID").Build(), b.Arbitrary("NEXTIDS", "3").Build(), b.Ping().Build())
	one, err1 := res[0].AsInt64()
	three, err2 := res[1].AsIntSlice()
	pong, err3 := res[2].ToString()
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("pipeline: %v, %v, %v", err1, err2, err3)
	}
	if len(three) != 3 || three[0] <= one || pong != "PONG" {
		t.Errorf("pipeline: %d, %v, %q", one, three, pong)
	}
}

// transaction: MULTI ... EXEC on a dedicated connection, rueidis's way.
func (r rueidisRun) transaction(t *testing.T) {
	ctx := r.ctx(t)
	var res []rueidis.RedisResult
	err := r.c.Dedicated(func(c rueidis.DedicatedClient) error {
		b := c.B()
		res = c.DoMulti(ctx, b.Multi().Build(), b.Arbitrary("NEXTID").Build(), b.Arbitrary("NEXTIDS", "2").Build(), b.Exec().Build())
		return res[len(res)-1].Error()
	})
	if err != nil {
		t.Fatalf("MULTI/EXEC: %v", err)
	}
	exec, err := res[3].ToArray()
	if err != nil || len(exec) != 2 {
		t.Fatalf("EXEC: %v, %d replies", err, len(exec))
	}
	one, err1 := exec[0].AsInt64()
	two, err2 := exec[1].AsIntSlice()
	if err1 != nil || err2 != nil || len(two) != 2 || two[0] <= one {
		t.Fatalf("EXEC replies: %d (%v), %v (%v)", one, err1, two, err2)
	}
	r.checkExact(t, strconv.FormatInt(one, 10))
}

// reconnect: rueidis retries only read-only commands, and NEXTID sent
// with Arbitrary is not one, so the first command after the restart gets
// the old connection's error (EOF); rueidis dials again for the next one.
// A first command that already succeeds (the new connection was in place)
// is fine too.
func (r rueidisRun) reconnect(t *testing.T) {
	before, err := r.do(t, "NEXTID").AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.d.restart(); err != nil {
		t.Fatal(err)
	}
	after, err := r.do(t, "NEXTID").AsInt64()
	if err != nil {
		t.Logf("the first command after the restart: %v (rueidis's default: no retry of NEXTID)", err)
		if after, err = r.do(t, "NEXTID").AsInt64(); err != nil {
			t.Fatalf("the second command after the restart: %v", err)
		}
	}
	if after <= before {
		t.Errorf("ID %d after the restart, %d before", after, before)
	}
}
