package contract

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/miniinfo"
)

// seqBed runs seq.lua on miniredis, whose clock the test sets.
type seqBed struct {
	t    *testing.T
	mr   *miniredis.Miniredis
	rdb  *redis.Client
	keys Keys
	now  time.Time
}

func newSeqBed(t *testing.T) *seqBed {
	mr := miniredis.RunT(t)
	miniinfo.Install(mr) // guard.lua reads the server's identity
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	b := &seqBed{t: t, mr: mr, rdb: rdb, keys: NewKeys("t"), now: time.Unix(1_800_000_000, 0)}
	mr.SetTime(b.now)
	return b
}

func (b *seqBed) advance(d time.Duration) {
	b.now = b.now.Add(d)
	b.mr.SetTime(b.now)
}

var seqScript = redis.NewScript(Seq)

func (b *seqBed) run(a SeqArgs) []any {
	b.t.Helper()
	a.Keys, a.EventsMaxLen, a.Host, a.PID, a.Generation = b.keys, 1000, "h", 1, "gen"
	keys, argv := a.KeysArgv()
	res, err := seqScript.Run(context.Background(), b.rdb, keys, argv...).Slice()
	if err != nil {
		b.t.Fatalf("seq.lua %s: %v", a.Op, err)
	}
	return res
}

func (b *seqBed) create(tag string, start, step, max, rate, burst, maxJump int64) {
	b.t.Helper()
	res := b.run(SeqArgs{Op: SeqCreate, Tag: tag, Start: start, Step: step, Max: max, Rate: rate, Burst: burst, MaxJump: maxJump})
	if res[0] != "OK" {
		b.t.Fatalf("create %s: %v", tag, res)
	}
}

// next asks for n values above floor and returns the reply.
func (b *seqBed) next(tag string, n, floor int64) []any {
	b.t.Helper()
	return b.run(SeqArgs{Op: SeqNext, Tag: tag, N: n, Floor: floor})
}

// grant asks for a segment and fails unless one is granted.
func (b *seqBed) grant(tag string, n, floor int64) (first, last int64, lossID string) {
	b.t.Helper()
	res := b.next(tag, n, floor)
	if res[0] != "OK" {
		b.t.Fatalf("next %s %d: %v", tag, n, res)
	}
	first, _ = strconv.ParseInt(res[1].(string), 10, 64)
	last, _ = strconv.ParseInt(res[2].(string), 10, 64)
	return first, last, res[3].(string)
}

func (b *seqBed) field(tag, f string) string {
	return b.mr.HGet(b.keys.Seq(tag), f)
}

func (b *seqBed) giveBack(tag string, first, last int64, lossID string) []any {
	b.t.Helper()
	return b.run(SeqArgs{Op: SeqGiveBack, Tag: tag, FirstUnused: first, LastGranted: last, LossID: lossID})
}

func TestSeqLua_StartStepAndMax(t *testing.T) {
	b := newSeqBed(t)
	b.create("orders", 1000, 10, 1024, 1_000_000, 1_000_000, 0)
	want := int64(1000)
	for range 2 {
		f, l, _ := b.grant("orders", 0, 0)
		if f != want || l != want+9 {
			t.Fatalf("segment %d-%d, want %d-%d", f, l, want, want+9)
		}
		want += 10
	}
	f, l, _ := b.grant("orders", 0, 0)
	if f != 1020 || l != 1024 { // cut at the maximum
		t.Fatalf("segment %d-%d, want 1020-1024", f, l)
	}
	// Fault covered: a tag run to its maximum must not wrap or go past it.
	if res := b.next("orders", 0, 0); res[0] != "MAX" || res[1] != "1024" {
		t.Fatalf("past the max: %v", res)
	}
	if res := b.next("nope", 0, 0); res[0] != "UNKNOWN" {
		t.Fatalf("unknown tag: %v", res)
	}
	if res := b.run(SeqArgs{Op: SeqCreate, Tag: "orders", Start: 1, Step: 1, Rate: 1, Burst: 1}); res[0] != "EXISTS" {
		t.Fatalf("create twice: %v", res)
	}
}

