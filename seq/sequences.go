package seq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/internal/segment"
)

// Errors of sequences. Each is wrapped with the tag and the fix.
var (
	// ErrUnknownTag: the tag was never created (flaked seq create).
	ErrUnknownTag = errors.New("unknown sequence tag")
	// ErrNoRegistry: the namespace has no registry, and these Sequences
	// never ran under it (coord.ErrNoRegistry); flaked init makes one.
	ErrNoRegistry = contract.ErrNoRegistry
	// ErrMaxReached: the tag handed out its maximum.
	ErrMaxReached = errors.New("sequence reached its maximum")
	// ErrBlocked: seq.lua cannot tell that continuing is safe (Redis lost
	// the tag, or a loss would jump it further than its max jump); an
	// operator resumes it with flaked seq restore.
	ErrBlocked = errors.New("sequence blocked after a Redis data loss")
	// ErrUnavailable: Redis did not answer (or the caller's context ended)
	// and nothing is buffered. No value is guessed.
	ErrUnavailable = errors.New("sequence unavailable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("sequences are closed")
	// ErrExists: Create of a tag that exists.
	ErrExists = errors.New("sequence tag exists")
)

var script = redis.NewScript(contract.Seq)

// grant maps a segment's indices to values (index i is first+i) and says
// what Redis granted them under.
type grant struct {
	first  int64
	lossID string
	step   int64 // the tag's step when granted
	// expires is the clock's Monotonic past which no value is taken
	// before a check renews it (SegmentTTL).
	expires atomic.Int64
}

// SegmentTTL is how long after asking for a segment a process hands out
// its values without asking Redis again whether a loss happened since
// (seq.lua's segmentTTLMs): a busy segment is used up long before, an
// idle one is checked (one call) and renewed, or dropped when Redis lost
// writes. So after a loss no value granted before it is handed out past
// loss + 1 s + SegmentTTL, and flaked seq restore, which trusts the
// operator's records, waits until then.
const SegmentTTL = 10 * time.Second

// closeWait bounds how long Close waits for fetches in flight.
const closeWait = time.Second

func (g *grant) expired(now time.Duration) bool { return int64(now) >= g.expires.Load() }

// tag is one tag's buffer: the segment in use and the one fetched ahead.
type tag struct {
	name string
	buf  segment.Buffer[grant] // guarded by mu

	mu      sync.Mutex
	floor   int64 // the highest value this process was granted
	lastErr error
	// size is how many values the next fetch asks for: the tag's step
	// (0 before the first reply), doubled while segments last under
	// fastSegment, halved toward the step while they last over
	// slowSegment (Leaf's dynamic step), so a busy tag does not fetch
	// faster than Redis answers.
	size, step int64
	fetchedAt  time.Duration // clock's Monotonic at the last fetch
}

// The segment lives the size adapts to.
const (
	fastSegment = 50 * time.Millisecond
	slowSegment = 500 * time.Millisecond
)

// nextSizeLocked adapts the size of the next fetch to how long the last
// segment lasted (fetches start when a segment is 10% used, so the time
// between two is about a segment's life).
func (t *tag) nextSizeLocked(now time.Duration) int64 {
	if t.step > 0 && t.fetchedAt > 0 {
		switch life := now - t.fetchedAt; {
		case life < fastSegment:
			t.size = min(2*t.size, MaxStep)
		case life > slowSegment:
			t.size = max(t.size/2, t.step)
		}
	}
	t.fetchedAt = now
	return t.size
}

// Sequences hands out the values of named sequences from Redis. It is
// safe for concurrent use.
type Sequences struct {
	rdb  redis.UniversalClient
	opts Options
	keys contract.Keys

	tags   atomic.Pointer[map[string]*tag] // copied on write
	mu     sync.Mutex                      // guards tags' writes and closed
	closed atomic.Bool
	ctx    context.Context
	cancel context.CancelFunc

	// wait runs each grant with its WAIT (wait.go).
	wait replwait.Waiter

	fetched, waits, givenBack, unacked atomic.Uint64
	// known is set once seq.lua answered (or Options.Known): the registry
	// existed, so this process restores {ns}:meta if Redis lost it; until
	// then it sends no generation, and a namespace without a registry is
	// refused (ErrNoRegistry), as for claims and the counter.
	known atomic.Bool
}

// New returns Sequences on rdb. It does not talk to Redis until a value
// or a tag is asked for.
func New(rdb redis.UniversalClient, opts Options) (*Sequences, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Sequences{rdb: rdb, opts: o, keys: contract.NewKeys(o.Namespace)}
	s.wait = replwait.Waiter{Meta: s.keys.Meta, Floor: int64(o.MinReplicas), Sentinels: o.Sentinels, Clock: o.Clock, Marks: o.Marks}
	s.tags.Store(&map[string]*tag{})
	s.known.Store(o.Known)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Options returns the options with defaults filled in.
func (s *Sequences) Options() Options { return s.opts }

func (s *Sequences) args(op, tagName string) contract.SeqArgs {
	gen := ""
	if s.known.Load() {
		gen = segment.NewGeneration(s.opts.Rand)
	}
	return contract.SeqArgs{Keys: s.keys, Op: op, Tag: tagName, EventsMaxLen: s.opts.EventsMaxLen,
		Host: s.opts.Host, PID: s.opts.PID, Generation: gen, Mark: s.wait.Mark(), Identity: s.opts.RedisIdentity}
}

// lookup returns the tag's buffer, nil when none was made yet. The
// []byte conversion in a map index does not allocate.
func (s *Sequences) lookup(name []byte) *tag { return (*s.tags.Load())[string(name)] }

func (s *Sequences) tagOf(name string) (*tag, error) {
	if t := (*s.tags.Load())[name]; t != nil {
		return t, nil
	}
	if err := contract.CheckTag(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknownTag, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	old := *s.tags.Load()
	if t := old[name]; t != nil {
		return t, nil
	}
	t := s.newTag(name)
	m := make(map[string]*tag, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	s.tags.Store(&m)
	return t, nil
}

// newTag returns a tag whose buffer fetches from seq.lua.
func (s *Sequences) newTag(name string) *tag {
	t := &tag{name: name}
	b := &t.buf
	b.Mu, b.Clock, b.ErrClosed = &t.mu, s.opts.Clock, ErrClosed
	b.Closed = s.closed.Load
	b.Begin = func() segment.Fetch[grant] { return func() (*segment.Segment[grant], error) { return s.fetch(t) } }
	b.Landed = func(seg *segment.Segment[grant], err error) error {
		if err == nil {
			// Recorded even when closed: Close gives it back.
			t.floor = max(t.floor, seg.Meta.first+seg.N()-1)
			if step := seg.Meta.step; t.step != step {
				t.step, t.size = step, max(t.size, step)
			}
			s.fetched.Add(1)
		}
		t.lastErr = err
		return err
	}
	b.Final = func(err error) bool {
		// A refusal by seq.lua: a joined waiter reports it at once.
		var fe *fetchError
		return errors.As(err, &fe)
	}
	b.Waiting = func() { s.waits.Add(1) }
	b.SetCurrent(segment.New[grant](0, -1)) // empty: the first call fetches
	return t
}

// Next returns the next value of the tag.
func (s *Sequences) Next(ctx context.Context, tagName string) (int64, error) {
	var v [1]int64
	if _, err := s.NextN(ctx, tagName, v[:]); err != nil {
		return 0, err
	}
	return v[0], nil
}

// TryNext fills dst with increasing values of the tag if the segment in
// use holds all of them, and reports whether it did. It never waits on
// Redis; when it reports false nothing was taken. name is not retained.
func (s *Sequences) TryNext(name []byte, dst []int64) bool {
	t := s.lookup(name)
	if t == nil {
		return false
	}
	seg := t.buf.Current()
	now := s.opts.Clock.Monotonic()
	if seg.Meta.expired(now) {
		return false // the slow path checks it with Redis
	}
	i, ok := seg.TryTake(int64(len(dst)))
	if !ok {
		// Spent: install the segment fetched ahead, if it is there and the
		// lock is free, rather than send the caller to wait.
		if !t.mu.TryLock() {
			return false
		}
		// Only a spent one is replaced: values left in it (fewer than
		// dst) go to the slow path's caller, not into a hole.
		if t.buf.Current() == seg && t.buf.NextLocked() != nil && !s.closed.Load() && seg.Spent() {
			t.buf.InstallNextLocked()
		}
		t.mu.Unlock()
		seg = t.buf.Current()
		if seg.Meta.expired(now) {
			return false
		}
		if i, ok = seg.TryTake(int64(len(dst))); !ok {
			return false
		}
	}
	if seg.Triggers(i, int64(len(dst))) {
		t.buf.Prefetch(seg)
	}
	for k := range dst {
		dst[k] = seg.Meta.first + i + int64(k)
	}
	return true
}

// NextN fills dst with strictly increasing values of the tag and returns
// how many it wrote: len(dst), or fewer with an error. Values of one call
// may span segments (then they are not consecutive).
func (s *Sequences) NextN(ctx context.Context, tagName string, dst []int64) (int, error) {
	t, err := s.tagOf(tagName)
	if err != nil {
		return 0, err
	}
	filled := 0
	for filled < len(dst) {
		seg := t.buf.Current()
		if seg.N() > 0 && !seg.Spent() && seg.Meta.expired(s.opts.Clock.Monotonic()) {
			if err := s.renew(ctx, t, seg); err != nil {
				return filled, err
			}
			continue
		}
		i, got := seg.Take(int64(len(dst) - filled))
		if got > 0 {
			if seg.Triggers(i, got) {
				t.buf.Prefetch(seg)
			}
			for k := range got {
				dst[filled+int(k)] = seg.Meta.first + i + k
			}
			filled += int(got)
			continue
		}
		if err := s.await(ctx, t, seg); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// await runs once seg is spent: it installs the segment fetched ahead or
// waits for a fetch. nil means try again.
func (s *Sequences) await(ctx context.Context, t *tag, seg *segment.Segment[grant]) error {
	err := t.buf.Await(ctx, seg)
	var waited *segment.WaitError
	if errors.As(err, &waited) {
		if waited.Last != nil {
			return fmt.Errorf("%w: tag %s: waiting for a segment from Redis: %w (the last fetch: %w)", ErrUnavailable, t.name, waited.Err, waited.Last)
		}
		return fmt.Errorf("%w: tag %s: waiting for a segment from Redis: %w", ErrUnavailable, t.name, waited.Err)
	}
	return err
}

// fetch runs one fetch of t's next segment, sized as the last one lasted.
func (s *Sequences) fetch(t *tag) (*segment.Segment[grant], error) {
	t.mu.Lock()
	floor := t.floor
	size := t.nextSizeLocked(s.opts.Clock.Monotonic())
	t.mu.Unlock()
	return s.fetchSegment(t.name, floor, size)
}

// fetchError is a refusal by seq.lua (unknown tag, maximum, blocked):
// waiting does not cure it, so a joined waiter reports it at once.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// fetchSegment runs seq.lua until it grants a segment of up to size
// values (0: the tag's step) above floor, waiting while the tag's rate
// says so. The segment records the tag's step.
func (s *Sequences) fetchSegment(name string, floor, size int64) (*segment.Segment[grant], error) {
	for {
		a := s.args(contract.SeqNext, name)
		a.Floor, a.N = floor, size
		keys, argv := a.KeysArgv()
		asked := s.opts.Clock.Monotonic()
		res, err := s.runGrant(keys, argv)
		if err != nil {
			if s.ctx.Err() != nil {
				return nil, ErrClosed
			}
			if errors.Is(err, ErrNotAcknowledged) {
				return nil, fmt.Errorf("%w: tag %s: %w", ErrUnavailable, name, err)
			}
			return nil, fmt.Errorf("%w: tag %s: seq.lua: %w", ErrUnavailable, name, err)
		}
		s.known.Store(true)
		status, _ := res[0].(string)
		arg := func(i int) string {
			if i < len(res) {
				v, _ := res[i].(string)
				return v
			}
			return ""
		}
		switch status {
		case "OK":
			first, err1 := strconv.ParseInt(arg(1), 10, 64)
			last, err2 := strconv.ParseInt(arg(2), 10, 64)
			if err := errors.Join(err1, err2); err != nil || last < first || first <= floor {
				return nil, fmt.Errorf("%w: tag %s: seq.lua: bad reply %v (floor %d)", ErrUnavailable, name, res, floor)
			}
			n := last - first + 1
			step, _ := strconv.ParseInt(arg(4), 10, 64)
			seg := segment.New[grant](n, int64(float64(n)*s.opts.PrefetchAt))
			seg.Meta.first, seg.Meta.lossID, seg.Meta.step = first, arg(3), step
			seg.Meta.expires.Store(int64(asked + SegmentTTL))
			return seg, nil
		case "RATE":
			ms, _ := strconv.ParseInt(arg(1), 10, 64)
			if err := clock.Sleep(s.ctx, s.opts.Clock, time.Duration(max(ms, 1))*time.Millisecond); err != nil {
				return nil, ErrClosed
			}
		case "MAX":
			return nil, &fetchError{fmt.Errorf("%w: tag %s handed out its maximum %s", ErrMaxReached, name, arg(1))}
		case "BLOCKED":
			return nil, &fetchError{fmt.Errorf("%w: tag %s: %s", ErrBlocked, name, contract.SeqBlockedText(name, arg(1)))}
		case "LOST":
			return nil, &fetchError{fmt.Errorf("%w: tag %s: %s", ErrBlocked, name, contract.SeqLostText(name, arg(1)))}
		case "UNKNOWN":
			return nil, &fetchError{fmt.Errorf("%w %s in namespace %s: create it with `flaked seq create %s`", ErrUnknownTag, name, s.opts.Namespace, name)}
		default:
			return nil, fmt.Errorf("%w: tag %s: seq.lua: unexpected reply %v", ErrUnavailable, name, res)
		}
	}
}

// renew asks Redis whether seg, past its SegmentTTL, may still be used:
// yes when no loss happened since its grant and the tag is there; then
// it gets another TTL. Otherwise seg and the segment fetched ahead are
// dropped (a gap), and the caller fetches anew.
func (s *Sequences) renew(ctx context.Context, t *tag, seg *segment.Segment[grant]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	now := s.opts.Clock.Monotonic()
	if t.buf.Current() != seg || !seg.Meta.expired(now) {
		return nil // renewed or replaced meanwhile
	}
	a := s.args(contract.SeqCheck, t.name)
	a.LossID = seg.Meta.lossID
	keys, argv := a.KeysArgv()
	res, err := script.Run(ctx, s.rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return fmt.Errorf("%w: tag %s: checking a segment older than %v: %w", ErrUnavailable, t.name, SegmentTTL, err)
	}
	s.known.Store(true)
	if len(res) > 0 && res[0] == "OK" {
		seg.Meta.expires.Store(int64(now + SegmentTTL))
		if next := t.buf.NextLocked(); next != nil && next.Meta.lossID == seg.Meta.lossID {
			next.Meta.expires.Store(int64(now + SegmentTTL))
		}
		return nil
	}
	seg.Seal()
	if next := t.buf.NextLocked(); next != nil && next.Meta.expired(now) {
		t.buf.DropNextLocked()
	}
	return nil
}

// Close stops handing out values and gives the unused rest of every
// buffered segment back (seq.lua grants it again first), so that a clean
// restart continues without a gap. A fetch in flight is waited for (its
// segment is given back too) until ctx ends. The rest that cannot go back
// (Redis away, ctx over) is a gap, never a reuse.
func (s *Sequences) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	tags := *s.tags.Load()
	s.mu.Unlock()
	// Fetches in flight are waited for a moment (their segments go back
	// too), not for all of ctx: a node releases its lease after this.
	wctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	var errs []error
	for _, t := range tags {
		t.mu.Lock()
		run := t.buf.RunLocked()
		t.mu.Unlock()
		if run != nil && run.Wait(wctx) != nil {
			s.cancel() // a fetch asleep (rate) or stuck on Redis: its segment is a gap
		}
		t.mu.Lock()
		cur, next := t.buf.Current(), t.buf.NextLocked()
		t.buf.DropNextLocked()
		t.mu.Unlock()
		// Sealed first: nothing is taken from them after their rest is
		// measured.
		from := cur.Seal()
		if next != nil {
			next.Seal()
			errs = append(errs, s.giveBack(ctx, t.name, next, 0))
		}
		errs = append(errs, s.giveBack(ctx, t.name, cur, from))
	}
	s.cancel()
	return errors.Join(errs...)
}

// giveBack returns seg's values from index from on.
func (s *Sequences) giveBack(ctx context.Context, name string, seg *segment.Segment[grant], from int64) error {
	if seg.N() == 0 || from >= seg.N() {
		return nil
	}
	a := s.args(contract.SeqGiveBack, name)
	a.FirstUnused, a.LastGranted, a.LossID = seg.Meta.first+from, seg.Meta.first+seg.N()-1, seg.Meta.lossID
	keys, argv := a.KeysArgv()
	res, err := script.Run(ctx, s.rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return fmt.Errorf("tag %s: giving back %d-%d: %w", name, a.FirstUnused, a.LastGranted, err)
	}
	if len(res) == 3 {
		if n, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64); n > 0 {
			s.givenBack.Add(uint64(n))
		}
	}
	return nil
}

// Stats are counters of Sequences.
type Stats struct {
	Tags            int
	SegmentsFetched uint64
	Waits           uint64 // calls that waited for Redis
	GivenBack       uint64 // values given back by Close
	Unacknowledged  uint64 // grants not used: too few replicas acknowledged them
}

// Stats returns the counters.
func (s *Sequences) Stats() Stats {
	return Stats{Tags: len(*s.tags.Load()), SegmentsFetched: s.fetched.Load(), Waits: s.waits.Load(), GivenBack: s.givenBack.Load(),
		Unacknowledged: s.unacked.Load()}
}
