//go:build linux

package server

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/poll"
)

// Connections in an event loop that are handed to goroutines mid-pipeline
// (the generator says "not at once" every 7th time) get every reply, in
// order: IDs strictly increasing per connection and unique across them,
// with NEXTID and NEXTIDS mixed. Handed-off connections keep being served.
func TestLoop_HandOffMidPipeline_NoDuplicates(t *testing.T) {
	ts := startServer(t, Options{Loops: 2})
	if ts.numLoops() != 0 {
		t.Fatal("loops started before the first connection")
	}
	ts.gen.refuseEvery.Store(7)
	const clients, rounds, depth = 8, 20, 500
	results := make([][]int64, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := ts.client(t, &redis.Options{PoolSize: 1})
			ctx := context.Background()
			var ids []int64
			for r := range rounds {
				cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := range depth {
						if (i+r)%5 == 0 {
							p.Do(ctx, "NEXTIDS", 1+i%9)
						} else {
							p.Do(ctx, "NEXTID")
						}
					}
					return nil
				})
				if err != nil {
					t.Errorf("client %d round %d: %v", w, r, err)
					return
				}
				for _, cmd := range cmds {
					switch v := cmd.(*redis.Cmd).Val().(type) {
					case int64:
						ids = append(ids, v)
					case []any:
						for _, x := range v {
							ids = append(ids, x.(int64))
						}
					default:
						t.Errorf("client %d: reply %v", w, v)
						return
					}
				}
			}
			results[w] = ids
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for w, ids := range results {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("client %d: ID %d after %d", w, id, ids[i-1])
			}
			if o, dup := seen[id]; dup {
				t.Fatalf("ID %d twice: clients %d and %d", id, o, w)
			}
			seen[id] = w
		}
	}
	if ts.stats.handOffs.Load() == 0 {
		t.Fatal("no connection was handed off: the loops did not serve")
	}
	if n := ts.numLoops(); n != 2 {
		t.Fatalf("%d loops, want 2", n)
	}
	if got, want := ts.stats.idsFlake.Load(), uint64(len(seen)); got != want {
		t.Fatalf("stats count %d IDs issued, clients got %d", got, want)
	}
	info := ts.dial(t).do(resp("INFO", "stats"))
	if !strings.Contains(info, "io_loops:2") {
		t.Fatalf("INFO stats does not show the loops: %q", info)
	}
	t.Logf("%d IDs, %d hand-offs", len(seen), ts.stats.handOffs.Load())

	// Calm again: the handed-off connections go back to the loops, and
	// still no ID repeats.
	ts.gen.refuseEvery.Store(0)
	rdb := ts.client(t, &redis.Options{PoolSize: 1})
	ctx := context.Background()
	for range calmBatches + 2 { // one connection, handed off on its first INFO
		if err := rdb.Do(ctx, "INFO", "server").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 * calmBatches {
		id, err := rdb.Do(ctx, "NEXTID").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("ID %d issued again after the return to a loop (request %d)", id, i)
		}
		seen[id] = -1
	}
	if ts.stats.readopts.Load() == 0 {
		t.Fatalf("no connection went back to a loop (%d hand-offs)", ts.stats.handOffs.Load())
	}
}

// A client that sends a deep pipeline without reading fills its socket:
// the loop cannot write the replies whole and hands the connection off;
// once the client reads, every reply arrives, and the loop keeps serving
// others meanwhile.
func TestLoop_ClientNotReading_RepliesComplete(t *testing.T) {
	ts := startServer(t, Options{Loops: 1})
	slow := ts.dial(t)
	const n = 2000
	req := strings.Repeat(resp("NEXTIDS", "500"), n) // about 20 MB of replies
	go io.WriteString(slow.nc, req)
	poll.Until(t, 10*time.Second, "the loop handing the full socket off", func() bool { return ts.stats.handOffs.Load() > 0 })
	other := ts.dial(t)
	if got := other.do(resp("PING")); got != "+PONG" {
		t.Fatalf("another client while one does not read: %q", got)
	}
	slow.readIDArrays(n)
	if ts.stats.handOffs.Load() == 0 {
		t.Fatal("the full socket did not hand the connection off")
	}
}

// readIDArrays reads n NEXTIDS replies, each of which starts above the
// one before.
func (c *rawConn) readIDArrays(n int) {
	c.t.Helper()
	var last int64
	for i := range n {
		got := c.read()
		var first int64
		if _, err := fmt.Sscanf(got, "[:%d", &first); err != nil || first <= last {
			c.t.Fatalf("reply %d: %.40q after %d", i, got, last)
		}
		last = first
	}
}