func TestSeqLua_RateBucket(t *testing.T) {
	b := newSeqBed(t)
	b.create("r", 1, 100, 0, 50, 100, 0) // 50 values/s, burst 100
	if f, l, _ := b.grant("r", 0, 0); f != 1 || l != 100 {
		t.Fatalf("first segment %d-%d", f, l)
	}
	res := b.next("r", 0, 0)
	if res[0] != "RATE" || res[1] != "20" {
		t.Fatalf("empty bucket: %v, want RATE 20 (ms for one value at 50/s)", res)
	}
	b.advance(time.Second)
	if f, l, _ := b.grant("r", 0, 0); f != 101 || l != 150 { // 50 tokens earned
		t.Fatalf("after 1 s: %d-%d, want 101-150", f, l)
	}
}

// Fault covered: a give-back after another node took a segment above ours
// would hand that node's values out again; it must go to the free list (and
// be granted only to a process whose values stay increasing), not lower
// high.
func TestSeqLua_GiveBackCAS(t *testing.T) {
	b := newSeqBed(t)
	b.create("g", 1, 10, 0, 1_000_000, 1_000_000, 0)
	_, la, lidA := b.grant("g", 0, 0) // A: 1-10
	if res := b.giveBack("g", 6, la, lidA); res[0] != "OK" || res[1] != "5" || res[2] != "high" {
		t.Fatalf("give-back on top: %v", res)
	}
	if h := b.field("g", SeqFieldHigh); h != "5" {
		t.Fatalf("high %s after the give-back, want 5", h)
	}
	fa, la, lidA := b.grant("g", 0, 5) // A again: 6-15
	fb, lb, _ := b.grant("g", 0, 0)    // B: 16-25
	if fa != 6 || fb != 16 || lb != 25 {
		t.Fatalf("segments %d, %d-%d", fa, fb, lb)
	}
	// A stops having used up to 8: 9-15 cannot lower high (B holds 16-25).
	if res := b.giveBack("g", 9, la, lidA); res[2] != "free" {
		t.Fatalf("give-back below another's segment: %v", res)
	}
	if h := b.field("g", SeqFieldHigh); h != "25" {
		t.Fatalf("high %s, want 25", h)
	}
	// B (floor 25) must not get 9-15: its values would go down.
	if f, _, _ := b.grant("g", 0, 25); f != 26 {
		t.Fatalf("B got %d, want 26", f)
	}
	// A new process (floor 0) gets the free range first, in one step.
	if f, l, _ := b.grant("g", 0, 0); f != 9 || l != 15 {
		t.Fatalf("new process got %d-%d, want 9-15", f, l)
	}
	if fr := b.field("g", SeqFieldFree); fr != "" {
		t.Fatalf("free list %q after it was granted", fr)
	}
	// A give-back under another loss id is refused and counted as lost.
	_, l, _ := b.grant("g", 0, 0)
	if res := b.giveBack("g", l-2, l, "other"); res[2] != "lost" {
		t.Fatalf("stale give-back: %v", res)
	}
	if lost := b.field("g", SeqFieldLost); lost != "3" {
		t.Fatalf("lost %s, want 3", lost)
	}
}

// The free range below high merges down when the segment above it is given
// back: a clean stop of every node leaves high at the last value used.
func TestSeqLua_GiveBackMergesFreeRanges(t *testing.T) {
	b := newSeqBed(t)
	b.create("m", 1, 10, 0, 1_000_000, 1_000_000, 0)
	_, la, lid := b.grant("m", 0, 0) // A 1-10
	_, lb, _ := b.grant("m", 0, 0)   // B 11-20
	b.giveBack("m", 4, la, lid)      // A used 1-3: 4-10 free
	if res := b.giveBack("m", 15, lb, lid); res[2] != "high" {
		t.Fatalf("B's give-back: %v", res)
	}
	if h := b.field("m", SeqFieldHigh); h != "14" {
		t.Fatalf("high %s, want 14", h)
	}
	_, lc, _ := b.grant("m", 0, 14) // C 15-24, above the free range 4-10
	if res := b.giveBack("m", 15, lc, lid); res[2] != "high" {
		t.Fatalf("C's give-back: %v", res)
	}
	if h := b.field("m", SeqFieldHigh); h != "14" {
		t.Fatalf("high %s, want 14", h)
	}
}

