// Package coord is the machine-ID registry of flaked, kept in Redis.
//
// A node claims machine IDs (claim.lua: SADD into {ns}:machines, a SET NX PX
// lease holding an owner token, an owner hash), renews them in the
// background (renew.lua), and releases them on a clean shutdown
// (release.lua). The reservation, {ns}:reserved, is the highest tick an
// owner may use; it is raised in Redis and written to the local state file
// before the generator enters it, so whoever claims the ID next starts
// strictly after it.
//
// # Fault model
//
// Uniqueness rests on three assumptions, and on nothing else:
//
//   - Clocks: each node's wall clock is within MaxSkew of Redis TIME when it
//     claims (checked; auto mode keeps checking), the monotonic clock does
//     not jump, and the Redis servers that may become master keep TIME
//     within MaxSkew of each other (NTP everywhere).
//   - Redis runs each Lua script atomically, and what it lost it lost as a
//     whole suffix of its history, noticed by a change of its identity
//     (run_id on a restart, master_replid on a promotion) or by
//     {ns}:meta being gone, and it evicts none of the registry's keys.
//     guard.lua enforces both: a writing script that cannot read the
//     identity, or runs under maxmemory-policy allkeys-*, refuses to
//     write (Options.RedisIdentity "none" is the operator's opt-out of
//     the first, losing the detection), and {ns}:reserved gone under the
//     same identity reads as a loss. Two masters accepting writes at once
//     (a partitioned old master some nodes still reach, a replica promoted
//     in its place) are covered by the wait after each grant: see Split
//     brain below, with its condition and its residual windows.
//   - fsync of the state file means what it says (standalone mode only:
//     with Redis the state file is a second copy).
//
// Under them no two processes issue the same ID, whatever else happens:
//
//   - Redis loses any suffix of acknowledged writes, or all of them (a
//     failover to a replica that missed writes, a restart from an RDB
//     snapshot or an AOF with appendfsync everysec, a restored backup).
//     guard.lua, at the start of every writing script, records the moment
//     Redis's identity changed (loss_ms in {ns}:meta). Every tick any node
//     had been granted by then is at most loss_ms + Horizon (Horizon bounds
//     reserve-ahead + max-lead + max-skew), so a claim starts after
//     max(reservation, loss_ms + 1 s + Horizon, the state file's
//     reservation) (1 s: a new master's clock may be that far behind the
//     old one's), counter segments start after loss_ms + 1 s + their lead,
//     and a renewal extends nothing across such a change (a
//     claim lost with the data may have been someone else's, also a
//     takeover of this very lease by a copy of the node): the node claims
//     again, issuing meanwhile only under what it had been granted before
//     (ErrPossibleLoss), which is below the loss floor. A node displaced
//     this way takes its next IDs at the same loss floor, so nothing
//     chains.
//   - State files copied, restored from old backups, or lost. The token in
//     a state file is not an identity: every claim makes a new one. A
//     restart presents the file's token to take its old lease over at once
//     (a crash leaves it live for up to LeaseTTL), and the takeover fences
//     whoever still holds it: its next renewal finds another token and
//     fails with ErrFenced, having issued nothing past the reservation the
//     new owner starts after. Two live processes from copies of one file
//     share its node ID; claim.lua and audit verify name them.
//   - Processes paused for any time, connections delayed, cut or
//     redirected: an owner issues only below what Redis granted it, grants
//     come only with the lease, and a lease that expired is lost: the node
//     claims its ID again, above the reservation whoever used it since
//     raised.
//   - Misconfigured nodes: another layout is refused. Only flaked init
//     (Init) makes a registry; after Redis lost it, only a process that ran
//     under it restores it, with the layout it ran under, and anyone else
//     gets ErrNoRegistry: so the fleet's layout is the only one ever stored
//     (guard.lua's fleetLayout).
//
// # Split brain
//
// The old master M is cut off from its replicas (and from Sentinel) but
// still reached by some nodes; a replica R is promoted P seconds after the
// cut and other nodes move to it. Both accept writes. R's floors start
// from its first script (loss_ms >= cut + P): claims above loss_ms + 1 s +
// Horizon, counter segments above loss_ms + 1 s + the lead.
//
// min-replicas-to-write 1 with min-replicas-max-lag L does not make this
// safe. M refuses writes only once its replica's last acknowledgement is
// older than L, and replicas acknowledge once a second: M grants until
// cut + L + 1 s, and each grant reaches reserve-ahead (flake) or the lead
// (counter) further, so M's grants reach cut + L + 1 s + Horizon against
// R's floor of cut + P + 1 s + Horizon (the counter alike with the lead).
// Safe only while P > L + 1 s + the Redis clocks' difference beyond 1 s,
// and nothing ties P (Sentinel's down-after-milliseconds, counted from
// when Sentinel lost M, or a manual failover) to the cut between M and
// its replicas: with P = 0.3 s and L = 3 s the fleet fault suite saw
// 23,000-57,000 duplicates a run.
//
// What is used instead (internal/replwait): every grant (a claim, a
// renewal, which extends a lease and may raise the reservation, a counter
// segment, a sequence segment) is capped at its master's TIME + Horizon
// (the counter's at TIME + the lead), and R's floors start 1 s + Horizon
// above P: a grant M makes before P is covered by R's floors whether it
// replicated or not. So a grant is used when a proof holds that it was
// made before any promotion, or that R holds it.
//
// Through Sentinel (Options.Sentinels), the first proof: a check sent
// with the grant reaches every Sentinel of the master, each naming M (by
// run ID) with the flag "master" alone, and the grant's reply comes
// within the least of down-after − 1% − the age of each Sentinel's
// pending PING or last reply, and 100 ms of the check. A promotion needs
// a leader Sentinel that sees M down itself, which no Sentinel does
// before then (replwait's sentinel.go has the derivation, and the bound
// for a promotion that skips failure detection). Such a grant waits for
// no replica: a replica away, resyncing or lagging stops nothing.
//
// Otherwise, the second proof (scripts/lua/replicas.lua, internal/replwait): the
// grant is used only after WAIT n, sent on the
// connection that ran the script, right after it, reports n replicas,
// where n = mark = max(mark, connected_slaves, the replicas listed since
// the master took the registry over, by address), read in the same atomic
// call, at least Options.MinReplicas, and through Sentinel at least the
// replicas the Sentinels know (num-slaves: every replica they may
// promote, kept until SENTINEL RESET), who may promote one this master
// has not listed. Counting by address ("replica_set" in {ns}:meta) makes
// two replicas listed in turns, never together, two: a grant only one of
// them acknowledged would be missing from the other once promoted (the
// SPIN model's teeth-replica-set-ignored, docs/model.md).
// The mark ("replicas" in {ns}:meta) is the most replicas the
// masters of the registry have listed: the scripts raise it, guard.lua
// keeps it and the set across a restart, and lowers the mark by one and
// starts the set anew for a replica promoted in place of the master that
// wrote last (master_replid2 is that master's replid), and only an
// operator lowers it otherwise (flaked audit replicas --set, which starts
// the set anew). WAIT counts replicas whose acknowledged offset covers this
// connection's last write, asking them at once (REPLCONF GETACK), so it
// waits a replication round trip, not the 1 s acknowledgement period. A
// grant WAIT does not confirm within Options.ReplicaWait (1 s) is not
// used: ErrNotReplicated; the node issues on under what it holds and
// retries. Its writes on the master are harmless: a higher reservation, a
// lease nobody uses (it expires), a gap in the counter.
//
// The condition: every replica that can be promoted while a node still
// uses a grant made by M was counted in M's mark when that grant was
// made. Then it acknowledged the grant (WAIT reported at least the mark,
// and no more replicas than M lists can acknowledge), so R, once
// promoted, holds every reservation, lease and counter value any node of
// M uses: claims on R start above the reservations, counter segments
// above the counter, whatever P, L, the lag, reserve-ahead, the lead, the
// Horizon and the clocks of M and R (a node issues only below the
// reservation R holds). A replica that detaches lowers connected_slaves
// but not the mark, so from then on M grants nothing: the partition
// itself stops M, not a timeout. M, cut off, lists its replicas until
// repl-timeout and none after; the mark keeps n above 0 either way, also
// when M restarts meanwhile. R's first script sees a new identity and
// takes the mark less itself: M cannot be acknowledged by R; M's other
// replicas must follow R before R grants (Sentinel re-points them); with
// one replica R's mark is what R lists, so a failover whose old master
// never returns does not stop the fleet (unless MinReplicas, 1 by
// default through Sentinel, asks for a replica R does not have yet).
// Through Sentinel the dead old master stays on the Sentinels' list: a
// grant they do not vouch for waits for it, and is refused, until
// SENTINEL RESET. With no replica the mark is 0 and no WAIT is sent.
//
// Residual windows, outside the condition, for nodes that do not reach
// the master through Sentinel (through Sentinel, n counts every replica
// the Sentinels know, which closes the first three):
//   - A replica that attaches and detaches between two granting scripts,
//     never counted in the mark, then is promoted while M grants: it holds
//     everything up to its detach (a replica starts from a full copy) and
//     lacks what came after. A fleet with a lease holder runs a granting
//     script at least every LeaseTTL/3; Sentinel learns of replicas from
//     the master's INFO every 10 s, so it rarely knows one so brief.
//   - {ns}:meta lost (a restart without persistence, or evicted under
//     allkeys-*, which Redis does while the scripts refuse): the mark
//     starts from the replicas listed at the first script, often none
//     while they reconnect (a running node restores the count it last
//     used, not which replicas it counted: another replica listed meets
//     it while the one counted is away); a replica that does not reattach and is
//     promoted while this master, partitioned, still grants, lacks those
//     grants. Without the partition this is a lost suffix, which
//     guard.lua's floor covers. Options.MinReplicas closes it (and the
//     model's two trails, docs/model.md): 1 by default through Sentinel
//     (DefaultMinReplicas), where a replica to promote exists.
//   - Double failover: R promoted, acknowledged by one replica (say M,
//     back as R's replica), then another replica that never followed R
//     promoted in R's place while R still grants. Covered by guard.lua's
//     floor only when R stopped granting before the second promotion.
//   - A replica promoted in place of a master other than the one that
//     wrote {ns}:meta last (two promotions with no script between) keeps
//     the whole mark: grants are refused until enough replicas follow it
//     or the mark is lowered (fail closed, not a duplicate).
//   - A replica in a full sync is listed but cannot acknowledge: grants
//     are refused until it is online and has sent its first periodic ACK
//     (the master holds the stream back until then: up to 1 s) (fail
//     closed; the shipped configuration sets repl-diskless-sync-delay 0
//     to keep it short).
//
// The WAIT goes on the connection that ran the script: the two are one
// pipeline of the client (with Sentinel, to the master it found; on Redis
// Cluster, of the master of the {ns} slot, whose replicas a cluster
// failover promotes). The pipeline asks WAIT for the count the previous
// grant needed; a grant that needs more is not used and the pipeline runs
// again at once asking for that many, one that needs fewer (the mark was
// lowered) waits ReplicaWait out once (internal/replwait). A claim not
// acknowledged is given back at once (released at its floor) and tried
// again for up to 1.5 s, so a node starting next to a replica that has
// just synced (it acknowledges from its first periodic ACK, up to 1 s
// later) does not fail. A client of a node waits on a grant only when what
// its node holds is spent (reservations reach ReserveAhead ahead, counter
// segments are fetched at half left): then for the script plus at most
// ReplicaWait.
//
// SplitBrainCheck reads the mark and the master's replicas: a mark above
// the replicas online means grants are refused until a replica returns or
// the mark is lowered.
//
// Invariants kept here:
//   - A lease is extended, and a reservation raised, only by the holder of
//     the lease's token, which exists only in that process's memory.
//   - A claim starts after the ID's reservation and after the loss floor.
//   - A reservation only goes down on release, by the lease holder, to the
//     exact last tick it used.
//   - The state file is written atomically, locked against a second
//     process on the same host, and never silently reused when corrupt or
//     mismatched.
package coord
