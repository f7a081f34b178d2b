package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/flaked/flaked/contract"
)

// Mutation is a bug the design exists to prevent, brought back on purpose:
// the teeth test shows the simulator finds each. A mutation of a script
// is a text substitution the simulated Redis applies; one of Go code is a
// switch of package internal/bugs, present only in a `-tags simbugs`
// build.
type Mutation struct {
	Name string
	Bug  string // what goes wrong
	// A script mutation: in Script (and in each of Scripts), each Old is
	// replaced by its New. Scripts: an edit of guard.lua, which every
	// writing script starts with.
	Script  *string
	Scripts []*string
	Edits   []Edit
	// Stray: the bug shows as a duplicate between a node of the fleet's
	// layout and one of another (the teeth test requires that).
	Stray bool
	// Sequences: the bug is in named sequences, found with the sequence
	// client on (Options.Sequences).
	Sequences bool
	// Seeds bounds the hunt of the teeth test when the bug needs more
	// schedules than most (0: the test's bound).
	Seeds uint64
	// A Go mutation: the internal/bugs switch it sets.
	Switch string
	// Requires names a rule (Rules) the failing run must have counted:
	// the bug's way to a duplicate taken, not a failure the change of
	// timing led to.
	Requires string
	// Unfound says why the CI seed set does not find it yet: the teeth
	// test skips it, naming that, until a pattern lines its way up.
	Unfound string
}

