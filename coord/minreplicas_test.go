package coord_test

import (
	"testing"

	"github.com/flaked/flaked/coord"
)

// A deployment reached through Sentinel gets a floor of one replica (the
// model's split-brain trails need a mark of 0 on a master Sentinel may
// replace); every other form of URL none.
func TestDefaultMinReplicas_SentinelOnly(t *testing.T) {
	for url, want := range map[string]int{
		"redis-sentinel://10.0.0.7:26379,10.0.0.8:26379/flaked": coord.SentinelMinReplicas,
		"rediss-sentinel://10.0.0.7:26379/flaked":               coord.SentinelMinReplicas,
		"redis://10.0.0.5:6379":                                 0,
		"rediss://10.0.0.5:6379":                                0,
		"redis-cluster://10.0.0.5:7000,10.0.0.6:7000":           0,
		"": 0,
	} {
		if got := coord.DefaultMinReplicas(url); got != want {
			t.Errorf("DefaultMinReplicas(%q) = %d, want %d", url, got, want)
		}
	}
}
