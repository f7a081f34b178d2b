package simredis

import (
	"strings"
)

var keyCommands = []*command{
	{name: "del", arity: -2, run: cmdDel},
	{name: "exists", arity: -2, run: cmdExists},
	{name: "pexpire", arity: -3, run: func(s *Server, a []string) any { return expire(s, a, 1, false) }},
}

func cmdDel(s *Server, args []string) any {
	var n int64
	for _, k := range args[1:] {
		if s.get(k) != nil && s.del(k) {
			n++
		}
	}
	return n
}

func cmdExists(s *Server, args []string) any {
	var n int64
	for _, k := range args[1:] { // a key named twice counts twice, as in Redis
		if s.get(k) != nil {
			n++
		}
	}
	return n
}

// expire is PEXPIRE, EXPIRE, PEXPIREAT and EXPIREAT: unit is 1 for
// milliseconds, 1000 for seconds; at for an absolute time.
func expire(s *Server, args []string, unit int64, at bool) any {
	n, ok := parseInt(args[2])
	if !ok {
		return errNotInt
	}
	var nx, xx, gt, lt bool
	for _, o := range args[3:] {
		switch strings.ToUpper(o) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GT":
			gt = true
		case "LT":
			lt = true
		default:
			return Error("ERR Unsupported option " + o)
		}
	}
	if nx && (xx || gt || lt) {
		return Error("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if gt && lt {
		return Error("ERR GT and LT options at the same time are not compatible")
	}
	key := args[1]
	if s.get(key) == nil {
		return int64(0)
	}
	when := n * unit
	if !at {
		when += s.nowMs
	}
	cur, has := s.db.expires[key]
	switch {
	case nx && has, xx && !has:
		return int64(0)
	case gt && (!has || when <= cur): // no expiry counts as infinite
		return int64(0)
	case lt && has && when >= cur:
		return int64(0)
	}
	if when <= s.nowMs { // a time in the past deletes the key, as Redis does
		s.del(key)
		return int64(1)
	}
	s.db.expires[key] = when
	return int64(1)
}
