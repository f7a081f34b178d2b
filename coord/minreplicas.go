package coord

import "strings"

// SentinelMinReplicas is the floor of Options.MinReplicas that flaked serve,
// flaked doctor and DefaultMinReplicas take for a deployment reached
// through Sentinel, unless the operator sets one. Sentinel exists to promote
// a replica, so such a deployment has one by definition; without a floor the
// fleet's replicas high-water mark alone decides how many replicas a grant
// must reach, and the SPIN model shows two split brains through a mark of 0
// (docs/model.md, Findings: a mark made on a master already cut off from
// its replica, and a promotion lowering it to 0 before a second split). A
// floor of 1 closes both (split-waitmin-counter), at the price that grants
// stop, failing closed, while no replica is online.
const SentinelMinReplicas = 1

// DefaultMinReplicas is the Options.MinReplicas a fleet reaching Redis at
// rawURL (NewClient's forms) gets when the operator sets none:
// SentinelMinReplicas for redis-sentinel:// and rediss-sentinel://, 0
// otherwise (a single server, or a Cluster, whose masters' replicas the
// mark counts as listed).
func DefaultMinReplicas(rawURL string) int {
	scheme, _, _ := strings.Cut(rawURL, "://")
	if strings.HasSuffix(scheme, "-sentinel") {
		return SentinelMinReplicas
	}
	return 0
}
