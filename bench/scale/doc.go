// Package scale measures how flaked's costs grow with the fleet: each
// figure at a small and a large size in the same run, rounds alternating
// between the sizes so a noisy spell on a shared machine hits both, and
// reported as the ratio of the two. Each test also checks its bound: a
// cost per node (connection, machine ID) at the large size within
// linearFactor (3x) of the same cost at the small size, the median of the
// per-round ratios (bounds_test.go), so growth faster than linear fails.
// They run only with FLAKED_SCALE=1, so go test ./... stays fast.
//
//	scripts/bench scale
//	cd bench && FLAKED_SCALE=1 go test -v -count=1 -timeout 60m -run 'TestScale' ./scale/
//
// The parts (one test each, FLAKED_SCALE_ROUNDS rounds, default 3):
//
//   - TestScaleAudit: flaked audit, verify, --json, history, whois and
//     prune --dry-run (the built binary) at 6,000 and 60,000 machine IDs,
//     100,000 events, on a real redis-server; Redis memory per machine ID
//     and per event.
//   - TestScaleClaims: 100 and 1,000 leases claimed at once on one
//     redis-server (a mass restart after a deploy), each with its own
//     go-redis client; time to the last claim, p50/p99, Redis CPU, and no
//     machine ID held by two live leases. FLAKED_SCALE_PREDIAL=1 makes
//     the connections before the gate, to tell the claims' cost from the
//     connections'.
//   - TestScaleSteady: 100 and 1,000 live nodes (node package, own
//     clients) issuing IDs; Redis commands/s and CPU per 1,000 nodes.
//   - TestScaleDaemon: the built daemon with 1,000 and 10,000 idle
//     connections, and 100 and 1,000 active ones: RSS and NEXTID p99.
package scale
