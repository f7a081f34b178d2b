package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/seq"
)

// onRedis starts a node on a real redis-server with the tags given
// created: named sequences need Redis (a standalone node refuses them).
func onRedis(t *testing.T, tags map[string]seq.TagOptions) (*node.Node, *redistest.Server) {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	initRegistry(t, srv.Client(t))
	n, err := node.New(ctxT(t), node.Options{Redis: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	s, err := n.Sequences()
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range tags {
		if err := s.Create(ctxT(t), name, o); err != nil {
			t.Fatal(err)
		}
	}
	return n, srv
}

// Over real TCP against a node on redis-server: a tag's values are
// strictly increasing across calls and dense (one client, one node: each
// call continues where the last one stopped, across segments), n is
// optional (1) and bounded with a 400 naming the range, a bad tag name is
// a 400, and each error of the sequence has its status with the reason:
// 404 an unknown tag (naming flaked seq create), 409 past the maximum, 503
// with Retry-After a tag Redis lost (blocked until flaked seq restore) and
// Redis away. The metric counts the values delivered.
func TestSeq_IncreasingAndErrors(t *testing.T) {
	n, srv := onRedis(t, map[string]seq.TagOptions{
		"orders": {Start: 1000, Step: 1000},
		"small":  {Start: 1, Max: 3, Step: 1},
		"lost":   {Step: 1},
		"fresh":  {},
	})
	reg := prometheus.NewRegistry()
	s := serve(t, Options{Generator: n, MaxBatch: 100, Timeout: 3 * time.Second, Registerer: reg}, false)
	delivered := 0

	last := int64(999) // orders starts at 1000
	for i, q := range append([]string{"", "?n=1", "?n=7"}, strings.Split(strings.Repeat("?n=100 ", 30), " ")[:30]...) {
		var b seqBody
		s.getJSON(t, "/v1/seq/orders"+q, 200, &b)
		want := 1
		if q != "" {
			fmt.Sscanf(q, "?n=%d", &want)
		}
		if b.Tag != "orders" || len(b.Values) != want {
			t.Fatalf("call %d /v1/seq/orders%s: tag %q, %d values; want orders, %d", i, q, b.Tag, len(b.Values), want)
		}
		for _, v := range b.Values {
			if v != last+1 {
				t.Fatalf("call %d /v1/seq/orders%s: %d after %d; want %d (strictly increasing, dense)", i, q, v, last, last+1)
			}
			last = v
		}
		delivered += len(b.Values)
	}

	for _, q := range []string{"?n=", "?n=0", "?n=-1", "?n=101", "?n=abc", "?n=1&n=2", "?n=1e3"} {
		var e errorBody
		s.getJSON(t, "/v1/seq/orders"+q, 400, &e)
		if !strings.Contains(e.Error, "1..100") {
			t.Errorf("/v1/seq/orders%s: error %q does not name the range 1..100", q, e.Error)
		}
	}
	for _, tag := range []string{"bad*tag", "a%7Bb%7D", "sp%20ace", strings.Repeat("x", 129)} {
		var e errorBody
		s.getJSON(t, "/v1/seq/"+tag, 400, &e)
		if !strings.Contains(e.Error, "A-Z a-z 0-9") {
			t.Errorf("/v1/seq/%s: error %q does not name the characters allowed", tag, e.Error)
		}
	}

	var e errorBody
	s.getJSON(t, "/v1/seq/nope", 404, &e)
	if !strings.Contains(e.Error, "flaked seq create nope") {
		t.Errorf("unknown tag: %q, want the error naming flaked seq create", e.Error)
	}

	// Fault covered: past its maximum a tag fails with 409; it never
	// wraps around nor answers a value above the maximum.
	var small seqBody
	s.getJSON(t, "/v1/seq/small?n=3", 200, &small)
	if fmt.Sprint(small.Values) != "[1 2 3]" {
		t.Fatalf("small: %v, want [1 2 3]", small.Values)
	}
	delivered += 3
	for _, q := range []string{"", "?n=2"} {
		e = errorBody{}
		h := s.getJSON(t, "/v1/seq/small"+q, 409, &e)
		if !strings.Contains(e.Error, "maximum 3") || h.Get("Retry-After") != "" {
			t.Errorf("past the max: %q, Retry-After %q; want the maximum named and no Retry-After", e.Error, h.Get("Retry-After"))
		}
	}

	// Fault covered: Redis lost a tag this node was granted values of. The
	// node hands out what it holds, then every request is a 503 naming
	// flaked seq restore; no value at or below one handed out comes back.
	var lostLast int64
	take := func() (int, []byte) {
		code, _, b := s.do(t, http.MethodGet, "/v1/seq/lost?n=100")
		if code == 200 {
			var v seqBody
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			for _, x := range v.Values {
				if x <= lostLast {
					t.Fatalf("lost: %d after %d", x, lostLast)
				}
				lostLast = x
			}
			delivered += len(v.Values)
		}
		return code, b
	}
	if code, b := take(); code != 200 {
		t.Fatalf("lost before the loss: %d %s", code, b)
	}
	if err := srv.Client(t).Del(ctxT(t), contract.NewKeys(contract.DefaultNamespace).Seq("lost")).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		code, b := take()
		if code == 200 {
			if i > 100 {
				t.Fatalf("lost: still 200 after %d requests past the loss", i)
			}
			continue
		}
		e = errorBody{}
		h := s.getJSON(t, "/v1/seq/lost", 503, &e)
		if code != 503 || !strings.Contains(e.Error, "flaked seq restore lost") || h.Get("Retry-After") != "1" {
			t.Fatalf("lost after the loss: %d %s, then %q Retry-After %q; want 503 naming flaked seq restore with Retry-After 1", code, b, e.Error, h.Get("Retry-After"))
		}
		break
	}

	if got := counterValue(t, reg, "flaked_http_seq_values_issued_total"); got != float64(delivered) {
		t.Errorf("flaked_http_seq_values_issued_total %v, want the %d values delivered", got, delivered)
	}

	// Fault covered: Redis away. A tag with nothing buffered answers 503
	// with the reason and Retry-After, within the request's timeout.
	srv.Kill()
	e = errorBody{}
	h := s.getJSON(t, "/v1/seq/fresh", 503, &e)
	if !strings.Contains(e.Error, "sequence unavailable") || h.Get("Retry-After") != "1" {
		t.Errorf("Redis away: %q, Retry-After %q; want the cause and Retry-After 1", e.Error, h.Get("Retry-After"))
	}
	srv.Restart(t) // the node's Close gives back its values
}

// counterValue returns the value of the counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("counter %s not registered", name)
	return 0
}

