package server

// PING [message]: +PONG, or the message as a bulk string.
func cmdPing(c *conn, args [][]byte) {
	switch len(args) {
	case 1:
		c.writeStatus("PONG")
	case 2:
		c.writeBulk(args[1])
	default:
		c.writeError(wrongArgs("ping"))
	}
}
