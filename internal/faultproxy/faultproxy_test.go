package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back with a prefix naming the server.
func echo(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(name + ":" + line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxy_ForwardCutHealRedirect(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	p := Start(t, a)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c, "x"); err != nil || got != "a:x\n" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	p.Cut()
	if _, err := roundTrip(c, "y"); err == nil {
		t.Fatal("an open connection still works after Cut")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if _, err := roundTrip(c2, "z"); err == nil {
			t.Fatal("a new connection works while cut")
		}
		c2.Close()
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c3, "h"); err != nil || got != "a:h\n" {
		t.Fatalf("after Heal: %q %v", got, err)
	}
	p.Redirect(b)
	if _, err := roundTrip(c3, "old"); err == nil {
		t.Fatal("a connection from before the redirect still works")
	}
	c4, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(c4, "r"); err != nil || got != "b:r\n" {
		t.Fatalf("after Redirect: %q %v, want the new target", got, err)
	}
	c4.Close()
}

func TestProxy_RefusesNonLoopback(t *testing.T) {
	if _, err := New("10.0.0.1:6379"); err == nil {
		t.Fatal("a proxy to a non-loopback target was made")
	}
}
