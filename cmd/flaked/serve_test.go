package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/daemon"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// Every bounded flag of serve refuses a value outside its range while the
// flags are parsed, from the command line or the environment: exit status
// 2, the flag and its range named, nothing started.
func TestServe_FlagOutOfRange_Exit2NamingRange(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want []string // in stderr
	}{
		{nil, []string{"--lease-ttl", "10ms"}, []string{"lease-ttl", "1s..10m"}},
		{nil, []string{"--lease-ttl", "11m"}, []string{"lease-ttl", "1s..10m"}},
		{nil, []string{"--lease-ttl", "banana"}, []string{"lease-ttl", "1s..10m"}},
		{nil, []string{"--max-lead", "-1s"}, []string{"max-lead", "0..1h"}},
		{nil, []string{"--max-lead", "61m"}, []string{"max-lead", "0..1h"}},
		{nil, []string{"--reserve-ahead", "5ms"}, []string{"reserve-ahead", "10ms..1h"}},
		{nil, []string{"--reserve-ahead", "2h"}, []string{"reserve-ahead", "10ms..1h"}},
		{nil, []string{"--max-wait", "2h"}, []string{"max-wait", "0..1h"}},
		{nil, []string{"--max-skew", "0s"}, []string{"max-skew", "1ms..1h"}},
		{nil, []string{"--max-skew", "2h"}, []string{"max-skew", "1ms..1h"}},
		{nil, []string{"--replica-wait", "5ms"}, []string{"replica-wait", "10ms..10s"}},
		{nil, []string{"--replica-wait", "20s"}, []string{"replica-wait", "10ms..10s"}},
		{nil, []string{"--idle-timeout", "-1s"}, []string{"idle-timeout", "0..24h"}},
		{nil, []string{"--idle-timeout", "25h"}, []string{"idle-timeout", "0..24h"}},
		{nil, []string{"--shutdown-timeout", "500ms"}, []string{"shutdown-timeout", "1s..10m"}},
		{nil, []string{"--shutdown-timeout", "1h"}, []string{"shutdown-timeout", "1s..10m"}},
		{map[string]string{"FLAKED_LEASE_TTL": "10ms"}, nil, []string{"FLAKED_LEASE_TTL", "1s..10m"}},
		{map[string]string{"FLAKED_SHUTDOWN_TIMEOUT": "0s"}, nil, []string{"FLAKED_SHUTDOWN_TIMEOUT", "1s..10m"}},
		{nil, []string{"--machine-ids", "0"}, []string{"machine-ids", "1..256"}},
		{nil, []string{"--mode", "turbo"}, []string{"--mode", "want flake, counter or auto"}},
		{nil, []string{"--mode", "stopped"}, []string{"--mode", "want flake, counter or auto"}},
	} {
		args := append([]string{"serve", "--listen", "127.0.0.1:1"}, tc.args...)
		t.Run(strings.Join(append(args[3:], fmt.Sprint(tc.env)), " "), func(t *testing.T) {
			code, out, errs := runT(t, tc.env, args...)
			if code != exitUsage || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2", code, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not name %q", errs, w)
				}
			}
		})
	}
}

