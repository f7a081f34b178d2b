package node

import (
	"strconv"
	"strings"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/replwait"
)

// Ready reports whether IDs can be issued now: in flake mode the lease is
// held and the reservation has headroom or can be extended; in counter
// mode the last fetch from Redis succeeded.
func (n *Node) Ready() bool {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		// Not ready while the next IDs would wait for the clock: a floor
		// (a loss floor, a restart after a crash) more than MaxLead ahead
		// of it that Redis has not granted past yet (once it has, the
		// generator starts there, ahead of its clock).
		st := s.gen.Stats()
		lead := int64(n.opts.MaxLead / n.reg.Layout().TimeUnit)
		return !st.Closed && (st.Floor-st.Now <= lead || st.Granted > st.Floor) && (st.LastError == nil || st.Headroom > 0)
	case s.ctr != nil:
		// Ready when IDs are buffered, or the last fetch from Redis worked.
		st := s.ctr.Stats()
		return st.Buffered > 0 || (st.SegmentsFetched > 0 && st.LastError == nil)
	}
	return false
}

// Info returns INFO pairs: the node's, then its generator's, counter's and
// lease's, whichever it has now. The server adds mode and layout (Mode,
// Layout); numeric fields become the metrics flaked_node_<key>.
func (n *Node) Info() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.src.Load()
	standalone := "no"
	if n.Standalone() {
		standalone = "yes"
	}
	out := [][2]string{
		{"mode_configured", n.opts.Mode.String()},
		{"mode_reason", n.reason},
		{"mode_switches", strconv.FormatUint(n.switches.Load(), 10)},
		{"standalone", standalone},
		{"namespace", n.reg.Options().Namespace},
		{"state_file", n.opts.StateFile},
		{"machine_ids", n.machineIDsText()},
	}
	if s.gen != nil {
		out = append(out, generatorInfo(s.gen.Stats())...)
	}
	if s.ctr != nil {
		out = append(out, counterInfo(s.ctr.Stats())...)
	}
	if n.lease != nil {
		out = append(out, leaseInfo(n.lease.Stats())...)
		out = append(out, grantInfo("lease", n.reg.ReplicaStatus())...)
	}
	return append(out, [2]string{"claim_last_error", errText(n.claimErr)})
}

// machineIDsText is the leased machine IDs, comma-separated; n.mu is held.
func (n *Node) machineIDsText() string {
	if n.lease == nil {
		return ""
	}
	parts := make([]string, 0, len(n.lease.MachineIDs()))
	for _, m := range n.lease.MachineIDs() {
		parts = append(parts, strconv.Itoa(m))
	}
	return strings.Join(parts, ",")
}

func generatorInfo(st flake.Stats) [][2]string {
	return [][2]string{
		{"tick_now", strconv.FormatInt(st.Now, 10)},
		{"tick_last", strconv.FormatInt(st.Last, 10)},
		{"tick_reserved", strconv.FormatInt(st.Granted, 10)},
		{"tick_floor", strconv.FormatInt(st.Floor, 10)},
		{"lead_ms", strconv.FormatInt(st.Lead.Milliseconds(), 10)},
		{"reservation_headroom_ms", strconv.FormatInt(st.Headroom.Milliseconds(), 10)},
		{"nextid_waits", strconv.FormatUint(st.Waits, 10)},
		{"reserve_errors", strconv.FormatUint(st.ReserveErrors, 10)},
	}
}

func counterInfo(cs fallback.Stats) [][2]string {
	return append([][2]string{
		{"counter_segments", strconv.FormatUint(cs.SegmentsFetched, 10)},
		{"counter_segment_size", strconv.Itoa(cs.SegmentSize)},
		{"counter_buffered", strconv.FormatInt(cs.Buffered, 10)},
		{"counter_waits", strconv.FormatUint(cs.Waits, 10)},
		{"counter_fetch_errors", strconv.FormatUint(cs.FetchErrors, 10)},
		{"counter_last_error", errText(cs.LastError)},
	}, grantInfo("counter", cs.Replicas)...)
}

// grantInfo is what the last grant of a kind (lease: claims and renewals;
// counter: segments) waited for: "sentinels" or "replicas" in
// <kind>_grant_safe_by when it was used, the replicas it needed and that
// acknowledged, those the master listed, why the Sentinels did not vouch
// for it, and why it was refused, with the fix. Empty before the first.
func grantInfo(kind string, st *replwait.Status) [][2]string {
	if st == nil {
		st = &replwait.Status{}
	}
	refused := "0"
	if st.Err != "" {
		refused = "1"
	}
	return [][2]string{
		{kind + "_grant_safe_by", st.Via},
		{kind + "_grant_replicas_needed", strconv.FormatInt(st.Need, 10)},
		{kind + "_grant_replicas_acked", strconv.FormatInt(st.Acked, 10)},
		{kind + "_grant_replicas_listed", st.Listed},
		{kind + "_grant_sentinels", st.Sentinels},
		{kind + "_grant_refused", refused},
		{kind + "_grant_refused_why", st.Err},
	}
}

// leaseInfo: lease_renewal_failures keeps its INFO and metric name; the
// Go field is RenewErrors.
func leaseInfo(ls coord.LeaseStats) [][2]string {
	return [][2]string{
		{"state_file_error", errText(ls.StateErr)},
		{"lease_renewals", strconv.FormatUint(ls.Renews, 10)},
		{"lease_renewal_failures", strconv.FormatUint(ls.RenewErrors, 10)},
		{"lease_lost", strconv.FormatBool(ls.Lost)},
		{"lease_last_error", errText(ls.LastError)},
	}
}

// errText is an INFO value for an error: "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
