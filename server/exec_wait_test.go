package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// stuckGen is a generator whose source cannot issue (Redis away, a
// reservation not granted): every request waits until its context ends.
type stuckGen struct{ *testGen }

func (g stuckGen) NextID(ctx context.Context) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (g stuckGen) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (g stuckGen) TryNextIDs([]uint64) bool { return false }

// A MULTI/EXEC of several ID requests against a source that cannot issue
// waits ExecWait in all, not once per request: the transaction's bound
// (--id-wait under flaked serve) holds however many requests it queues.
func TestEXEC_StuckSource_WaitsExecWaitInAll(t *testing.T) {
	const execWait = 200 * time.Millisecond
	gen := stuckGen{newTestGen(t)}
	s, err := New(gen, Options{Loops: testLoops, ExecWait: execWait})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), serve: make(chan error, 1)}
	go func() { ts.serve <- s.Serve(ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	c := ts.dial(t)
	for _, r := range []string{"MULTI", "NEXTID", "NEXTIDS 3", "NEXTID", "NEXTIDS 2", "NEXTID"} {
		if got := c.do(r + "\r\n"); got != "+OK" && got != "+QUEUED" {
			t.Fatalf("%s = %q", r, got)
		}
	}
	start := time.Now()
	reply := c.do("EXEC\r\n")
	took := time.Since(start)
	// Five requests each waiting execWait would take 1 s; slack for the
	// scheduler stays below one more request's wait.
	if took > 2*execWait+100*time.Millisecond {
		t.Errorf("EXEC took %v, more than ExecWait %v (+ slack)", took, execWait)
	}
	if n := strings.Count(reply, "-"); n != 5 {
		t.Errorf("EXEC = %q, want 5 errors", reply)
	}
	t.Logf("EXEC answered in %v: %.200q", took, reply)
}

func TestOptions_ExecWaitNegative_Refused(t *testing.T) {
	if _, err := New(newTestGen(t), Options{ExecWait: -time.Second}); err == nil || !strings.Contains(err.Error(), "ExecWait") {
		t.Fatalf("err = %v, want one naming ExecWait", err)
	}
}
