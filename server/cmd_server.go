package server

import (
	"strconv"
	"time"
)

// ROLE, TIME and DBSIZE: what tools ask a Redis server about itself. A
// flaked daemon is a master with no replicas, and holds no keys.

// ROLE: master, replication offset 0, no replicas.
func cmdRole(c *conn, _ [][]byte) {
	c.writeArray(3)
	c.writeBulkString("master")
	c.writeInt(0)
	c.writeArray(0)
}

// TIME: the server's clock as [unix seconds, microseconds], bulk strings
// as Redis sends them.
func cmdTime(c *conn, _ [][]byte) {
	now := time.Now()
	var buf [20]byte
	c.writeArray(2)
	c.writeBulk(strconv.AppendInt(buf[:0], now.Unix(), 10))
	c.writeBulk(strconv.AppendInt(buf[:0], int64(now.Nanosecond()/1000), 10))
}

// DBSIZE: 0, there are no keys.
func cmdDBSize(c *conn, _ [][]byte) { c.writeInt(0) }
