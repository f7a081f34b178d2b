package server

// HELLO [protover [AUTH user pass] [SETNAME name]]: the server's handshake,
// in protocol 2 only. Asking for 3 gets NOPROTO, on which clients (go-redis,
// redis-py, ...) fall back to RESP2 and AUTH.
func cmdHello(c *conn, args [][]byte) {
	i := 1
	if len(args) > 1 {
		ver, ok := parseInt(args[1])
		if !ok {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return
		}
		if ver != 2 {
			c.writeError("NOPROTO sorry, this protocol version is not supported.")
			return
		}
		i = 2
	}
	var user, pass, name []byte
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		switch {
		case equalFold(args[i], "auth") && more >= 2:
			user, pass = args[i+1], args[i+2]
			i += 2
		case equalFold(args[i], "setname") && more >= 1:
			name = args[i+1]
			i++
		default:
			c.writeErrorf("ERR Syntax error in HELLO option '%.128s'", args[i])
			return
		}
	}
	if user != nil && !c.auth(user, pass) {
		return
	}
	if !c.authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if name != nil && !c.setName(name) {
		return
	}
	c.writeArray(14)
	c.writeBulkString("server")
	c.writeBulkString("flaked")
	c.writeBulkString("version")
	c.writeBulkString(c.s.opts.Version)
	c.writeBulkString("proto")
	c.writeInt(2)
	c.writeBulkString("id")
	c.writeUint(c.id)
	c.writeBulkString("mode")
	c.writeBulkString("standalone")
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
}
