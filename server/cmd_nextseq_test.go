package server

import (
	"github.com/flaked/flaked/internal/redistest"

	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/seq"
)

// seqGen is testGen with named sequences on miniredis (the script's
// behaviour on redis-server is tested in package seq and tests/).
type seqGen struct {
	*testGen
	seqs *seq.Sequences
}

func (g *seqGen) NextSeq(ctx context.Context, tag string, dst []int64) (int, error) {
	return g.seqs.NextN(ctx, tag, dst)
}
func (g *seqGen) TryNextSeq(tag []byte, dst []int64) bool { return g.seqs.TryNext(tag, dst) }

func startSeqServer(t *testing.T, step int64) *testServer {
	t.Helper()
	_, rdb := redistest.Mini(t) // miniredis answering guard.lua's INFO
	if err := redistest.InitRegistry(context.Background(), rdb, "t", flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	seqs, err := seq.New(rdb, seq.Options{Namespace: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seqs.Close(context.Background()) })
	ctx := idtest.Context(t, 10*time.Second)
	for _, tag := range []string{"orders", "other"} {
		if err := seqs.Create(ctx, tag, seq.TagOptions{Step: step}); err != nil {
			t.Fatal(err)
		}
	}
	gen := &seqGen{testGen: newTestGen(t), seqs: seqs}
	s, err := New(gen, Options{Loops: testLoops})
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
	return ts
}

// Fault covered: values handed out twice or out of order through the
// daemon, across segment boundaries (step 7) and many connections, in
// both RESP versions and in MULTI.
func TestNEXTSEQ_UniqueAndIncreasing(t *testing.T) {
	ts := startSeqServer(t, 7)
	ctx := idtest.Context(t, 30*time.Second)
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := ts.client(t, &redis.Options{Protocol: 2 + g%2, PoolSize: 1})
			var last int64
			record := func(v int64) {
				if v <= last {
					t.Errorf("value %d after %d on one connection", v, last)
				}
				last = v
				mu.Lock()
				if seen[v] {
					t.Errorf("value %d handed out twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
			for range 200 {
				v, err := rdb.Do(ctx, "NEXTSEQ", "orders").Int64()
				if err != nil {
					t.Error(err)
					return
				}
				record(v)
				vs, err := rdb.Do(ctx, "nextseq", "orders", "10").Int64Slice()
				if err != nil || len(vs) != 10 {
					t.Errorf("NEXTSEQ orders 10: %v %v", vs, err)
					return
				}
				for _, v := range vs {
					record(v)
				}
			}
			cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "NEXTSEQ", "orders")
				p.Do(ctx, "NEXTSEQ", "orders", "3")
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			v, _ := cmds[0].(*redis.Cmd).Int64()
			record(v)
			vs, _ := cmds[1].(*redis.Cmd).Int64Slice()
			for _, v := range vs {
				record(v)
			}
		}()
	}
	wg.Wait()
	if want := 8 * (200*11 + 4); len(seen) != want {
		t.Fatalf("%d distinct values, want %d", len(seen), want)
	}
	for v := int64(1); v <= int64(len(seen)); v++ {
		if !seen[v] {
			t.Errorf("value %d skipped in a run without faults", v)
			break
		}
	}
}

func TestNEXTSEQ_Errors(t *testing.T) {
	ts := startSeqServer(t, 10)
	rdb := ts.client(t, nil)
	ctx := idtest.Context(t, 10*time.Second)
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"NEXTSEQ"}, "wrong number of arguments"},
		{[]any{"NEXTSEQ", "nope"}, "unknown sequence tag nope in namespace t: create it with `flaked seq create nope`"},
		{[]any{"NEXTSEQ", "orders", "0"}, "count must be an integer in 1..10000"},
		{[]any{"NEXTSEQ", "orders", "x"}, "count must be an integer"},
		{[]any{"NEXTSEQ", "orders", "1", "2"}, "wrong number of arguments"},
		{[]any{"NEXTSEQ", "bad{tag}"}, "want 1..128 of"},
	} {
		err := rdb.Do(ctx, c.args...).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	// The tags are separate sequences.
	a, _ := rdb.Do(ctx, "NEXTSEQ", "orders").Int64()
	b, _ := rdb.Do(ctx, "NEXTSEQ", "other").Int64()
	if a != 1 || b != 1 {
		t.Fatalf("first values %d and %d, want 1 and 1", a, b)
	}
}

// A generator without sequences answers an error, not a value.
func TestNEXTSEQ_NoSequences(t *testing.T) {
	ts := startServer(t, Options{})
	err := ts.client(t, nil).Do(context.Background(), "NEXTSEQ", "orders").Err()
	if err == nil || !strings.Contains(err.Error(), "no named sequences") {
		t.Fatalf("got %v", err)
	}
}
