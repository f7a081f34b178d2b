package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// healthcheckCommand asks a local daemon whether it can issue IDs: the
// container health check of images without curl (distroless), and the
// check an operator runs after `flaked serve`. It speaks the daemon's own
// protocol at serve's --listen, so it needs nothing serve does not have
// by default; its --listen, --requirepass and --tls-cert share serve's
// environment variables, so in a container configured through them the
// check finds the daemon as it is configured.
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 when the local daemon can issue IDs (INFO ready:1 at --listen, or 200 from --url), else 1",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: defaultListen, EnvVars: envVars("listen"),
				Usage: "the daemon's --listen (0.0.0.0 and :: are asked on loopback)"},
			&cli.StringFlag{Name: "requirepass", EnvVars: envVars("requirepass"),
				Usage: "the daemon's --requirepass"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: envVars("tls-cert"),
				Usage: "the daemon's --tls-cert: speak TLS and accept only this certificate"},
			&cli.StringFlag{Name: "url", EnvVars: commandEnvVars("healthcheck", "url"),
				Usage: "probe this HTTP endpoint instead (serve's --metrics-addr /readyz), 200 meaning ready"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, EnvVars: commandEnvVars("healthcheck", "timeout"),
				Usage: "how long to wait for the answer, > 0"},
		},
		Action: func(c *cli.Context) error {
			timeout := c.Duration("timeout")
			if timeout <= 0 {
				return usagef("--timeout %v: must be > 0", timeout)
			}
			if u := c.String("url"); u != "" {
				return probeHTTP(c.App.Writer, u, timeout)
			}
			var tlsConf *tls.Config
			if f := c.String("tls-cert"); f != "" {
				var err error
				if tlsConf, err = pinnedTLS(f); err != nil {
					return usageError{fmt.Errorf("--tls-cert: %w", err)}
				}
			}
			return probeDaemon(c.Context, c.App.Writer, loopback(c.String("listen")), c.String("requirepass"), tlsConf, timeout)
		},
	}
}

// probeDaemon sends INFO flaked to addr and succeeds when it says ready:1;
// otherwise the error carries what INFO says about the node.
func probeDaemon(ctx context.Context, w io.Writer, addr, pass string, tlsConf *tls.Config, timeout time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: pass, TLSConfig: tlsConf,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := rdb.Info(ctx, "flaked").Result()
	if err != nil {
		return fmt.Errorf("%s: %w (is flaked serve running there? give its --listen, --requirepass, --tls-cert)", addr, err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["ready"] != "1" {
		return fmt.Errorf("%s: not ready: the node cannot issue IDs now (mode %s)\n%s", addr, fields["mode"], strings.TrimSpace(info))
	}
	fmt.Fprintf(w, "ready (mode %s)\n", fields["mode"])
	return nil
}

// probeHTTP gets u and succeeds on 200.
func probeHTTP(w io.Writer, u string, timeout time.Duration) error {
	hc := http.Client{Timeout: timeout}
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	fmt.Fprintf(w, "%s", body)
	return nil
}

// loopback is addr with an unspecified host (a listener on every
// interface) replaced by 127.0.0.1, where the daemon also answers.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// pinnedTLS accepts exactly the certificate in file: the check runs on
// the daemon's host, whose certificate names the service rather than
// 127.0.0.1, so the certificate itself is what is verified.
func pinnedTLS(file string) (*tls.Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New(file + ": no PEM certificate")
	}
	want := block.Bytes
	return &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errors.New("the daemon's certificate is not --tls-cert's")
			}
			return nil
		},
	}, nil
}
