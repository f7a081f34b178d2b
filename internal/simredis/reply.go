package simredis

import "github.com/redis/go-redis/v9"

// Commands return their reply as one of:
//
//	int64   integer reply
//	string  bulk string
//	status  simple string ("+OK")
//	Error   error reply
//	nil     nil bulk string (or nil array)
//	[]any   array of replies
//
// status is kept apart from bulk strings because a script sees the two
// differently ({ok=...} and a string); go-redis reads both as string.

// status is a simple-string reply.
type status string

const statusOK = status("OK")

// Error is an error reply, with Redis's text ("ERR ...", "WRONGTYPE ...",
// "NOSCRIPT ..."). It implements go-redis's redis.Error, so
// redis.HasErrorPrefix works on it and go-redis's Script.Run falls back
// from EVALSHA to EVAL on NOSCRIPT, as against a real server.
type Error string

func (e Error) Error() string { return string(e) }

// RedisError marks Error as a reply of the server, not a failure to reach
// it (go-redis's redis.Error).
func (Error) RedisError() {}

var _ redis.Error = Error("")

// The error replies several commands share, in Redis's words.
const (
	errSyntax    = Error("ERR syntax error")
	errWrongType = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNotInt    = Error("ERR value is not an integer or out of range")
	errNoScript  = Error("NOSCRIPT No matching script. Please use EVAL.")
)

// errArity is Redis's reply to a command with the wrong number of arguments.
func errArity(name string) Error {
	return Error("ERR wrong number of arguments for '" + name + "' command")
}

// clientReply turns a command's reply into what go-redis returns for a
// *redis.Cmd: status replies become strings, a top-level nil becomes
// redis.Nil and an error reply the error. Inside arrays a nil stays nil and
// an error stays a value (go-redis puts its proto.RedisError there).
func clientReply(r any) (any, error) {
	switch v := r.(type) {
	case nil:
		return nil, redis.Nil
	case Error:
		return nil, v
	case status:
		return string(v), nil
	case []any:
		return clientArray(v), nil
	}
	return r, nil
}

// clientArray converts the status replies nested in a, in place: commands
// always return arrays of their own, never one held in the keyspace.
func clientArray(a []any) []any {
	for i, x := range a {
		switch v := x.(type) {
		case status:
			a[i] = string(v)
		case []any:
			clientArray(v)
		}
	}
	return a
}
