//go:build !simbugs

// Package bugs holds switches that bring back, on purpose, bugs the design
// exists to prevent, so the simulator's teeth test (package sim) can show
// it finds each. In a normal build every switch is a false constant and
// the code behind it is compiled away; `go test -tags simbugs` makes them
// variables.
package bugs

// The switches; see bugs_sim.go.
const (
	StateFileToken       = false
	IssuePastReservation = false
	ReleaseBelowUsed     = false
	CounterFleetWide     = false
	ReplicaWaitOff       = false
	MinReplicasIgnored   = false
	// The Sentinel rule's (internal/replwait, sentinel.go).
	SentinelQuorum          = false
	SentinelNoMaxCheckAge   = false
	SentinelRunIDUnchecked  = false
	SentinelFailoverIgnored = false
	SentinelReplicasIgnored = false
)
