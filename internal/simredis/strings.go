package simredis

import (
	"strings"
)

var stringCommands = []*command{
	{name: "get", arity: 2, run: cmdGet},
	{name: "set", arity: -3, run: cmdSet},
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
