package simredis

import (
	"strconv"
	"strings"
)

var stringCommands = []*command{
	{name: "get", arity: 2, run: cmdGet},
	{name: "mget", arity: -2, run: cmdMGet},
	{name: "set", arity: -3, run: cmdSet},
	{name: "setnx", arity: 3, run: cmdSetNX},
	{name: "incr", arity: 2, run: func(s *Server, a []string) any { return incrBy(s, a[1], 1) }},
	{name: "decr", arity: 2, run: func(s *Server, a []string) any { return incrBy(s, a[1], -1) }},
	{name: "incrby", arity: 3, run: cmdIncrBy},
	{name: "decrby", arity: 3, run: cmdIncrBy},
}

func cmdGet(s *Server, args []string) any {
	v, ok := s.getKind(args[1], kindString)
	if !ok {
		return errWrongType
	}
	if v == nil {
		return nil
	}
	return v.str
}

func cmdMGet(s *Server, args []string) any {
	out := make([]any, len(args)-1)
	for i, k := range args[1:] {
		if v := s.get(k); v != nil && v.kind == kindString {
			out[i] = v.str
		}
	}
	return out
}

// cmdSet is SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms |
// KEEPTTL].
func cmdSet(s *Server, args []string) any {
	key := args[1]
	var nx, xx, get, keepTTL bool
	expireAt := int64(-1)
	for i := 3; i < len(args); i++ {
		switch o := strings.ToUpper(args[i]); o {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GET":
			get = true
		case "KEEPTTL":
			keepTTL = true
		case "EX", "PX", "EXAT", "PXAT":
			if expireAt >= 0 || i+1 == len(args) {
				return errSyntax
			}
			i++
			n, ok := parseInt(args[i])
			if !ok {
				return errNotInt
			}
			if n <= 0 {
				return Error("ERR invalid expire time in 'set' command")
			}
			switch o {
			case "EX":
				expireAt = s.nowMs + n*1000
			case "PX":
				expireAt = s.nowMs + n
			case "EXAT":
				expireAt = n * 1000
			case "PXAT":
				expireAt = n
			}
		default:
			return errSyntax
		}
	}
	if nx && xx || keepTTL && expireAt >= 0 {
		return errSyntax
	}
	old, ok := s.getKind(key, kindString)
	if !ok && get {
		return errWrongType
	}
	var reply any = statusOK
	if get {
		reply = nil
		if old != nil {
			reply = old.str
		}
	}
	exists := s.get(key) != nil
	if nx && exists || xx && !exists {
		if get {
			return reply
		}
		return nil
	}
	s.put(key, &value{kind: kindString, str: args[2]}, keepTTL)
	if expireAt >= 0 {
		s.db.expires[key] = expireAt
	}
	return reply
}

func cmdSetNX(s *Server, args []string) any {
	if s.get(args[1]) != nil {
		return int64(0)
	}
	s.put(args[1], &value{kind: kindString, str: args[2]}, false)
	return int64(1)
}

func cmdIncrBy(s *Server, args []string) any {
	n, ok := parseInt(args[2])
	if !ok {
		return errNotInt
	}
	if strings.EqualFold(args[0], "decrby") {
		if n == -1<<63 {
			return Error("ERR decrement would overflow")
		}
		n = -n
	}
	return incrBy(s, args[1], n)
}

// incrBy adds n to the integer in key (0 when missing), keeping its
// expiry, as INCRBY does.
func incrBy(s *Server, key string, n int64) any {
	v, ok := s.getKind(key, kindString)
	if !ok {
		return errWrongType
	}
	var cur int64
	if v != nil {
		if cur, ok = parseInt(v.str); !ok {
			return errNotInt
		}
	}
	if n > 0 && cur > 1<<63-1-n || n < 0 && cur < -1<<63-n {
		return Error("ERR increment or decrement would overflow")
	}
	cur += n
	s.put(key, &value{kind: kindString, str: strconv.FormatInt(cur, 10)}, true)
	return cur
}
