package node_test

import (
	"slices"
	"testing"

	"github.com/flaked/flaked/node"
)

// infoMap returns a node's INFO pairs as keys in order and a map.
func infoMap(n *node.Node) ([]string, map[string]string) {
	var keys []string
	m := map[string]string{}
	for _, kv := range n.Info() {
		keys = append(keys, kv[0])
		m[kv[0]] = kv[1]
	}
	return keys, m
}

// The INFO fields of each mode, in order, with the values operators and
// the metrics read (flaked_node_<key>): their names and texts do not change.
func TestInfo_FieldsPerMode(t *testing.T) {
	head := []string{"mode_configured", "mode_reason", "mode_switches", "standalone", "namespace", "state_file", "machine_ids"}
	flakeKeys := append(slices.Clone(head), "tick_now", "tick_last", "tick_reserved", "tick_floor", "lead_ms",
		"reservation_headroom_ms", "nextid_waits", "reserve_errors",
		"state_file_error", "lease_renewals", "lease_renewal_failures", "lease_lost", "lease_last_error")
	grant := func(kind string) []string {
		var out []string
		for _, f := range []string{"safe_by", "replicas_needed", "replicas_acked", "replicas_listed", "sentinels", "refused", "refused_why"} {
			out = append(out, kind+"_grant_"+f)
		}
		return out
	}
	flakeKeys = append(append(flakeKeys, grant("lease")...), "claim_last_error")
	counterKeys := append(slices.Clone(head), "counter_segments", "counter_segment_size", "counter_buffered",
		"counter_waits", "counter_fetch_errors", "counter_last_error")
	counterKeys = append(append(counterKeys, grant("counter")...), "claim_last_error")

	t.Run("flake standalone", func(t *testing.T) {
		n := newNode(t, node.Options{MachineIDs: 2})
		keys, m := infoMap(n)
		if !slices.Equal(keys, flakeKeys) {
			t.Fatalf("keys %v\nwant %v", keys, flakeKeys)
		}
		mids := n.MachineIDs()
		want := map[string]string{"mode_configured": "flake", "mode_reason": "", "mode_switches": "0", "standalone": "yes",
			"namespace": "flaked", "state_file": "", "reserve_errors": "0", "lease_lost": "false", "lease_last_error": "",
			"lease_renewal_failures": "0", "state_file_error": "", "claim_last_error": "",
			"machine_ids": itoa(mids[0]) + "," + itoa(mids[1])}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s = %q, want %q", k, m[k], v)
			}
		}
	})
	t.Run("counter", func(t *testing.T) {
		srv := realRedis(t)
		n := newNode(t, node.Options{Redis: client(t, srv), Mode: node.ModeCounter})
		keys, m := infoMap(n)
		if !slices.Equal(keys, counterKeys) {
			t.Fatalf("keys %v\nwant %v", keys, counterKeys)
		}
		want := map[string]string{"mode_configured": "counter", "mode_reason": "mode counter", "mode_switches": "0",
			"standalone": "no", "machine_ids": "", "counter_last_error": "", "claim_last_error": ""}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s = %q, want %q", k, m[k], v)
			}
		}
	})
	t.Run("auto", func(t *testing.T) {
		srv := realRedis(t)
		n := newNode(t, node.Options{Redis: client(t, srv), Mode: node.ModeAuto})
		keys, m := infoMap(n)
		if n.Mode() != node.ModeFlake || !slices.Equal(keys, flakeKeys) {
			t.Fatalf("mode %v, keys %v\nwant flake, %v", n.Mode(), keys, flakeKeys)
		}
		if m["mode_configured"] != "auto" || m["standalone"] != "no" {
			t.Fatalf("mode_configured %q, standalone %q", m["mode_configured"], m["standalone"])
		}
	})
}
