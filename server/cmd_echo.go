package server

// ECHO message: the message as a bulk string. redis-cli --pipe ends its
// stream with an ECHO of 20 random bytes and waits for them to come back.
func cmdEcho(c *conn, args [][]byte) { c.writeBulk(args[1]) }
