package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"
)

// panicWatch is a log writer that notices recovered panics: the server
// survives them, but the fuzzer must still report them.
type panicWatch struct{ seen atomic.Pointer[string] }

func (w *panicWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("recovered a panic")) {
		s := string(p)
		w.seen.CompareAndSwap(nil, &s)
	}
	return len(p), nil
}

// FuzzCommand sends arbitrary bytes to a live server as one client, then
// checks that every reply it got is well-formed RESP, that no panic was
// recovered, and that another client is still served.
//
//	go test -run '^$' -fuzz FuzzCommand -fuzztime 20s ./server/
func FuzzCommand(f *testing.F) {
	for _, seed := range []string{
		"PING\r\n", resp("NEXTIDS", "3"), "*1\r\n$999999999999\r\n", "*1000000\r\n", "PING \"a\\x\" 'b'\r\n",
		"HELLO 3\r\nCLIENT GETNAME\r\nINFO keyspace\r\nCONFIG GET *\r\nCOMMAND INFO echo x\r\nHELLO 2\r\n",
		"MULTI\r\nNEXTID STRING\r\nNEXTIDS 3\r\nFOO\r\nEXEC\r\nMULTI\r\nNEXTIDS 2 STRING\r\nEXEC\r\nMULTI\r\nDISCARD\r\n",
		"HELLO 3\r\nMULTI\r\nCLIENT TRACKING on OPTIN\r\nCLIENT CACHING yes\r\nCLIENT TRACKINGINFO\r\nEXEC\r\nRESET\r\n",
		resp("ECHO", "\x00\r\n") + "ROLE\r\nTIME\r\nDBSIZE\r\nWATCH a\r\nUNWATCH\r\nCLIENT LIST\r\n",
	} {
		f.Add([]byte(seed))
	}
	watch := &panicWatch{}
	ts := startServer(f, Options{MaxLine: 256, MaxBulk: 256, MaxArgs: 16, MaxBatch: 100,
		Logger: zerolog.New(watch).Level(zerolog.ErrorLevel)})
	wc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { wc.Close() })
	witness := bufio.NewReader(wc)
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			nc.Write(data) // fails when the server hangs up first
			nc.(*net.TCPConn).CloseWrite()
		}()
		r := bufio.NewReader(nc)
		for {
			if _, err := readReply(r); err != nil {
				if rest, _ := io.ReadAll(r); err != io.EOF || len(rest) > 0 {
					if !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
						t.Fatalf("malformed reply stream: %v (then %q)", err, rest)
					}
				}
				break
			}
		}
		if p := watch.seen.Load(); p != nil {
			t.Fatalf("the server recovered a panic: %s", *p)
		}
		wc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(wc, "PING\r\n")
		if got, err := readReply(witness); got != "+PONG" {
			t.Fatalf("PING from another client: %q, %v", got, err)
		}
	})
}

// readAll runs redcon's reader over rd and returns the requests it parsed
// and how it stopped; a panic in redcon counts as a protocol error.
func readAll(rd io.Reader) (reqs []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = protocolErrorf("redcon panicked: %v", r)
		}
	}()
	cr := redcon.NewReader(rd)
	for {
		cmds, err := cr.ReadCommands()
		if err != nil {
			return reqs, err
		}
		for _, cmd := range cmds {
			reqs = append(reqs, fmt.Sprintf("%q", cmd.Args))
		}
	}
}

var hugeCount = regexp.MustCompile(`\*[+-]?0*[1-9][0-9]{7}`)

// parseAll runs reqParser over data fed chunk bytes at a time and returns
// the requests it parsed and how it stopped (io.EOF: at the end of data).
func parseAll(data []byte, chunk int, o Options) (reqs []string, err error) {
	p := newReqParser(o)
	for {
		for {
			args, err := p.next()
			if err != nil {
				return reqs, err
			}
			if args == nil {
				break
			}
			reqs = append(reqs, fmt.Sprintf("%q", args))
		}
		if len(data) == 0 {
			return reqs, io.EOF
		}
		n := copy(p.space(), data[:min(chunk, len(data))])
		p.wrote(n)
		data = data[n:]
	}
}

// FuzzParser checks that reqParser reads requests as redcon does: with
// limits above the input's size, it parses the same requests into the same
// arguments, whatever the size of the reads, and input that redcon refuses
// is refused.
func FuzzParser(f *testing.F) {
	for _, seed := range []string{
		"PING\r\n", resp("NEXTIDS", "3") + "PING a\n", "*1\r\n$9223372036854775807\r\nxx", "*+1\r\n$+4\r\nPING\r\n",
		"*1\r\n$-0\r\n\r\n", "PING \"a b\" 'c\\'d'\r\n", "PING a\"b\r\n", "\r\n\n*1\r\n$1\r\nx\r\n", "*01\r\n$004\r\nPING\r\n",
		"PING \"x\"\r\r\n", "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
	} {
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		// redcon loops over an argument count before the arguments
		// arrive: a count of 10^8 and up hangs the unguarded reference.
		if len(data) > 4096 || hugeCount.Match(data) {
			return
		}
		const limit = 1 << 16
		o := Options{MaxLine: limit, MaxBulk: limit, MaxArgs: limit}
		want, wantErr := readAll(bytes.NewReader(data))
		got, gotErr := parseAll(data, int(chunk%64)+1, o)
		switch {
		case wantErr == io.EOF:
			// Same requests; the parser may refuse a length no input
			// this small can complete.
			if fmt.Sprint(got) != fmt.Sprint(want) || gotErr != io.EOF && !isProtocolError(gotErr) {
				t.Fatalf("input %q:\nredcon:        %v, %v\nparser:        %v, %v", data, want, wantErr, got, gotErr)
			}
		case isProtocolError(wantErr):
			if gotErr == nil || !isProtocolError(gotErr) {
				t.Fatalf("input %q: redcon refused it (%v), the parser gave %v, %v", data, wantErr, got, gotErr)
			}
		default:
			t.Fatalf("redcon: %v", wantErr)
		}
	})
}

// In steady state the parser allocates nothing: a pipeline of RESP and
// inline requests is split into arguments inside its own buffers.
func TestParser_NoAllocations(t *testing.T) {
	batch := []byte(strings.Repeat(resp("NEXTID"), 15) + "NEXTIDS \"10\"\r\n")
	batch = append(batch, resp("NEXTIDS", "100")...)
	p := newReqParser(Options{MaxLine: DefaultMaxLine, MaxBulk: DefaultMaxBulk, MaxArgs: DefaultMaxArgs})
	run := func() {
		p.wrote(copy(p.space(), batch))
		for n := 0; ; n++ {
			args, err := p.next()
			if err != nil || args == nil {
				if err != nil || n != 17 {
					t.Fatalf("after %d requests: %v", n, err)
				}
				return
			}
		}
	}
	run() // the buffers grow once
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Fatalf("%v allocations per batch, want 0", a)
	}
}

// isProtocolError tells ours and redcon's protocol errors (redcon's type is
// unexported; its messages share the prefix) from I/O errors.
func isProtocolError(err error) bool {
	return strings.HasPrefix(err.Error(), "Protocol error: ")
}