// Mutations are the bugs the simulator must find.
var Mutations = []Mutation{
	{Name: "state-file-token", Switch: "StateFileToken",
		Bug: "fencing by state-file token only: two processes started from copies of one state file share the lease"},
	{Name: "loss-floor-ignored", Script: &contract.Claim,
		Edits: []Edit{{"local lossFloor = tickOf((lossMs + redisSkewMs) * 1000, epochUs, unitUs) + math.max(horizon, metaHorizon)", "local lossFloor = -1"}},
		Bug:   "a claim trusts a reservation that a failover or restart rolled back"},
	{Name: "renew-across-loss", Script: &contract.Renew,
		Edits: []Edit{renewAcrossLoss},
		Bug:   "a renewal extends a lease across a possible data loss, which may have lost a takeover by a process that issued above the reservation"},
	// A lease that expired is never re-asserted: its owner claims it again
	// through the preferred-ID path, whose floor is the reservation.
	{Name: "reclaim-below-reservation", Script: &contract.Claim,
		Edits: []Edit{{"  local r = redis.call('HGET', KEYS[4], id)", "  local r = id ~= preferred and redis.call('HGET', KEYS[4], id)"}},
		Bug:   "a node claiming its preferred ID again floors it at its own state file, not at the reservation another owner raised meanwhile"},
	{Name: "issue-past-reservation", Switch: "IssuePastReservation",
		Bug: "the generator issues ticks it has not reserved"},
	{Name: "release-below-used", Switch: "ReleaseBelowUsed",
		Bug: "a release lowers the reservation below the ticks used"},
	// Regions: the simulator runs one region, so the bug shows as IDs
	// outside it (in another region's machine IDs) rather than as the
	// duplicate two regions' counters would make.
	{Name: "counter-fleet-wide", Switch: "CounterFleetWide",
		Bug: "every region's counter runs under the fleet-wide last machine ID, so two regions' counters issue the same IDs"},
	// Two counter-mode nodes on either side of a failover that lost the
	// counter's last writes: rarer than most (hunted up to 20,000).
	{Name: "counter-floor-time", Script: &contract.Counter, Seeds: 20000,
		Edits: []Edit{{"cur = maxOf(maxOf(cur, {T - 1, MASK}), {lossTick + lossLead, MASK})", "cur = maxOf(cur, {T - 1, MASK})"}},
		Bug:   "a present counter key is floored only to Redis TIME after a failover"},
	// A split brain (the old master reached by some nodes while a replica
	// is promoted) is safe only because a grant counts once the replicas
	// hold it.
	{Name: "split-brain-no-wait", Switch: "ReplicaWaitOff",
		Bug: "a grant is used without WAIT confirming it on the fleet's replicas: an old master cut off from them keeps granting while the replica promoted in its place grants too"},
	// INFO refused (NOPERM) or renamed: read as an empty identity, one
	// that never changes, the error would hide a failover while INFO is
	// unreadable. A failover loses grants only where they waited for
	// fewer replicas than there are: where a process that never used a
	// grant restored a registry Redis lost, with the mark of the replicas
	// INFO lists, none (pattern info-restart-then-failover).
	{Name: "identity-silent", Scripts: guarded,
		Edits: []Edit{{infoCall, "(function(i) if type(i) == 'string' then return i end return " +
			"'run_id:0 master_replid:0 maxmemory_policy:noeviction' end)(" + infoCall + ")"}},
		Bug: "a refused or renamed INFO reads as an empty identity: a failover while INFO is unreadable is not seen as a loss"},
	// allkeys-* eviction: the policy is refused, and {ns}:reserved evicted
	// reads as a loss (Redis evicts whatever the scripts refuse). Both off,
	// as in the SPIN model's allkeys tooth: with either one on, an evicted
	// reservation is seen.
	{Name: "allkeys-allowed", Scripts: guarded,
		Edits: []Edit{{"if policy == 'allkeys' then", "if false then"}, {"local evicted = m[5] and", "local evicted = false and"}},
		Bug:   "scripts write under maxmemory-policy allkeys-*, and reservations evicted under the same server are not read as a loss"},
	// A node with another layout must never join: claims compare the
	// fleet's layout with theirs.
	{Name: "layout-unchecked", Script: &contract.Claim, Stray: true,
		Edits: []Edit{{"if stored ~= layout then", "if false then"}},
		Bug:   "a claim does not compare the fleet's stored layout with the node's, so a node with another layout leases machine IDs"},
	// Only flaked init makes a registry, and only a caller that ran under
	// it restores one: a stray after a total loss finds an empty namespace.
	{Name: "restore-by-stranger", Scripts: guarded, Stray: true,
		Edits: []Edit{{"if A.generation == '' then noRegistry(meta) end", ""}, {"if A.generation == '' then noRegistry(key) end", ""}},
		Bug:   "a caller that never ran under the registry (a node with another layout, after Redis lost everything) creates {ns}:meta and stores its layout as the fleet's"},
	// A dense counter's values carry no time: after a loss a tag continues
	// above the most its rate allows since the copy Redis kept.
	{Name: "seq-loss-jump-ignored", Script: &contract.Seq, Sequences: true,
		Edits: []Edit{{"if r.loss_id ~= lossID then", "if false then"}},
		Bug:   "a tag continues from the copy Redis went back to, under values granted after the copy"},
	// A tag gone from Redis (evicted, deleted, lost) is restored from the
	// operator's records only once no segment granted before can be
	// handed out, and a segment from before a restore is never renewed
	// (the tag's epoch), which needs a node holding an expired segment,
	// unasked, through the restore's 11 s wait: rarer than most.
	{Name: "seq-restore-unwaited", Script: &contract.Seq, Sequences: true,
		Edits: []Edit{{"local since = r and lossMs or math.max(lossMs, missingSince())", "local since = lossMs"}},
		Bug:   "a restore of a tag found missing with no loss recorded goes through at once, while nodes still hand out the segments they hold above the operator's records"},
	{Name: "seq-segment-across-restore", Script: &contract.Seq, Sequences: true, Seeds: 15000,
		Edits: []Edit{{"local function token(t) return lossID .. '#' .. (t.epoch or '') end", "local function token(t) return lossID end"}},
		Bug:   "a segment granted before a restore passes its check after it and is handed out again above the operator's records"},
}