// A give-back that ends at high merges with the free range right below it
// and lowers high under both; what a process still uses below them is
// never granted again (a duplicate would show as a grant at or below 14).
func TestSeqLua_GiveBackAbsorbsAdjacentFreeRange(t *testing.T) {
	b := newSeqBed(t)
	b.create("a", 1, 10, 0, 1_000_000, 1_000_000, 0)
	b.grant("a", 0, 0)               // A 1-10, in use
	_, lb, lid := b.grant("a", 0, 0) // B 11-20
	_, lc, _ := b.grant("a", 0, 0)   // C 21-30
	b.giveBack("a", 15, lb, lid)     // B used 11-14: 15-20 free
	if res := b.giveBack("a", 21, lc, lid); res[2] != "high" {
		t.Fatalf("C's give-back: %v", res)
	}
	if h, fr := b.field("a", SeqFieldHigh), b.field("a", SeqFieldFree); h != "14" || fr != "" {
		t.Fatalf("high %s, free %q; want 14 and none", h, fr)
	}
	if f, _, _ := b.grant("a", 0, 0); f != 15 {
		t.Fatalf("next grant starts at %d, want 15", f)
	}
}

// Fault covered: Redis lost writes (here {ns}:meta gone, which guard.lua
// treats as a loss; on a real server a new run_id or master_replid): the
// tag's copy is older than what was granted, so it must jump above
// everything the rate allows since the copy, and drop its free list.
func TestSeqLua_LossJumpsAboveRateBound(t *testing.T) {
	b := newSeqBed(t)
	b.create("j", 1, 100, 0, 1000, 500, 0) // 1000/s, burst 500
	b.grant("j", 0, 0)                     // 1-100
	_, l, lid := b.grant("j", 0, 0)        // 101-200
	b.giveBack("j", 151, l, lid)           // high 150
	b.grant("j", 0, 0)                     // 151-250, high 250
	copyHigh, _ := strconv.ParseInt(b.field("j", SeqFieldHigh), 10, 64)
	tokens, _ := strconv.ParseFloat(b.field("j", SeqFieldTokens), 64)
	atMs, _ := strconv.ParseInt(b.field("j", SeqFieldAtMs), 10, 64)
	// Lost suffix: whatever was granted next is gone with meta.
	b.advance(2 * time.Second)
	b.mr.Del(b.keys.Meta)
	if res := b.next("j", 0, 0); res[0] != "RATE" || res[1] != "1001" {
		t.Fatalf("right after the loss: %v, want RATE 1001 (loss + Redis skew + one value)", res)
	}
	lossMs := b.now.UnixMilli()
	b.advance(1001 * time.Millisecond)
	f, _, lid2 := b.grant("j", 0, 0)
	if lid2 == lid {
		t.Fatal("the loss id did not change")
	}
	bound := copyHigh + int64(tokens+float64(1000*(lossMs+1000-atMs))/1000+0.999)
	if f != bound+1 {
		t.Fatalf("first value after the loss %d, want %d (copy high %d, tokens %v, at %d, loss %d)",
			f, bound+1, copyHigh, tokens, atMs, lossMs)
	}
	if j := b.field("j", SeqFieldJumps); j != "1" {
		t.Fatalf("jumps %s", j)
	}
	b.advance(time.Second)
	if f2, _, _ := b.grant("j", 0, 0); f2 <= f {
		t.Fatalf("next segment %d after %d", f2, f)
	}
}

// Fault covered: a process holding values the copy lost re-asserts them
// (its floor), even when the rate bound is lower.
func TestSeqLua_FloorReasserted(t *testing.T) {
	b := newSeqBed(t)
	b.create("f", 1, 10, 0, 1_000_000, 1_000_000, 0)
	b.grant("f", 0, 0)
	if f, _, _ := b.grant("f", 0, 5000); f != 5001 {
		t.Fatalf("above floor 5000: got %d", f)
	}
}

