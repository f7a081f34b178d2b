package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// NextSeq returns the next value of the named sequence tag (NEXTSEQ tag):
// per tag, values increase and are handed out once across the fleet. It
// fails with an *Error naming each daemon's answer when none gave a value
// (an unknown tag, a tag at its maximum or blocked after a Redis loss is
// answered the same by every daemon).
func (c *Client) NextSeq(ctx context.Context, tag string) (int64, error) {
	var v int64
	err := c.do(ctx, "NEXTSEQ "+tag, func(ctx context.Context, rdb *redis.Client) error {
		cmd := redis.NewIntCmd(ctx, "nextseq", tag)
		_ = rdb.Process(ctx, cmd)
		got, err := cmd.Result()
		if err != nil {
			return err
		}
		if got < 1 {
			return replyError("NEXTSEQ %s gave %d, not a sequence value", tag, got)
		}
		v = got
		return nil
	})
	return v, err
}

// NextSeqs returns n values of the named sequence tag (1..MaxBatch),
// strictly increasing, from one daemon (NEXTSEQ tag n). They are
// consecutive unless they span the daemon's segments.
func (c *Client) NextSeqs(ctx context.Context, tag string, n int) ([]int64, error) {
	if n < 1 || n > c.opts.MaxBatch {
		return nil, fmt.Errorf("flaked client: NEXTSEQ: %w %d, valid range is 1..%d", ErrInvalidCount, n, c.opts.MaxBatch)
	}
	var out []int64
	err := c.do(ctx, "NEXTSEQ "+tag+" "+strconv.Itoa(n), func(ctx context.Context, rdb *redis.Client) error {
		cmd := redis.NewIntSliceCmd(ctx, "nextseq", tag, n)
		_ = rdb.Process(ctx, cmd)
		vals, err := cmd.Result()
		if err != nil {
			return err
		}
		if len(vals) != n {
			return replyError("NEXTSEQ %s %d gave %d values", tag, n, len(vals))
		}
		for i, v := range vals {
			if v < 1 || i > 0 && v <= vals[i-1] {
				return replyError("NEXTSEQ %s %d gave %d after %d: values must increase strictly", tag, n, v, max(0, vals[max(0, i-1)]))
			}
		}
		out = vals
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
