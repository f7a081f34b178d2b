// Package server is the flaked daemon's network face: a Redis-compatible
// TCP server (RESP2, RESP3 after HELLO 3, and inline commands on one port,
// so redis-cli, redis-benchmark, any Redis client and nc work) that hands
// out the IDs of a node.Generator, and the HTTP handler for /metrics,
// /healthz and /readyz. Replies follow Redis 7.2's (compat_test.go compares
// them with a real redis-server's); reply.go says which differ by protocol.
//
//	srv, err := server.New(gen, server.Options{RequirePass: pass})
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx)
//
// Requests are parsed by this package's reqParser (parser.go says why not
// redcon's Reader) and replies encoded with redcon's Append functions; the
// accept and connection loops are this package's own,
// because redcon.Server closes connections abruptly on Close (no graceful
// shutdown), has no connection limit, and runs its reader in a goroutine
// where a panic cannot be recovered.
//
// I/O: on Linux, plain-TCP connections are served by epoll event loops
// (Options.Loops, loop_linux.go), as redis-server serves them: one
// epoll_wait for many ready connections, then one read and one write each,
// no goroutine per request. A loop never waits: a request that could (an
// ID the node cannot issue at once, INFO) and a reply the socket cannot
// take whole hand the connection to a goroutine of its own, which answers
// it and returns it to a loop after 64 batches answered without waiting
// (handoff.go). TLS connections, other platforms and Loops = -1 use a
// goroutine per connection throughout (conn.go). Both ways run requests
// through one function, conn.runRequests (requests.go), and differ only
// in how they read and write.
//
// One command is one small function in a file named for it (cmd_nextid.go,
// cmd_parse.go, ...); commands.go maps names to them. A command that may
// wait calls conn.wait first (marked mayWait in the table) or is marked
// mayBlock, and knows nothing else of the event loops. Inside MULTI,
// requests are queued and run at EXEC (cmd_multi.go), which leaves a loop
// first when its queue holds a command that may wait.
//
// Invariants:
//   - Replies leave in request order; a pipeline's replies are flushed
//     before the connection waits for more input.
//   - Every request is checked against the limits (MaxLine, MaxBulk,
//     MaxArgs) as its bytes arrive, before it is buffered whole. Abuse gets "-ERR Protocol error: ..." and the connection
//     is closed; other clients are unaffected.
//   - A panic is recovered on its connection, logged, answered with an
//     error, and closes that connection only.
//   - An ID is either delivered in a reply or never counted: a NEXTIDS that
//     fails part way answers with an error and drops the IDs it got (they
//     are never reissued, so uniqueness holds). A transaction issues its
//     IDs at EXEC only, none when discarded or aborted.
package server