// Fault covered: a loss whose bound is past the tag's max jump blocks the
// tag (fail closed) until restore names a value above everything granted.
func TestSeqLua_MaxJumpBlocksUntilRestore(t *testing.T) {
	b := newSeqBed(t)
	b.create("b", 1, 10, 0, 1000, 10, 100)
	b.grant("b", 0, 0)
	b.advance(time.Minute)
	b.mr.Del(b.keys.Meta)
	res := b.next("b", 0, 0)
	if res[0] != "BLOCKED" {
		t.Fatalf("past the max jump: %v", res)
	}
	if res := b.next("b", 0, 0); res[0] != "BLOCKED" {
		t.Fatalf("stays blocked: %v", res)
	}
	// Too early: segments granted before the loss may still be in use.
	if res := b.run(SeqArgs{Op: SeqRestore, Tag: "b", Above: 777}); res[0] != "WAIT" || res[1] != "11000" {
		t.Fatalf("restore right after the loss: %v, want WAIT 11000 (skew + segment TTL)", res)
	}
	b.advance(11 * time.Second)
	if res := b.run(SeqArgs{Op: SeqRestore, Tag: "b", Above: 777}); res[0] != "OK" || res[1] != "777" {
		t.Fatalf("restore: %v", res)
	}
	b.advance(time.Second) // a restore leaves no tokens
	if f, _, _ := b.grant("b", 0, 0); f != 778 {
		t.Fatalf("after restore: %d", f)
	}
}

// Fault covered: Redis lost everything; a process that was granted values
// of the tag must not see it recreated from its start.
func TestSeqLua_MissingTagFailsClosed(t *testing.T) {
	b := newSeqBed(t)
	b.create("x", 1, 10, 0, 1_000_000, 1_000_000, 0)
	_, l, _ := b.grant("x", 0, 0)
	b.mr.FlushAll()
	if res := b.next("x", 0, l); res[0] != "LOST" {
		t.Fatalf("missing tag, floor %d: %v", l, res)
	}
	// restore of a missing tag creates it above the value named, once
	// every segment granted before the loss has expired.
	b.next("x", 0, 0) // the first call after the loss records it
	b.advance(11 * time.Second)
	res := b.run(SeqArgs{Op: SeqRestore, Tag: "x", Above: 50, Start: 1, Step: 10, Rate: 100, Burst: 100})
	if res[0] != "OK" {
		t.Fatalf("restore: %v", res)
	}
	if f, _, _ := b.grant("x", 0, l); f != 51 {
		t.Fatalf("after restore: %d", f)
	}
}

func TestSeqLua_ValuesUpTo2To53(t *testing.T) {
	b := newSeqBed(t)
	start := int64(SeqMaxValue - 5)
	b.create("big", start, 4, 0, 1_000_000, 1_000_000, 0)
	f, l, _ := b.grant("big", 0, 0)
	if f != start || l != start+3 {
		t.Fatalf("%d-%d", f, l)
	}
	if f, l, _ := b.grant("big", 0, 0); f != start+4 || l != SeqMaxValue {
		t.Fatalf("%d-%d, want cut at 2^53-1", f, l)
	}
	if res := b.next("big", 0, 0); res[0] != "MAX" {
		t.Fatalf("%v", res)
	}
	_ = fmt.Sprint()
}

// Fault covered: a node idle past the segment TTL must not keep handing
// out a segment granted before a loss.
func TestSeqLua_CheckSegment(t *testing.T) {
	b := newSeqBed(t)
	b.create("c", 1, 10, 0, 1_000_000, 1_000_000, 0)
	_, _, lid := b.grant("c", 0, 0)
	check := func() any { return b.run(SeqArgs{Op: SeqCheck, Tag: "c", LossID: lid})[0] }
	if got := check(); got != "OK" {
		t.Fatalf("check without a loss: %v", got)
	}
	b.advance(time.Second)
	b.mr.Del(b.keys.Meta) // a loss
	if got := check(); got != "GONE" {
		t.Fatalf("check after a loss: %v", got)
	}
}

