package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

var _ node.BlockGenerator = (*testGen)(nil)

// TryNextBlock refuses every refuseEvery-th call, as TryNextIDs does, so
// that the connection is handed to a goroutine that calls NextBlock.
func (t *testGen) TryNextBlock(n int64) (flake.Block, bool) {
	if m := t.refuseEvery.Load(); m > 0 && t.tries.Add(1)%m == 0 {
		return flake.Block{}, false
	}
	b, ok := t.g.TryNextBlock(n)
	if ok {
		t.given.Add(uint64(b.Count))
	}
	return b, ok
}

func (t *testGen) NextBlock(ctx context.Context, n int64) (flake.Block, error) {
	b, err := t.g.NextBlock(ctx, n)
	if err == nil {
		t.given.Add(uint64(b.Count))
	}
	return b, err
}

// blockIn reads a NEXTBLOCK reply as docs/protocol.md's decoder does: first,
// count, stride, then the machine IDs when several interleave.
func blockIn(t *testing.T, reply string) flake.Block {
	t.Helper()
	v := idsIn(t, reply)
	if len(v) < 3 || len(v) == 4 {
		t.Fatalf("NEXTBLOCK reply %.100q: want first, count, stride [, 2+ machine IDs]", reply)
	}
	b := flake.Block{First: v[0], Count: int64(v[1]), Stride: v[2]}
	if len(v) > 3 {
		b.MachineIDs = v[3:]
	}
	return b
}

func blockIDs(b flake.Block) []uint64 {
	ids := make([]uint64, b.Count)
	for i := range ids {
		ids[i] = b.ID(int64(i))
	}
	return ids
}

// NEXTBLOCK in RESP2 and RESP3, as integers and as strings, between
// NEXTIDs: the blocks and the IDs are one strictly increasing sequence,
// and INFO counts every ID of every block as issued.
func TestNEXTBLOCK(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	l := ts.gen.g.Layout()
	var all []uint64
	for _, hello := range []string{"HELLO 2\r\n", "HELLO 3\r\n"} {
		c.do(hello)
		for _, req := range []string{"NEXTBLOCK 1\r\n", "NEXTBLOCK 1000\r\n", "nextblock 70000 string\r\n", "NEXTBLOCK 5 STRING\r\n"} {
			got := c.do(req)
			if strings.Contains(strings.ToUpper(req), "STRING") != strings.HasPrefix(got, "[$") {
				t.Fatalf("%q = %.80q", req, got)
			}
			b := blockIn(t, got)
			want, _ := strconv.Atoi(strings.Fields(req)[1])
			// 16 sequence bits: 70,000 is more than a tick holds, not more
			// than the lead; a block is never longer than asked.
			if b.Count != int64(want) || b.Stride != 1<<l.BitsMachineID || b.MachineIDs != nil {
				t.Fatalf("%q = %+v: want %d IDs, stride %d", req, b, want, 1<<l.BitsMachineID)
			}
			if err := b.Check(l); err != nil {
				t.Fatal(err)
			}
			all = append(all, blockIDs(b)...)
			all = append(all, idsIn(t, c.do("NEXTID\r\n"))...)
		}
	}
	idtest.Increasing(t, l, "NEXTBLOCK and NEXTID", all)
	if n, g := ts.issued(), ts.gen.given.Load(); n != uint64(len(all)) || g != n {
		t.Errorf("%d IDs issued (INFO), %d by the generator, %d received", n, g, len(all))
	}
}

func TestNEXTBLOCK_BadArguments(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	wantCount := fmt.Sprintf("-ERR NEXTBLOCK count must be an integer in 1..%d", MaxBlock)
	for _, n := range []string{"0", "-1", strconv.Itoa(MaxBlock + 1), "ten", "", "1.5", "+5", "05"} {
		if got := c.do(resp("NEXTBLOCK", n)); got != wantCount {
			t.Errorf("NEXTBLOCK %q = %q, want %q", n, got, wantCount)
		}
	}
	for _, tc := range []struct{ req, want string }{
		{"NEXTBLOCK 5 NUMBER\r\n", "-ERR syntax error: the only option of NEXTBLOCK is STRING (IDs as bulk strings)"},
		{"NEXTBLOCK 5 STRING x\r\n", "-ERR syntax error: the only option of NEXTBLOCK is STRING (IDs as bulk strings)"},
		{"NEXTBLOCK\r\n", "-ERR wrong number of arguments for 'nextblock' command"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	if n := ts.issued(); n != 0 {
		t.Errorf("%d IDs issued by refused requests", n)
	}
	ts.checkServes(t)
}

// NEXTBLOCK inside MULTI is issued at EXEC, in order with the other ID
// commands of the transaction.
func TestNEXTBLOCK_InMULTI(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, &redis.Options{Protocol: 3})
	ctx := context.Background()
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "NEXTID")
		p.Do(ctx, "NEXTBLOCK", 50)
		p.Do(ctx, "NEXTID")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := cmds[0].(*redis.Cmd).Uint64()
	vals, err := cmds[1].(*redis.Cmd).Uint64Slice()
	if err != nil || len(vals) != 3 {
		t.Fatalf("NEXTBLOCK in EXEC: %v, %v", vals, err)
	}
	last, _ := cmds[2].(*redis.Cmd).Uint64()
	b := flake.Block{First: vals[0], Count: int64(vals[1]), Stride: vals[2]}
	ids := append(append([]uint64{first}, blockIDs(b)...), last)
	idtest.Increasing(t, ts.gen.g.Layout(), "EXEC", ids)
	if len(ids) != 52 || ts.issued() != 52 {
		t.Fatalf("%d IDs in the transaction, %d issued: want 52", len(ids), ts.issued())
	}
}

