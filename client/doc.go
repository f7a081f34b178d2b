// Package client is the Go client of the flaked daemon: unique 63-bit IDs
// from one or more daemons over their Redis-compatible protocol (RESP2),
// with go-redis as the transport (pooling, timeouts, TLS, pipelining).
//
//	c, err := client.NewFromURL("flaked://10.0.0.1:7379,10.0.0.2:7379?prefetch=1000")
//	id, err := c.NextID(ctx)
//
// What the client guarantees, on top of the daemons' own invariants:
//
//   - It never returns an ID twice. Every ID it returns was read from a
//     daemon's reply to a request this client sent, and each request's
//     reply is handed out once. A request that fails (a connection error,
//     a timeout, an error reply) is retried only by asking a daemon for
//     new IDs; the IDs of a reply that came too late, or broke off half
//     way, are discarded with the connection that carried them, so they
//     can leave gaps but never come back.
//   - With several daemons it spreads requests over them (the least busy
//     first, round robin among equals) and fails over: a request that
//     fails on one daemon is sent to the next, and the caller sees an
//     error only when every daemon failed. That error names each daemon
//     tried and why.
//   - With Prefetch, NextID is served from blocks (NEXTBLOCK: a few
//     integers for up to Prefetch IDs) with one atomic add per ID and no
//     lock, the next block fetched in the background when half of the
//     current one is used; from NEXTIDS batches when the daemons predate
//     blocks. IDs are dropped unused once older than MaxAge, so an ID
//     handed out is never older than that.
//
// IDs from one daemon are increasing. IDs NextID serves from blocks
// increase in the order it returns them, across daemons too (after a
// failover the IDs of the new daemon's blocks at or below the last
// block's are skipped). IDs from several daemons otherwise, or from
// NEXTIDS batches, are unique but not ordered across daemons.
package client
