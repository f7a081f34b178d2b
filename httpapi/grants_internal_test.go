package httpapi

import (
	"strings"
	"testing"
)

// The status page's line per kind of grant says what made the last one
// safe to use, or why it was refused with the fix the refusal names.
func TestGrantText(t *testing.T) {
	for _, c := range []struct {
		info map[string]string
		want string
	}{
		{map[string]string{}, ""},
		{map[string]string{"lease_grant_safe_by": "sentinels"}, "lease: used: every Sentinel reported the master up"},
		{map[string]string{"lease_grant_safe_by": "replicas", "lease_grant_replicas_needed": "0"}, "lease: used: no replica to wait for"},
		{map[string]string{"lease_grant_safe_by": "replicas", "lease_grant_replicas_needed": "2", "lease_grant_replicas_acked": "2",
			"lease_grant_replicas_listed": "10.0.0.2:6379 online,10.0.0.3:6379 online"}, "lease: used: 2 of 2 replicas acknowledged (the master lists 10.0.0.2:6379 online,"},
		{map[string]string{"lease_grant_refused": "1", "lease_grant_refused_why": "grant not acknowledged by the replicas: 1 of 2; lower the mark with flaked audit replicas --set 1"},
			"lease: refused: grant not acknowledged by the replicas: 1 of 2; lower the mark with flaked audit replicas --set 1"},
	} {
		if got := grantText("lease", c.info); (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("grantText(%v) = %q, want %q...", c.info, got, c.want)
		}
	}
}