// The replicas high-water mark (replicas.lua, guard.lua's
// replicasAfterChange) and what a grant waits for: each branch wrong.
// They matter where a promoted replica lacks grants its old master kept
// making: a split brain with a replica on the old master's side, a
// promotion of a replica that did not follow the one promoted before.
var markMutations = []Mutation{
	{Name: "mark-not-raised", Requires: ruleAckedReplaced, Scripts: granting,
		Edits: []Edit{{"local want = math.max(mark, listedReplicas(), count)", "local want = mark"}},
		Bug:   "the mark is not raised to the replicas a master lists: a replica that joins later is never waited for"},
	{Name: "replica-set-ignored", Requires: ruleAckedReplaced, Scripts: granting,
		Edits: []Edit{{"local want = math.max(mark, listedReplicas(), count)", "local want = math.max(mark, listedReplicas())"}},
		Bug:   "the mark counts the replicas listed at once, not those listed since by address: two replicas listed in turns leave it at one"},
	{Name: "mark-reset-on-restart", Requires: ruleAckedReplaced, Scripts: guarded,
		Edits: []Edit{{"    redis.call('HDEL', meta, 'replica_set')\n  end", "    redis.call('HDEL', meta, 'replica_set')\n  else\n    mark = 0\n    redis.call('HDEL', meta, 'replica_set')\n  end"}},
		Bug:   "a change of server other than a promotion (a restart) resets the mark and the replicas counted to the replicas listed, often none while they reconnect"},
	{Name: "mark-lowered-always", Requires: ruleAckedReplaced, Scripts: guarded,
		Edits: []Edit{{"  if prevRepl and infoField('master_replid2') == prevRepl then", "  if prevRepl then"}},
		Bug:   "any change of server lowers the mark by one, a restart too: a master restarted with its replicas still away waits for one fewer"},
	{Name: "mark-lowered-any-promotion", Requires: ruleAckedReplaced, Scripts: guarded,
		Edits: []Edit{{"  if prevRepl and infoField('master_replid2') == prevRepl then", "  if prevRepl and infoField('master_replid2') ~= string.rep('0', 40) then"}},
		Bug:   "the mark is lowered by one for any promoted replica, not only one promoted in place of the master that wrote last: a replica that did not follow the newest master, promoted, lowers it again",
		Unfound: "it differs from the design only on a replica promoted in place of a master other than the one that last " +
			"wrote {ns}:meta: one that followed a master restarted with no grant since (one less is then right: it was one of " +
			"the replicas counted), or one left behind by an earlier promotion and promoted in turn, which lacks the newest " +
			"master's grants whatever the mark: a window the design leaves open without Sentinel (docs/guarantees.md), which " +
			"the patterns keep out of the schedules they line up; through Sentinel a grant they do not vouch for waits for " +
			"every replica they know, above the mark. No seed of 1-10,000 gives a duplicate, nor does the SPIN model " +
			"(BUG_mark_dec_any, docs/model.md)"},
	{Name: "mark-lowered-twice", Requires: ruleAckedReplaced, Scripts: guarded,
		Edits: []Edit{{"    mark = mark - 1\n", "    mark = mark - 2\n"}},
		Bug:   "a promotion lowers the mark by two: a replica the promoted one left behind is not waited for"},
	{Name: "wait-one-fewer", Requires: ruleAckedReplaced, Scripts: granting,
		Edits: []Edit{{"return want, table.concat(names, ',')", "return math.max(want - 1, 0), table.concat(names, ',')"}},
		Bug:   "a grant waits for one replica fewer than the mark"},
	// A running node restores a registry Redis lost with the mark of its
	// last grant; a new process, with the replicas listed, none while they
	// reconnect (pattern rack-restart-then-split).
	{Name: "min-replicas-ignored", Requires: ruleAckedReplaced, Switch: "MinReplicasIgnored",
		Bug: "a grant waits for the mark alone, not for --min-replicas above it (a mark started from no replica listed)"},
	// Through Sentinel a grant the Sentinels do not vouch for waits for
	// every replica they know, which the mark may not count: one they
	// promote that this master has not listed.
	{Name: "sentinel-replicas-ignored", Requires: ruleAckedReplaced, Switch: "SentinelReplicasIgnored",
		Bug: "a grant the Sentinels do not vouch for waits for the mark alone, not for every replica they know: the mark at one after a promotion, the rebooted old master promoted while the new one grants to nodes cut off from the Sentinels"},
}

