// Package redistest starts real redis-server and redis-sentinel processes
// for tests of the Redis-coordinated ID generator.
//
// Everything listens on 127.0.0.1 only, on free ports, with data in a
// per-test temporary directory. Every process is killed and waited for in
// t.Cleanup, also when the test fails with t.Fatal, and every wait is
// bounded: if a process does not come up, the test fails with the tail of
// its log file in the message.
//
// Three topologies are available:
//
//   - Start: one standalone server (optionally with AOF and a password),
//     which can be killed, stopped, restarted on the same port and data
//     directory, paused (SIGSTOP) and resumed (SIGCONT);
//   - StartCluster: N masters without replicas, slots split evenly;
//   - StartSentinel: a master, one replica and one sentinel watching them
//     under the name "mymaster", with a forced or crash-driven failover.
//
// The binaries must be in PATH. Require skips the test when they are missing,
// except when the environment variable CI is true: there it fails, so that
// tests that need a real Redis can never be skipped silently in CI. Install
// them with
//
//	apt-get install -y redis-server redis-sentinel redis-tools
package redistest
