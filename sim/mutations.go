package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/flaked/flaked/scripts/lua"
)

// Mutation is a bug the design exists to prevent, brought back on purpose:
// the teeth test shows the simulator finds each. A mutation of a script
// is a text substitution the simulated Redis applies; one of Go code is a
// switch of package internal/bugs, present only in a `-tags simbugs`
// build.
type Mutation struct {
	Name string
	Bug  string // what goes wrong
	// A script mutation: in Script, Old is replaced by New.
	Script   *string
	Old, New string
	// A Go mutation: the internal/bugs switch it sets.
	Switch string
}

// Mutations are the bugs the simulator must find.
var Mutations = []Mutation{
	{Name: "state-file-token", Switch: "StateFileToken",
		Bug: "fencing by state-file token only: two processes started from copies of one state file share the lease"},
	{Name: "loss-floor-ignored", Script: &lua.Claim,
		Old: "local lossFloor = tickOf(lossMs, epochUs, unitUs) + math.max(horizon, metaHorizon)",
		New: "local lossFloor = -1",
		Bug: "a claim trusts a reservation that a failover or restart rolled back"},
	{Name: "reassert-after-loss", Script: &lua.Renew,
		Old: "if lossID ~= knownLoss then",
		New: "if false then",
		Bug: "a displaced node re-asserts a lease that went missing across a data loss, at a stale floor"},
	{Name: "issue-past-reservation", Switch: "IssuePastReservation",
		Bug: "the generator issues ticks it has not reserved"},
	{Name: "release-below-used", Switch: "ReleaseBelowUsed",
		Bug: "a release lowers the reservation below the ticks used"},
	{Name: "counter-floor-time", Script: &lua.Counter,
		Old: "cur = maxOf(maxOf(cur, {T - 1, MASK}), {lossTick + lossLead, MASK})",
		New: "cur = maxOf(cur, {T - 1, MASK})",
		Bug: "a present counter key is floored only to Redis TIME after a failover"},
	{Name: "reassert-without-layout", Script: &lua.Renew,
		Old: "if not stored then\n  redis.call('SET', KEYS[5], layout)",
		New: "if not stored then\n  stored = layout",
		Bug: "leases are re-asserted after a total loss without restoring the fleet's layout, so a node with another layout joins"},
}

// findMutation returns the mutation called name.
func FindMutation(name string) (Mutation, error) {
	for _, m := range Mutations {
		if m.Name == name {
			return m, nil
		}
	}
	var names []string
	for _, m := range Mutations {
		names = append(names, m.Name)
	}
	return Mutation{}, fmt.Errorf("sim: no mutation %q; known: %s", name, strings.Join(names, ", "))
}

// mutants returns what the simulated Redis runs instead of the script
// the code sends, by the SHA1 the code sends: nil for none.
func (m Mutation) mutants() map[string]string {
	if m.Script == nil {
		return nil
	}
	if !strings.Contains(*m.Script, m.Old) {
		panic(fmt.Sprintf("sim: mutation %s: the script no longer contains %q; update the mutation", m.Name, m.Old))
	}
	sum := sha1.Sum([]byte(*m.Script))
	return map[string]string{hex.EncodeToString(sum[:]): strings.Replace(*m.Script, m.Old, m.New, 1)}
}

// Enable turns a Go mutation's switch on (and returns the function that
// turns it off); a script mutation needs nothing. It fails for a Go
// mutation in a build without -tags simbugs. Not safe while other runs
// are in progress.
func (m Mutation) Enable() (func(), error) {
	if m.Switch == "" {
		return func() {}, nil
	}
	return setSwitch(m.Switch)
}
