package node

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
)

// startStore starts the embedded store of a standalone node on a loopback
// port. Its TIME (also inside the scripts) answers from the node's clock,
// not the host's: the store runs on the node's host, so a clock set back
// there is set back for both, and the clock guard compares the node with
// its own store. miniredis would answer from time.Now.
func startStore(clk clock.Clock) (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("standalone store: %w", err)
	}
	// The hook runs before miniredis's own command handler, for commands
	// from connections and from scripts alike, and takes no lock (a
	// script's calls run under miniredis's). Nothing issues TIME inside
	// MULTI on this store, where answering at once would be wrong.
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd != "TIME" || len(args) != 0 {
			return false
		}
		now := clk.Now()
		c.WriteLen(2)
		c.WriteBulk(strconv.FormatInt(now.Unix(), 10))
		c.WriteBulk(strconv.Itoa(now.Nanosecond() / 1000))
		return true
	})
	return mr, nil
}

// standaloneClock is the clock a standalone node runs on. The embedded
// store is new at every start, so the state file's reservation is the only
// record of the ticks this host has used, under any machine ID. When the
// clock is behind it by more than maxWait (set back while the node was
// down), waiting would stop the node for as long, and claiming other
// machine IDs, as a fleet node does, would start them at no floor at all:
// the node runs from the reservation on instead, its clock shifted
// forward by the difference, so every ID is above every ID the file
// covers. IDs then carry times ahead of the host's clock by that much, as
// they would have if the clock had not been set back.
func (n *Node) standaloneClock(ro coord.Options) clock.Clock {
	st := n.prev
	if st == nil || st.Namespace != cmp.Or(ro.Namespace, coord.DefaultNamespace) || st.Layout != ro.Layout.String() {
		return n.opts.Clock // nothing to go by; a foreign file fails the claim
	}
	l := ro.Layout
	gap := time.Duration(st.Reservation+1-l.Tick(n.opts.Clock.Now())) * l.TimeUnit
	if gap <= ro.MaxWait {
		return n.opts.Clock // a restart after a crash: the generator waits it out
	}
	n.log.Warn().Str("state_file", n.opts.StateFile).Dur("behind", gap).Int64("reservation", st.Reservation).
		Msg("standalone: the clock is behind the state file's reservation (set back?); issuing from the reservation on, IDs ahead of this clock by that much")
	return shiftedClock{Clock: n.opts.Clock, by: gap}
}

// shiftedClock is a clock whose wall time is ahead of another's by a fixed
// amount; its monotonic clock and timers are the other's.
type shiftedClock struct {
	clock.Clock
	by time.Duration
}

func (c shiftedClock) Now() time.Time { return c.Clock.Now().Add(c.by) }