// Clients taking blocks, batches and single IDs at once, with the
// generator refusing now and then so connections move between event loops
// and goroutines (NextBlock after a refused TryNextBlock): every ID of
// every block is issued once. Fault: a block served twice, or a refused
// TryNextBlock that issued anyway.
func TestNEXTBLOCK_ConcurrentUnique(t *testing.T) {
	ts := startServer(t, Options{})
	ts.gen.refuseEvery.Store(4)
	ctx := context.Background()
	l := ts.gen.g.Layout()
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	for w := range 6 {
		rdb := ts.client(t, &redis.Options{Protocol: 2 + w%2, PoolSize: 2})
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []uint64
			for i := range 200 {
				switch w % 3 {
				case 0, 1:
					v, err := rdb.Do(ctx, "NEXTBLOCK", 1+i*37%500).Uint64Slice()
					if err != nil || len(v) != 3 {
						t.Errorf("NEXTBLOCK: %v, %v", v, err)
						return
					}
					mine = append(mine, blockIDs(flake.Block{First: v[0], Count: int64(v[1]), Stride: v[2]})...)
				case 2:
					v, err := rdb.Do(ctx, "NEXTIDS", 7).Uint64Slice()
					if err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, v...)
				}
			}
			idtest.Increasing(t, l, fmt.Sprintf("client %d", w), mine)
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	idtest.Unique(t, l, all)
	if ts.issued() != uint64(len(all)) || ts.gen.given.Load() != uint64(len(all)) {
		t.Errorf("%d IDs received, %d issued (INFO), %d by the generator", len(all), ts.issued(), ts.gen.given.Load())
	}
}

// A node interleaving machine IDs lists them after the stride; the
// block's IDs walk the (tick, sequence) steps, one per machine ID, and
// are exactly what NEXTIDS would have given.
func TestNEXTBLOCK_InterleavedMachineIDs(t *testing.T) {
	g, err := flake.New(flake.Settings{BitsSequence: 16, BitsMachineID: 8, MachineIDs: []int{3, 7, 200}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ts := startServerWith(t, &testGen{g: g})
	c := ts.dial(t)
	got := c.do("NEXTBLOCK 10\r\n")
	b := blockIn(t, got)
	if fmt.Sprint(b.MachineIDs) != "[3 7 200]" || b.Count != 10 {
		t.Fatalf("NEXTBLOCK 10 = %q: want 10 IDs over machine IDs 3, 7, 200", got)
	}
	ids := blockIDs(b)
	ids = append(ids, idsIn(t, c.do("NEXTIDS 5\r\n"))...)
	idtest.Increasing(t, g.Layout(), "block then NEXTIDS", ids)
	for i := 1; i < len(ids); i++ { // consecutive positions: no gap, no overlap
		pi, pj := g.Layout().Decompose(ids[i-1]), g.Layout().Decompose(ids[i])
		if pj.Tick > pi.Tick {
			// The clock moved on between two calls: the next position
			// is the first of the later tick.
			if pj.Sequence != 0 || pj.MachineID != 3 {
				t.Fatalf("ID %d %+v after %+v: not the first position of its tick", i, pj, pi)
			}
			continue
		}
		if pi.MachineID == 200 && (pj.Sequence != pi.Sequence+1 || pj.MachineID != 3) ||
			pi.MachineID != 200 && (pj.Sequence != pi.Sequence || pj.MachineID <= pi.MachineID) {
			t.Fatalf("ID %d %+v after %+v: not the next position", i, pj, pi)
		}
	}
	if got := c.do("NEXTBLOCK 3 STRING\r\n"); !strings.HasPrefix(got, "[$") || strings.Count(got, "$") != 6 {
		t.Fatalf("NEXTBLOCK 3 STRING = %q: want 6 bulk strings", got)
	}
}

// A generator without blocks: NEXTBLOCK says so and issues nothing; a
// client falls back to NEXTIDS on it as on an unknown command.
func TestNEXTBLOCK_GeneratorWithoutBlocks(t *testing.T) {
	gen := newTestGen(t)
	ts := startServerWith(t, struct{ node.Generator }{gen})
	c := ts.dial(t)
	if got := c.do("NEXTBLOCK 10\r\n"); got != "-ERR NEXTBLOCK is not supported by this generator: use NEXTIDS" {
		t.Fatalf("NEXTBLOCK = %q", got)
	}
	if gen.given.Load() != 0 {
		t.Fatal("NEXTBLOCK refused and issued")
	}
}

// startServerWith is startServer with the generator given.
func startServerWith(t *testing.T, gen node.Generator) *testServer {
	t.Helper()
	s, err := New(gen, Options{Loops: testLoops})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), serve: make(chan error, 1)}
	if tg, ok := gen.(*testGen); ok {
		ts.gen = tg
	}
	_, ts.port, _ = net.SplitHostPort(ts.addr)
	go func() { ts.serve <- s.Serve(ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	return ts
}