// The help names each range as the packages that check it define it.
func TestServe_Help_NamesRanges(t *testing.T) {
	code, out, _ := runT(t, nil, "serve", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"(renewed every TTL/3), 1s..10m (default: 10s)",
		"how far IDs may run ahead of the clock when a tick's sequence is used up, 0..1h (default: 1s)",
		"max-skew + a tick), 0..1h (default: 0s)",
		"largest difference of the local clock from Redis TIME, 1ms..1h (default: 1s)",
		"0 means never, 0..24h (default: 0s)",
		"waits for in-flight replies, 1s..10m (default: 10s)",
		"--mode value ", "default auto with --redis, flake standalone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// The flags become the options of the node and the server as they did
// when serve read them itself.
func TestServe_OptionsFromFlags(t *testing.T) {
	var got daemon.Options
	cmd := &cli.Command{Name: "serve", Flags: serveFlags(), Action: func(c *cli.Context) error {
		var err error
		got, err = serveOptionsFromFlags(c, zerolog.Nop())
		return err
	}}
	t.Setenv("FLAKED_MAX_SKEW", "250ms")
	err := testApp(cmd).Run([]string{"flaked", "serve", "--listen", "127.0.0.1:7400", "--mode", "auto",
		"--lease-ttl", "3s", "--max-lead", "20ms", "--reserve-ahead", "7s", "--max-wait", "1m", "--machine-ids", "3", "--idle-timeout", "90s",
		"--shutdown-timeout", "2s", "--namespace", "ns1", "--state-file", "/tmp/x.state", "--max-batch", "7"})
	if err != nil {
		t.Fatal(err)
	}
	n, r := got.Node, got.Node.Registry
	if n.Mode != node.ModeAuto || n.MachineIDs != 3 || n.MaxLead != 20*time.Millisecond || n.ReserveAhead != 7*time.Second || n.StateFile != "/tmp/x.state" ||
		n.Redis != nil || n.Clock != nil {
		t.Errorf("node options %+v", n)
	}
	if r.Namespace != "ns1" || r.LeaseTTL != 3*time.Second || r.MaxSkew != 250*time.Millisecond || r.MaxWait != time.Minute ||
		r.Owner.Addr != "127.0.0.1:7400" || r.Owner.Version != version {
		t.Errorf("registry options %+v", r)
	}
	if s := got.Server; s.IdleTimeout != 90*time.Second || s.MaxBatch != 7 || s.TLSConfig != nil || s.Version != version {
		t.Errorf("server options %+v", s)
	}
	if got.ShutdownTimeout != 2*time.Second || got.Listen != "127.0.0.1:7400" || got.Target != "standalone (embedded store)" {
		t.Errorf("serve options %+v", got)
	}
}

// Without --mode a node on Redis runs auto (counter IDs bridge what flake
// mode would wait for), a standalone one flake; --mode overrides both.
func TestServe_DefaultMode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want node.Mode
	}{
		{nil, node.ModeFlake},
		{[]string{"--redis", "redis://127.0.0.1:1"}, node.ModeAuto},
		{[]string{"--redis", "redis://127.0.0.1:1", "--mode", "flake"}, node.ModeFlake},
		{[]string{"--mode", "counter"}, node.ModeCounter},
	} {
		var got daemon.Options
		cmd := &cli.Command{Name: "serve", Flags: serveFlags(), Action: func(c *cli.Context) error {
			var err error
			got, err = serveOptionsFromFlags(c, zerolog.Nop())
			return err
		}}
		if err := testApp(cmd).Run(append([]string{"flaked", "serve", "--listen", "127.0.0.1:7400"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got.Node.Mode != tc.want {
			t.Errorf("%v: mode %v, want %v", tc.args, got.Node.Mode, tc.want)
		}
	}
}

// serve runs standalone in-process: it serves NEXTID and the HTTP side,
// and stops cleanly when its context ends (what SIGTERM does).
func TestServe_Standalone_ServesAndStopsCleanly(t *testing.T) {
	listen, metrics := redistest.FreeAddr(t), redistest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs idtest.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- newApp(io.Discard, &logs).RunContext(ctx, []string{"flaked", "serve", "--listen", listen,
			"--metrics-addr", metrics, "--state-file", filepath.Join(t.TempDir(), "node.state"), "--log-format", "json"})
	}()
	poll.UntilNil(t, 20*time.Second, "flaked serving", func() error {
		if !strings.Contains(logs.String(), `"message":"flaked serving"`) {
			return fmt.Errorf("not serving:\n%s", logs.String())
		}
		return nil
	})
	conn, err := net.DialTimeout("tcp", listen, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("NEXTID\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("NEXTID reply %q, %v; want an integer", line, err)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "flaked_node_mode_switches 0") {
		t.Errorf("/metrics lacks the node's fields:\n%.2000s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, logs.String())
	}
	var last struct{ Message string }
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Message != "stopped cleanly" {
		t.Fatalf("last log line %q, want stopped cleanly", lines[len(lines)-1])
	}
}
