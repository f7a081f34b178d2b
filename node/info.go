package node

import (
	"strconv"
	"strings"
)

// Ready reports whether IDs can be issued now: in flake mode the lease is
// held and the reservation has headroom or can be extended; in counter
// mode the last fetch from Redis succeeded.
func (n *Node) Ready() bool {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		// Not ready while the next IDs would wait for the clock: a floor
		// (a fresh registry's horizon, a restart after a crash) more than
		// MaxLead ahead of it.
		st := s.gen.Stats()
		lead := int64(n.opts.MaxLead / n.reg.Layout().TimeUnit)
		return !st.Closed && st.Floor-st.Now <= lead && (st.LastError == nil || st.Headroom > 0)
	case s.ctr != nil:
		// Ready when IDs are buffered, or the last fetch from Redis worked.
		st := s.ctr.Stats()
		return st.Buffered > 0 || (st.SegmentsFetched > 0 && st.LastError == nil)
	}
	return false
}

// Info returns INFO pairs.
func (n *Node) Info() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.src.Load()
	standalone := "no"
	if n.Standalone() {
		standalone = "yes"
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	// mode and layout: the server adds them (Mode, Layout).
	out := [][2]string{
		{"mode_configured", n.opts.Mode.String()},
		{"mode_reason", n.reason},
		{"mode_switches", strconv.FormatUint(n.switches.Load(), 10)},
		{"standalone", standalone},
		{"namespace", n.reg.Options().Namespace},
		{"state_file", n.opts.StateFile},
	}
	ids := ""
	if n.lease != nil {
		parts := make([]string, 0, len(n.lease.MachineIDs()))
		for _, m := range n.lease.MachineIDs() {
			parts = append(parts, strconv.Itoa(m))
		}
		ids = strings.Join(parts, ",")
	}
	out = append(out, [2]string{"machine_ids", ids})
	if s.gen != nil {
		st := s.gen.Stats()
		out = append(out,
			[2]string{"tick_now", strconv.FormatInt(st.Now, 10)},
			[2]string{"tick_last", strconv.FormatInt(st.Last, 10)},
			[2]string{"tick_reserved", strconv.FormatInt(st.Granted, 10)},
			[2]string{"tick_floor", strconv.FormatInt(st.Floor, 10)},
			[2]string{"lead_ms", strconv.FormatInt(st.Lead.Milliseconds(), 10)},
			[2]string{"reservation_headroom_ms", strconv.FormatInt(st.Headroom.Milliseconds(), 10)},
			[2]string{"nextid_waits", strconv.FormatUint(st.Waits, 10)},
			[2]string{"reserve_errors", strconv.FormatUint(st.ReserveErrors, 10)},
		)
	}
	if s.ctr != nil {
		cs := s.ctr.Stats()
		out = append(out,
			[2]string{"counter_segments", strconv.FormatUint(cs.SegmentsFetched, 10)},
			[2]string{"counter_segment_size", strconv.Itoa(cs.SegmentSize)},
			[2]string{"counter_buffered", strconv.FormatInt(cs.Buffered, 10)},
			[2]string{"counter_waits", strconv.FormatUint(cs.Waits, 10)},
			[2]string{"counter_fetch_errors", strconv.FormatUint(cs.FetchErrors, 10)},
			[2]string{"counter_last_error", errText(cs.LastError)},
		)
	}
	if n.lease != nil {
		ls := n.lease.Stats()
		out = append(out,
			[2]string{"state_file_error", errText(ls.StateErr)},
			[2]string{"lease_renewals", strconv.FormatUint(ls.Renews, 10)},
			[2]string{"lease_renewal_failures", strconv.FormatUint(ls.RenewErrors, 10)},
			[2]string{"lease_lost", strconv.FormatBool(ls.Lost)},
			[2]string{"lease_last_error", errText(ls.LastError)},
		)
	}
	out = append(out, [2]string{"claim_last_error", errText(n.claimErr)})
	return out
}
