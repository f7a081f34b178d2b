package seq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fleet's split-brain rule (DESIGN point 3, the same as for leases and
// counter segments): a segment is used only after WAIT, sent on the same
// connection right after seq.lua, reports as many replicas as the script
// says are needed (the replicas the master lists now, or the fleet's
// high-water mark `replicas` in {ns}:meta when higher). A grant that is
// not acknowledged is not used: its values are a gap, never a reuse, and
// an old master cut off from its replicas cannot have its grants used
// while the promoted replica grants the same values.

// WaitTimeout bounds the WAIT after a grant: no caller waits much longer
// for an acknowledgement, and a master that cannot get one fails closed.
const WaitTimeout = 200 * time.Millisecond

// ErrNotAcknowledged is wrapped when a segment was granted but not
// acknowledged by enough replicas within WaitTimeout.
var ErrNotAcknowledged = errors.New("segment not acknowledged by the replicas")

// grantConn is the client a grant and its WAIT go through on one
// connection: the master of the namespace's slot on Redis Cluster.
func (s *Sequences) grantConn(ctx context.Context) (redis.Cmdable, error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, s.keys.Seqs())
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return s.rdb, nil
}

// runGrant runs seq.lua with keys and argv and, when need > 0, WAIT need
// in the same pipeline (one connection, right after the script). It
// returns the script's reply and the replicas WAIT reported (0 without a
// WAIT).
func (s *Sequences) runGrant(ctx context.Context, keys []string, argv []any, need int64) ([]any, int64, error) {
	if need <= 0 {
		res, err := script.Run(ctx, s.rdb, keys, argv...).Slice()
		return res, 0, err
	}
	c, err := s.grantConn(ctx)
	if err != nil {
		return nil, 0, err
	}
	for attempt := 0; ; attempt++ {
		pipe := c.Pipeline()
		ev := script.EvalSha(ctx, pipe, keys, argv...)
		w := pipe.Do(ctx, "WAIT", need, WaitTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := ev.Err(); err != nil {
			if attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				if err := script.Load(ctx, c).Err(); err != nil {
					return nil, 0, err
				}
				continue
			}
			return nil, 0, err
		}
		res, err := ev.Slice()
		if err != nil {
			return nil, 0, err
		}
		acked, err := w.Int64()
		if err != nil {
			// The grant happened, its acknowledgement is unknown: unused.
			return res, -1, fmt.Errorf("%w: WAIT %d: %w", ErrNotAcknowledged, need, err)
		}
		return res, acked, nil
	}
}

// replicasNeeded reads the last item of an OK reply of seq.lua.
func replicasNeeded(res []any) int64 {
	if len(res) < 6 {
		return 0
	}
	v, _ := res[5].(string)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}
