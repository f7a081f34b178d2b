package server

// RedisVersion is the Redis version whose protocol flaked speaks: HELLO's
// version and INFO's redis_version. Clients read it to decide what they
// may send (RESP3, CLIENT SETINFO); flaked's own version is INFO's
// flaked_version.
const RedisVersion = "7.2.0"

// HELLO [protover [AUTH user pass] [SETNAME name]]: the server's handshake.
// protover 3 switches the connection to RESP3, 2 back to RESP2; without
// one the protocol stays. The reply is a map (RESP3) or a flat array of
// pairs (RESP2), in the new protocol, as Redis 7 sends it.
func cmdHello(c *conn, args [][]byte) {
	proto, i := 0, 1
	if len(args) > 1 {
		ver, ok := parseInt(args[1])
		if !ok {
			c.writeError("ERR Protocol version is not an integer or out of range")
			return
		}
		if ver != 2 && ver != 3 {
			c.writeError("NOPROTO unsupported protocol version")
			return
		}
		proto, i = int(ver), 2
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
	if proto != 0 {
		c.setProto(proto)
	}
	c.writeHello()
}

// writeHello writes HELLO's reply in the connection's protocol.
func (c *conn) writeHello() {
	c.writeMap(7)
	c.writeBulkString("server")
	c.writeBulkString("flaked")
	c.writeBulkString("version")
	c.writeBulkString(RedisVersion)
	c.writeBulkString("proto")
	c.writeInt(int64(c.protoVersion()))
	c.writeBulkString("id")
	c.writeUint(c.id)
	c.writeBulkString("mode")
	c.writeBulkString("standalone")
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
}
