package client_test

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fakeServer is a loopback listener whose connections, and the goroutines
// serving them, end with the test.
type fakeServer struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// serveFake listens on a free loopback port and hands every connection it
// accepts to serve, which must not block; it returns the address. At the
// end of the test the listener and every connection are closed and every
// goroutine is waited for.
func serveFake(t testing.TB, serve func(s *fakeServer, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{}
	s.run(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.track(c)
			serve(s, c)
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return ln.Addr().String()
}

// track closes c at the end of the test.
func (s *fakeServer) track(c net.Conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

// run runs f in a goroutine the end of the test waits for.
func (s *fakeServer) run(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// blackHole accepts connections and reads what is sent, but never
// answers: a hung daemon.
func blackHole(t testing.TB) string {
	t.Helper()
	return serveFake(t, func(s *fakeServer, c net.Conn) {
		s.run(func() {
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		})
	})
}

// newDelayProxy forwards connections to target, holding back for delay
// every reply chunk that starts with one of the bytes of kinds (":" for
// NEXTID's integers, "*" for arrays): a daemon slower than the client
// wants. Handshake replies other than those kinds pass at once.
func newDelayProxy(t testing.TB, target string, delay time.Duration, kinds string) string {
	t.Helper()
	return serveFake(t, func(s *fakeServer, in net.Conn) {
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			return
		}
		s.track(out)
		s.run(func() { // requests: at once
			buf := make([]byte, 4096)
			for {
				n, err := in.Read(buf)
				if err != nil {
					out.Close()
					return
				}
				if _, err := out.Write(buf[:n]); err != nil {
					return
				}
			}
		})
		s.run(func() { // replies: late
			buf := make([]byte, 4096)
			for {
				n, err := out.Read(buf)
				if err != nil {
					in.Close()
					return
				}
				if strings.IndexByte(kinds, buf[0]) >= 0 {
					time.Sleep(delay)
				}
				if _, err := in.Write(buf[:n]); err != nil {
					return
				}
			}
		})
	})
}
