package simredis

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

var keyCommands = []*command{
	{name: "del", arity: -2, run: cmdDel},
	{name: "unlink", arity: -2, run: cmdDel},
	{name: "exists", arity: -2, run: cmdExists},
	{name: "type", arity: 2, run: cmdType},
	{name: "pexpire", arity: -3, run: func(s *Server, a []string) any { return expire(s, a, 1, false) }},
	{name: "expire", arity: -3, run: func(s *Server, a []string) any { return expire(s, a, 1000, false) }},
	{name: "pexpireat", arity: -3, run: func(s *Server, a []string) any { return expire(s, a, 1, true) }},
	{name: "expireat", arity: -3, run: func(s *Server, a []string) any { return expire(s, a, 1000, true) }},
	{name: "pttl", arity: 2, run: func(s *Server, a []string) any { return ttl(s, a[1], 1) }},
	{name: "ttl", arity: 2, run: func(s *Server, a []string) any { return ttl(s, a[1], 1000) }},
	{name: "persist", arity: 2, run: cmdPersist},
	{name: "keys", arity: 2, run: cmdKeys},
	{name: "scan", arity: -2, run: cmdScan},
	{name: "dbsize", arity: 1, run: cmdDBSize},
	{name: "flushall", arity: -1, run: cmdFlush},
	{name: "flushdb", arity: -1, run: cmdFlush},
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

func cmdType(s *Server, args []string) any {
	v := s.get(args[1])
	if v == nil {
		return status("none")
	}
	return status(v.kind.String())
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

// ttl is PTTL (unit 1) and TTL (unit 1000): -2 for a missing key, -1 for
// one without expiry.
func ttl(s *Server, key string, unit int64) any {
	if s.get(key) == nil {
		return int64(-2)
	}
	at, ok := s.db.expires[key]
	if !ok {
		return int64(-1)
	}
	left := at - s.nowMs
	return (left + unit/2) / unit // TTL rounds, as Redis does
}

func cmdPersist(s *Server, args []string) any {
	if s.get(args[1]) == nil {
		return int64(0)
	}
	if _, ok := s.db.expires[args[1]]; !ok {
		return int64(0)
	}
	delete(s.db.expires, args[1])
	return int64(1)
}

// liveKeys returns the keys not expired, sorted: KEYS and SCAN list them
// in this order, where Redis's depends on its hash table.
func (s *Server) liveKeys() []string {
	keys := slices.Sorted(maps.Keys(s.db.keys))
	return slices.DeleteFunc(keys, func(k string) bool { return s.get(k) == nil })
}

func cmdKeys(s *Server, args []string) any {
	out := []any{}
	for _, k := range s.liveKeys() {
		if globMatch(args[1], k) {
			out = append(out, k)
		}
	}
	return out
}

// cmdScan is SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]. The
// cursor is a position in the sorted keys: a key added or removed between
// calls may shift what later calls return, a looser guarantee than
// Redis's, which only tools (audit) rely on.
func cmdScan(s *Server, args []string) any {
	cursor, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		return Error("ERR invalid cursor")
	}
	match, typ, count := "*", "", int64(10)
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return errSyntax
		}
		switch strings.ToUpper(args[i]) {
		case "MATCH":
			match = args[i+1]
		case "COUNT":
			n, ok := parseInt(args[i+1])
			if !ok {
				return errNotInt
			}
			if n < 1 {
				return errSyntax
			}
			count = n
		case "TYPE":
			typ = strings.ToLower(args[i+1])
		default:
			return errSyntax
		}
	}
	keys := s.liveKeys()
	page := []any{}
	i := min(cursor, uint64(len(keys)))
	end := min(i+uint64(count), uint64(len(keys)))
	for _, k := range keys[i:end] {
		if globMatch(match, k) && (typ == "" || s.db.keys[k].kind.String() == typ) {
			page = append(page, k)
		}
	}
	next := end
	if next >= uint64(len(keys)) {
		next = 0
	}
	return []any{strconv.FormatUint(next, 10), page}
}

func cmdDBSize(s *Server, _ []string) any {
	return int64(len(s.liveKeys()))
}

func cmdFlush(s *Server, args []string) any {
	for _, a := range args[1:] {
		if u := strings.ToUpper(a); u != "ASYNC" && u != "SYNC" {
			return errSyntax
		}
	}
	s.db = newData()
	return statusOK
}
