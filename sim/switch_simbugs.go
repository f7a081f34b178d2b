//go:build simbugs

package sim

import (
	"fmt"

	"github.com/flaked/flaked/internal/bugs"
)

// setSwitch turns a switch of package bugs on.
func setSwitch(name string) (func(), error) {
	var p *bool
	switch name {
	case "StateFileToken":
		p = &bugs.StateFileToken
	case "IssuePastReservation":
		p = &bugs.IssuePastReservation
	case "ReleaseBelowUsed":
		p = &bugs.ReleaseBelowUsed
	case "CounterFleetWide":
		p = &bugs.CounterFleetWide
	case "ReplicaWaitOff":
		p = &bugs.ReplicaWaitOff
	case "MinReplicasIgnored":
		p = &bugs.MinReplicasIgnored
	case "SentinelQuorum":
		p = &bugs.SentinelQuorum
	case "SentinelNoMaxCheckAge":
		p = &bugs.SentinelNoMaxCheckAge
	case "SentinelRunIDUnchecked":
		p = &bugs.SentinelRunIDUnchecked
	case "SentinelFailoverIgnored":
		p = &bugs.SentinelFailoverIgnored
	case "SentinelReplicasIgnored":
		p = &bugs.SentinelReplicasIgnored
	default:
		return nil, fmt.Errorf("sim: no switch %q in package bugs", name)
	}
	*p = true
	return func() { *p = false }, nil
}
