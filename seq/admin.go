package seq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

// Create makes a tag with opts (defaults filled in). It fails with
// ErrExists when the tag exists: a tag's settings are fixed.
func (s *Sequences) Create(ctx context.Context, name string, opts TagOptions) error {
	if err := contract.CheckTag(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	a := s.args(contract.SeqCreate, name)
	a.Start, a.Step, a.Max, a.Rate, a.Burst, a.MaxJump = o.Start, o.Step, o.Max, o.Rate, o.Burst, o.MaxJump
	keys, argv := a.KeysArgv()
	res, err := script.Run(ctx, s.rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return fmt.Errorf("%w: creating tag %s: %w", ErrUnavailable, name, err)
	}
	s.known.Store(true)
	switch res[0] {
	case "EXISTS":
		return fmt.Errorf("%w: %s (its settings are fixed; flaked seq list shows them)", ErrExists, name)
	case "LOST":
		// Made before and lost since: created anew it would hand out its
		// values again.
		return fmt.Errorf("%w: tag %s: %s", ErrBlocked, name, contract.SeqLostText(name, "0"))
	}
	return nil
}

// Restore raises the tag above `above` and resumes it: it clears a block,
// drops the free list and any pending loss, and creates a missing tag
// with opts (starting after above). above must be at or above every value
// the tag ever handed out (from the business's records or the audit
// stream): flaked cannot check it. After a loss, or once the tag is found
// missing, it fails with ErrRestoreTooEarly until no segment granted
// before can be handed out; every segment granted before a restore is
// retired by it (never renewed, never given back).
func (s *Sequences) Restore(ctx context.Context, name string, above int64, opts TagOptions) (int64, error) {
	if err := contract.CheckTag(name); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if above < 0 || above >= MaxValue {
		return 0, fmt.Errorf("%w: above %d: valid range is 0..%d", ErrInvalidOptions, above, MaxValue-1)
	}
	if opts.Start == 0 {
		opts.Start = above + 1
	}
	o, err := opts.withDefaults()
	if err != nil {
		return 0, err
	}
	a := s.args(contract.SeqRestore, name)
	a.Above = above
	a.Start, a.Step, a.Max, a.Rate, a.Burst, a.MaxJump = o.Start, o.Step, o.Max, o.Rate, o.Burst, o.MaxJump
	keys, argv := a.KeysArgv()
	res, err := script.Run(ctx, s.rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return 0, fmt.Errorf("%w: restoring tag %s: %w", ErrUnavailable, name, err)
	}
	s.known.Store(true)
	if res[0] == "WAIT" {
		ms, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		lossMs, _ := strconv.ParseInt(fmt.Sprint(res[2]), 10, 64)
		return 0, fmt.Errorf("%w: Redis lost writes, or tag %s went missing, at %s; segments granted before may be handed out until %v from now: run restore again then, with N read from your records then",
			ErrRestoreTooEarly, name, time.UnixMilli(lossMs).UTC().Format(time.RFC3339Nano), time.Duration(ms)*time.Millisecond)
	}
	high, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	return high, nil
}

// ErrRestoreTooEarly: Restore of a tag after a loss, or after the tag was
// found missing, before every segment granted before then has expired
// (then + 1 s + SegmentTTL).
var ErrRestoreTooEarly = errors.New("too early to restore")

// TagInfo is what Redis holds of a tag.
type TagInfo struct {
	Tag string `json:"tag"`
	TagOptions
	High      int64  `json:"high"` // the last value granted: the high-water mark
	Free      string `json:"free"` // given back, not granted again yet ("a-b,c-d")
	FreeCount int64  `json:"free_count"`
	GivenBack int64  `json:"given_back"` // values given back by clean stops
	Lost      int64  `json:"lost"`       // values skipped for good: loss jumps, rests that could not go back
	Jumps     int64  `json:"jumps"`      // loss jumps
	Grants    int64  `json:"grants"`
	Blocked   string `json:"blocked"` // why the tag hands nothing out, "" when it does
	Missing   bool   `json:"missing"` // known (listed in {ns}:seqs, or found missing before), but its hash is gone
	// MissingSince is when a script first found the hash gone (zero when
	// none did yet): a restore is accepted from 11 s after it.
	MissingSince time.Time `json:"missing_since,omitzero"`
}

// RestoreFrom is when a restore of a tag missing since MissingSince is
// accepted: no segment granted before can be handed out by then (seq.lua
// waits redisSkewMs + segmentTTLMs).
func (ti TagInfo) RestoreFrom() time.Time {
	return ti.MissingSince.Add(contract.RedisSkew + SegmentTTL)
}

// List reads every tag of the namespace, sorted by name: those listed in
// {ns}:seqs and those found missing ({ns}:meta). It only reads.
func List(ctx context.Context, rdb redis.UniversalClient, namespace string) ([]TagInfo, error) {
	k := contract.NewKeys(namespace)
	names, err := rdb.SMembers(ctx, k.Seqs()).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.Seqs(), err)
	}
	meta, err := rdb.HKeys(ctx, k.Meta).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.Meta, err)
	}
	for _, f := range meta {
		if tag, ok := strings.CutPrefix(f, contract.MetaSeqMissing); ok && !slices.Contains(names, tag) {
			names = append(names, tag)
		}
	}
	sort.Strings(names)
	out := make([]TagInfo, 0, len(names))
	for _, name := range names {
		ti, err := Info(ctx, rdb, namespace, name)
		if err != nil {
			return nil, err
		}
		out = append(out, ti)
	}
	return out, nil
}

// Info reads one tag.
func Info(ctx context.Context, rdb redis.UniversalClient, namespace, name string) (TagInfo, error) {
	k := contract.NewKeys(namespace)
	h, err := rdb.HGetAll(ctx, k.Seq(name)).Result()
	if err != nil {
		return TagInfo{}, fmt.Errorf("reading %s: %w", k.Seq(name), err)
	}
	ti := TagInfo{Tag: name, Missing: len(h) == 0}
	if ti.Missing {
		since, err := rdb.HGet(ctx, k.Meta, contract.MetaSeqMissing+name).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return TagInfo{}, fmt.Errorf("reading %s: %w", k.Meta, err)
		}
		if since > 0 {
			ti.MissingSince = time.UnixMilli(since).UTC()
		}
	}
	n := func(f string) int64 { v, _ := strconv.ParseInt(h[f], 10, 64); return v }
	ti.Start, ti.Step, ti.Max, ti.Rate, ti.Burst, ti.MaxJump = n(contract.SeqFieldStart), n(contract.SeqFieldStep),
		n(contract.SeqFieldMax), n(contract.SeqFieldRate), n(contract.SeqFieldBurst), n(contract.SeqFieldMaxJump)
	ti.High, ti.GivenBack, ti.Lost, ti.Jumps, ti.Grants = n(contract.SeqFieldHigh), n(contract.SeqFieldGivenBack),
		n(contract.SeqFieldLost), n(contract.SeqFieldJumps), n(contract.SeqFieldGrants)
	ti.Free = h[contract.SeqFieldFree]
	if b := h[contract.SeqFieldBlocked]; b != "" {
		ti.Blocked = contract.SeqBlockedText(name, b)
	}
	var a, b int64
	for rest := ti.Free; rest != ""; {
		var part string
		part, rest, _ = cut(rest, ',')
		if _, err := fmt.Sscanf(part, "%d-%d", &a, &b); err == nil {
			ti.FreeCount += b - a + 1
		}
	}
	return ti, nil
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
