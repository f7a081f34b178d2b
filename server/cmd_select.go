package server

// SELECT 0: flaked has one database, which clients that select one on
// connect should find.
func cmdSelect(c *conn, args [][]byte) {
	db, ok := parseInt(args[1])
	switch {
	case !ok:
		c.writeError("ERR value is not an integer or out of range")
	case db != 0:
		c.writeError("ERR DB index is out of range")
	default:
		c.writeOK()
	}
}