// Fault covered: the tag's hash evicted or deleted while Redis lost
// nothing else (same server, {ns}:meta whole, so no loss is recorded).
// Create must not make it anew from its start; restore must wait until
// no segment granted before can be handed out; and a segment from before
// the restore must be neither renewed by a check nor given back into the
// restored tag, whose values it would hand out again.
func TestSeqLua_TagGone_RestoreRetiresItsSegments(t *testing.T) {
	b := newSeqBed(t)
	b.create("g", 1, 10, 0, 1_000_000, 1_000_000, 0)
	_, _, lidA := b.grant("g", 0, 0)  // A 1-10, in use
	_, lc, lidC := b.grant("g", 0, 0) // C 11-20, not used yet
	b.mr.Del(b.keys.Seq("g"))
	if res := b.run(SeqArgs{Op: SeqCreate, Tag: "g", Start: 1, Step: 10, Rate: 100, Burst: 100}); res[0] != "LOST" {
		t.Fatalf("create of a tag that existed: %v, want LOST", res)
	}
	b.advance(time.Second)
	opts := SeqArgs{Op: SeqRestore, Tag: "g", Above: 10, Start: 1, Step: 10, Rate: 1_000_000, Burst: 1_000_000}
	if res := b.run(opts); res[0] != "WAIT" || res[1] != "10000" {
		t.Fatalf("restore 1 s after the tag was found gone: %v, want WAIT 10000 (skew + segment TTL left)", res)
	}
	b.advance(10 * time.Second)
	if res := b.run(opts); res[0] != "OK" || res[1] != "10" {
		t.Fatalf("restore: %v", res)
	}
	if got := b.run(SeqArgs{Op: SeqCheck, Tag: "g", LossID: lidA})[0]; got != "GONE" {
		t.Fatalf("check of a segment from before the restore: %v, want GONE", got)
	}
	f, l, _ := b.grant("g", 0, 0) // D 11-20, the restored tag's
	if f != 11 {
		t.Fatalf("first value after the restore %d, want 11", f)
	}
	if res := b.giveBack("g", 11, lc, lidC); res[2] != "lost" {
		t.Fatalf("give-back of C (from before the restore) under D: %v, want lost", res)
	}
	if f2, _, _ := b.grant("g", 0, 0); f2 <= l {
		t.Fatalf("after D (%d-%d) the tag granted %d again", f, l, f2)
	}
}

// Fault covered: Redis restored an old copy of the tag (a failover to a
// lagging replica, an old snapshot) and a segment granted under the copy
// is given back after the loss. Taking it back would move the tag's
// bucket to now and lower its high, so the rate bound of the loss would
// start below values granted after the copy: the give-back counts as
// lost instead.
func TestSeqLua_GiveBackAfterLoss_Lost(t *testing.T) {
	b := newSeqBed(t)
	b.create("r", 1, 100, 0, 10, 100, 0) // 10/s, burst 100
	_, l1, lid := b.grant("r", 100, 0)   // S1 1-100: the copy is taken after it
	copyOf, _ := b.mr.HKeys(b.keys.Seq("r"))
	saved := map[string]string{}
	for _, f := range copyOf {
		saved[f] = b.field("r", f)
	}
	b.advance(10 * time.Second)
	_, l2, _ := b.grant("r", 100, 0) // S2 101-200, lost with the copy's rollback
	b.mr.Del(b.keys.Seq("r"))
	for f, v := range saved {
		b.mr.HSet(b.keys.Seq("r"), f, v)
	}
	b.mr.Del(b.keys.Meta) // the rollback as guard.lua sees it: a loss
	if res := b.giveBack("r", 51, l1, lid); res[2] != "lost" {
		t.Fatalf("give-back of S1 after the loss: %v, want lost", res)
	}
	b.next("r", 0, 0) // the loss's jump: tokens from loss + skew on
	b.advance(2 * time.Second)
	if f, _, _ := b.grant("r", 0, 0); f <= l2 {
		t.Fatalf("first value after the loss %d, at or below S2's last %d", f, l2)
	}
}
