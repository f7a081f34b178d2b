package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

// clock: this host's clock against each server's TIME (a node refuses to
// claim beyond --max-skew), and the servers' clocks against each other:
// guard.lua's floors after a failover assume a master and the replicas
// that may replace it differ by at most contract.RedisSkew.
func init() { register("clock", false, checkClock) }

// offset is a server's clock minus this host's, and how far off the
// reading may be (half the round trip).
type offset struct {
	addr     string
	off, err time.Duration
}

func readOffset(ctx context.Context, e *env, c *redis.Client) (time.Duration, time.Duration, error) {
	best, bestErr := time.Duration(0), time.Duration(-1)
	for range 3 { // the reading with the shortest round trip
		t0 := e.t.Clock.Now()
		rt, err := c.Time(ctx).Result()
		t1 := e.t.Clock.Now()
		if err != nil {
			return 0, 0, err
		}
		half := t1.Sub(t0) / 2
		if bestErr < 0 || half < bestErr {
			best, bestErr = rt.Sub(t0.Add(half)), half
		}
	}
	return best, bestErr, nil
}

func checkClock(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil {
		return nil
	}
	var out []Result
	var offs []offset
	for _, s := range ss {
		all := []struct {
			addr string
			c    *redis.Client
		}{{s.addr, s.c}}
		for _, a := range replicaAddrs(s.info) {
			rc := s.dial(a)
			defer rc.Close()
			all = append(all, struct {
				addr string
				c    *redis.Client
			}{a + " (replica)", rc})
		}
		for _, x := range all {
			off, uncert, err := readOffset(ctx, e, x.c)
			r := Result{Server: x.addr}
			if err != nil {
				r.Status, r.Detail = Costly, "cannot tell: TIME: "+err.Error()
				out = append(out, r)
				continue
			}
			offs = append(offs, offset{x.addr, off, uncert})
			r.Detail = fmt.Sprintf("Redis TIME is %v from this host's clock (±%v); nodes refuse to claim beyond --max-skew %v",
				off.Round(time.Microsecond), uncert.Round(time.Microsecond), e.t.MaxSkew)
			switch d := abs(off) - uncert; {
			case d > e.t.MaxSkew && e.t.AsNode:
				// flaked serve: the node's own clock guard refuses the claim,
				// with its error.
				r.Status, r.Fix = Costly, "synchronise the clocks (NTP/chrony): this node refuses to claim"
			case d > e.t.MaxSkew:
				r.Status, r.Fix = Unsafe, "synchronise the clocks (NTP/chrony): a node on this host refuses to claim"
			case d > e.t.MaxSkew/2:
				r.Status, r.Fix = Costly, "synchronise the clocks (NTP/chrony): the skew is over half of --max-skew"
			}
			out = append(out, r)
		}
	}
	if len(offs) > 1 {
		lo, hi := offs[0], offs[0]
		for _, o := range offs[1:] {
			if o.off < lo.off {
				lo = o
			}
			if o.off > hi.off {
				hi = o
			}
		}
		spread := hi.off - lo.off - hi.err - lo.err
		r := Result{Detail: fmt.Sprintf("the Redis servers' clocks are within %v of each other (%s and %s); guard.lua assumes %v",
			max(spread, 0).Round(time.Microsecond), lo.addr, hi.addr, contract.RedisSkew)}
		switch {
		case spread > contract.RedisSkew:
			r.Status, r.Fix = Unsafe, "synchronise the Redis servers' clocks (NTP/chrony): a replica promoted with a clock this far behind can grant below its old master's grants"
		case spread > contract.RedisSkew/2:
			r.Status, r.Fix = Costly, "synchronise the Redis servers' clocks (NTP/chrony)"
		}
		out = append(out, r)
	}
	return out
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