// Fault: many HTTP clients of one tag at once. Every value over HTTP is
// handed out once: a handler sharing a buffer between requests, answering
// one request with another's values, or segments switched under
// concurrent callers (a small step: many switches and prefetches) handing
// a value twice shows as a duplicate. Each answer and each client's
// answers in turn are strictly increasing.
func TestSeq_ConcurrentClients_NoDuplicate(t *testing.T) {
	n, _ := onRedis(t, map[string]seq.TagOptions{"orders": {Start: 1000, Step: 10}})
	s := serve(t, Options{Generator: n}, false)
	// size is client c's n of request i: 1..1000, large answers widen the
	// window in which a shared buffer would be overwritten.
	size := func(c, i int) int { return 1 + (i*97+c*31)%1000 }
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		wg   sync.WaitGroup
	)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int64(0)
			for i := range 40 {
				path := fmt.Sprintf("/v1/seq/orders?n=%d", size(c, i))
				code, _, b := s.do(t, http.MethodGet, path)
				var body seqBody
				if code != 200 || json.Unmarshal(b, &body) != nil {
					t.Errorf("GET %s: %d %s", path, code, b)
					return
				}
				mu.Lock()
				for _, v := range body.Values {
					if v <= prev {
						t.Errorf("client %d: %d after %d, want strictly increasing", c, v, prev)
					}
					prev = v
					if other, ok := seen[v]; ok {
						t.Errorf("value %d handed out twice: to client %d and client %d", v, other, c)
					}
					seen[v] = c
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	want := 0
	for c := range 8 {
		for i := range 40 {
			want += size(c, i)
		}
	}
	if len(seen) != want {
		t.Fatalf("%d distinct values, want %d", len(seen), want)
	}
	if _, ok := seen[1000]; !ok {
		t.Error("the tag's start 1000 was not handed out")
	}
}

// No sequences without Redis: a standalone node answers 501 naming
// --redis, a generator without NextSeq 501 naming why; neither is a
// passing state, so no Retry-After.
func TestSeq_NotImplemented(t *testing.T) {
	n := standalone(t)
	for name, g := range map[string]node.Generator{"standalone": n, "no NextSeq": struct{ node.Generator }{n}} {
		s := serve(t, Options{Generator: g}, false)
		var e errorBody
		h := s.getJSON(t, "/v1/seq/orders", 501, &e)
		want := "--redis"
		if name == "no NextSeq" {
			want = "has no named sequences"
		}
		if !strings.Contains(e.Error, want) || h.Get("Retry-After") != "" {
			t.Errorf("%s: %q, Retry-After %q; want the reason (%q) and no Retry-After", name, e.Error, h.Get("Retry-After"), want)
		}
	}
}

// errSeq is a generator whose NextSeq fills some values, then fails with
// err: for the errors a test cannot bring about on demand (a segment the
// replicas did not acknowledge).
type errSeq struct {
	node.Generator
	err error
}

func (g errSeq) NextSeq(ctx context.Context, tag string, dst []int64) (int, error) {
	dst[0] = 42
	return 1, g.err
}

// Each error of the sequence (wrapped as package seq and node wrap them)
// maps to its status, with the error as the message and Retry-After on
// 503 only; values taken before the error are never answered.
func TestSeq_ErrorStatus(t *testing.T) {
	n := standalone(t)
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w orders in namespace flaked: create it with `flaked seq create orders`", seq.ErrUnknownTag), 404},
		{fmt.Errorf("%w: tag orders handed out its maximum 3", seq.ErrMaxReached), 409},
		{node.ErrSeqStandalone, 501},
		{fmt.Errorf("%w: tag orders: %w: 0 of 1 replicas", seq.ErrUnavailable, seq.ErrNotAcknowledged), 503},
		{fmt.Errorf("%w: tag orders: run `flaked seq restore orders --above N`", seq.ErrBlocked), 503},
		{fmt.Errorf("%w: tag orders: waiting for a segment from Redis: %w", seq.ErrUnavailable, context.DeadlineExceeded), 503},
		{seq.ErrClosed, 503},
		{node.ErrClosed, 503},
		{errors.New("something new"), 503}, // fail closed
	} {
		s := serve(t, Options{Generator: errSeq{n, c.err}}, false)
		code, h, b := s.do(t, http.MethodGet, "/v1/seq/orders?n=2")
		var e errorBody
		if code != c.code || json.Unmarshal(b, &e) != nil || e.Error != c.err.Error() {
			t.Errorf("%v: %d %s; want %d and the error", c.err, code, b, c.code)
		}
		if (h.Get("Retry-After") == "1") != (c.code == 503) {
			t.Errorf("%v: Retry-After %q with %d", c.err, h.Get("Retry-After"), code)
		}
	}
}

// The docs' curl line works as shown, with Debian's curl and the bearer
// token: the answer is exactly the JSON docs/http.md prints.
func TestSeq_Curl(t *testing.T) {
	curl := need(t, "curl", "curl")
	n, _ := onRedis(t, map[string]seq.TagOptions{"orders": {Start: 1000}})
	s := serve(t, Options{Generator: n, Token: "s3cret"}, false)
	for _, c := range []struct{ path, want string }{
		{"/v1/seq/orders?n=2", `{"tag":"orders","values":[1000,1001]}` + "\n\n200"},
		{"/v1/seq/orders", `{"tag":"orders","values":[1002]}` + "\n\n200"},
		{"/v1/seq/nope", "`flaked seq create nope`\"}\n\n404"},
	} {
		out, err := exec.CommandContext(ctxT(t), curl, "-sS", "--max-time", "20", "-w", "\n%{http_code}",
			"-H", "Authorization: Bearer s3cret", s.base+c.path).CombinedOutput()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), c.want) {
			t.Errorf("curl %s: %v\n%s\nwant it to end with %s", c.path, err, out, c.want)
		}
	}
}