// A NEXTID round trip through an event loop allocates nothing in steady
// state: the parser, the command and the reply buffer are all reused. (The
// count is the whole process's, the client's included, so a little slack
// is left for timers; a reply buffer that shrank with every write would
// cost at least one allocation per round trip.)
func TestLoop_RoundTripNoAllocations(t *testing.T) {
	ts := startServer(t, Options{Loops: 1})
	c := ts.dial(t)
	req := []byte(resp("NEXTID"))
	buf := make([]byte, 64)
	roundTrip := func() {
		if _, err := c.nc.Write(req); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 2 || buf[n-1] != '\n'; {
			k, err := c.nc.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		if buf[0] != ':' {
			t.Fatalf("reply %q", buf)
		}
	}
	for range 200 {
		roundTrip()
	}
	if a := testing.AllocsPerRun(2000, roundTrip); a > 0.05 {
		t.Fatalf("%.3f allocations per NEXTID round trip, want 0", a)
	}
}

// A loop that cannot write a batch's replies whole hands the connection
// off with requests of the batch still unanswered in its input buffer: the
// goroutine answers them before it waits for more input, or a client that
// sent its whole pipeline in one write would wait forever for the rest.
func TestLoop_FullSocketMidBatch_BufferedRequestsAnswered(t *testing.T) {
	ts := startServer(t, Options{Loops: 1})
	c := ts.dial(t)
	const n = 100 // 2,800 bytes of requests (one read), about 20 MB of replies
	c.send(strings.Repeat(resp("NEXTIDS", "10000"), n))
	poll.Until(t, 10*time.Second, "the loop handing the full socket off", func() bool { return ts.stats.handOffs.Load() > 0 })
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.readIDArrays(n)
	if ts.stats.handOffs.Load() == 0 {
		t.Fatal("the full socket did not hand the connection off")
	}
}

// Every hand-off, not only the first, keeps the connection in its
// goroutine until calmBatches batches in a row were answered without
// waiting: a connection handed off again right after it returned does not
// bounce back to the loop after one batch.
func TestLoop_EveryHandOffCalmsDownBeforeReturning(t *testing.T) {
	ts := startServer(t, Options{Loops: 1})
	c := ts.dial(t)
	calmDown := func(returns uint64) {
		t.Helper()
		for range calmBatches {
			if got := c.do(resp("PING")); got != "+PONG" {
				t.Fatalf("PING: %q", got)
			}
		}
		poll.UntilNil(t, 5*time.Second, "the connection's return to a loop", func() error {
			if got := ts.stats.readopts.Load(); got != returns {
				return fmt.Errorf("%d returns to a loop after %d calm batches, want %d", got, calmBatches, returns)
			}
			return nil
		})
	}
	c.do(resp("INFO", "server")) // INFO may block: the loop hands it off
	calmDown(1)
	c.do(resp("INFO", "server"))
	if got := ts.stats.handOffs.Load(); got != 2 {
		t.Fatalf("%d hand-offs, want 2", got)
	}
	for range 5 {
		c.do(resp("PING"))
	}
	time.Sleep(20 * time.Millisecond)
	if got := ts.stats.readopts.Load(); got != 1 {
		t.Fatalf("%d returns to a loop 6 batches after the second hand-off, want 1", got)
	}
	calmDown(2)
}

// In an event loop, an EXEC of commands that never wait runs there; one
// that holds NEXTID leaves the loop before it runs anything and runs whole
// in a goroutine, and the connection comes back after calm batches.
func TestLoop_EXECThatMayWaitLeavesTheLoop(t *testing.T) {
	ts := startServer(t, Options{Loops: 1})
	c := ts.dial(t)
	if got := c.do("MULTI\r\nPING\r\nECHO x\r\nEXEC\r\n"); got != "+OK" {
		t.Fatal(got)
	}
	c.read()
	c.read()
	if got := c.read(); got != "[+PONG, $x]" {
		t.Fatalf("EXEC = %q", got)
	}
	if n := ts.stats.handOffs.Load(); n != 0 {
		t.Fatalf("EXEC of PING and ECHO: %d hand-offs, want 0", n)
	}
	c.send("MULTI\r\nNEXTID\r\nNEXTIDS 3\r\nEXEC\r\n")
	for range 3 {
		c.read()
	}
	if ids := idsIn(t, c.read()); len(ids) != 4 {
		t.Fatalf("EXEC: %d IDs", len(ids))
	}
	if n := ts.stats.handOffs.Load(); n != 1 {
		t.Fatalf("EXEC with NEXTID: %d hand-offs, want 1", n)
	}
	if n := ts.issued(); n != 4 {
		t.Fatalf("%d IDs issued, want 4 (none twice for the hand-off)", n)
	}
	for range calmBatches {
		c.do("PING\r\n")
	}
	c.do("PING\r\n")
	if n := ts.stats.readopts.Load(); n != 1 {
		t.Errorf("after %d calm batches: %d returns to a loop, want 1", calmBatches, n)
	}
}
