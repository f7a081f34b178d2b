package server

// QUIT: +OK, then the connection closes once the reply is out. Requests
// pipelined after it are not run.
func cmdQuit(c *conn, args [][]byte) {
	c.writeOK()
	c.quit = true
}