// The Sentinel rule (internal/replwait, sentinel.go), each condition
// weakened. The down-after bound has none: it only shortens a window
// MaxCheckAge already ends, and no promotion, forced or not, can come
// before the leader Sentinel answered the check, so a grant it vouches
// for runs at most MaxCheckAge after any promotion with or without it,
// inside the Redis clocks' allowance (no duplicate can follow).
var sentinelMutations = []Mutation{
	// Pattern zone-cut-failover: the two Sentinels beside the old master
	// outvote the one that promoted a replica.
	{Name: "sentinel-quorum", Requires: ruleVouchedReplaced, Switch: "SentinelQuorum",
		Bug: "a majority of the Sentinels vouching is enough: one that sees the master down, or does not answer, is outvoted"},
	{Name: "sentinel-no-max-check-age", Requires: ruleVouchedReplaced, Switch: "SentinelNoMaxCheckAge",
		Unfound: "it needs a forced failover between a check and a grant delayed past MaxCheckAge on the old master (a master " +
			"stalled 1-4 s: pattern failover-in-flight), and the promoted replica's first script, which records the loss floors, " +
			"a second before that grant runs; in the simulator a call to a stalled master takes the whole stall (no client read " +
			"timeout makes a node dial again through the leader Sentinel meanwhile) and a node's restart waits for its call, so the " +
			"promoted replica's first script comes after the delayed grants and its floors cover them: no seed of 1-10,000 gives a " +
			"duplicate (the SPIN model finds it: teeth-sentinel-no-max-check-age)",
		Bug: "a check vouches up to the down-after bound however late the grant comes: a forced failover lands in between"},
	{Name: "sentinel-run-id-unchecked", Requires: ruleVouchedReplaced, Switch: "SentinelRunIDUnchecked",
		Bug: "the master the Sentinels name is not compared with the server that granted: an old master's grant passes once they switched"},
	{Name: "sentinel-failover-ignored", Requires: ruleVouchedReplaced, Switch: "SentinelFailoverIgnored",
		Bug: "failover_in_progress does not refuse: a grant on the old master during a forced failover passes",
		Unfound: "the leader alone flags failover_in_progress, naming the old master, from the promotion until it switches: " +
			"once every other replica follows the promoted one in sync or is down to it, unreached for down-after " +
			"(sentinelFailoverDetectEnd). Pattern zone-cut-failover lines up grants of the old master vouched for meanwhile. " +
			"With both replicas beside the leader the window lasts 0-2 s (its next INFO, the other replica's sync, the " +
			"failover's end), and the promoted replica's first script, from a node that dials it through the leader once it names " +
			"it, comes no sooner than that window opens, so its loss floors (a Redis clock allowance of 1 s above it) cover what " +
			"the old master granted in it. With a replica beside the old master (one in two of those schedules) the window " +
			"lasts until down-after after the cut, but the promoted replica then has no replica of its own, and a grant the two " +
			"Sentinels beside the old master do not vouch for waits for every replica they know: it grants nothing until the cut " +
			"heals. No seed of 1-10,000 gives a duplicate"},
}

func init() { Mutations = append(append(Mutations, markMutations...), sentinelMutations...) }

// granting are the scripts that grant: guard.lua, then replicas.lua.
var granting = []*string{&contract.Claim, &contract.Renew, &contract.Counter, &contract.Seq}

// guarded are the scripts that start with guard.lua.
var guarded = []*string{&contract.Claim, &contract.Renew, &contract.Release, &contract.Counter, &contract.Probe, &contract.Init, &contract.Seq}

// infoCall is guard.lua's one INFO call.
const infoCall = "redis.pcall('INFO', 'server', 'replication', 'memory')"

// Edit is one substitution in a script.
type Edit struct{ Old, New string }

var renewAcrossLoss = Edit{"if lossID ~= knownLoss then", "if false then"}

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
	scripts := m.Scripts
	if m.Script != nil {
		scripts = append([]*string{m.Script}, scripts...)
	}
	if len(scripts) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, script := range scripts {
		text := *script
		for _, e := range m.Edits {
			if !strings.Contains(text, e.Old) {
				panic(fmt.Sprintf("sim: mutation %s: the script no longer contains %q; update the mutation", m.Name, e.Old))
			}
			text = strings.Replace(text, e.Old, e.New, 1)
		}
		sum := sha1.Sum([]byte(*script))
		out[hex.EncodeToString(sum[:])] = text
	}
	return out
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
