package simredis

import (
	"slices"
)

// hash is a Redis hash: fields in insertion order (ordered), values
// alongside.
type hash struct {
	fields ordered
	vals   []string
}

func (h *hash) get(f string) (string, bool) {
	if i := h.fields.find(f); i >= 0 {
		return h.vals[i], true
	}
	return "", false
}

// set stores f = v and reports whether f is new.
func (h *hash) set(f, v string) bool {
	if i := h.fields.find(f); i >= 0 {
		h.vals[i] = v
		return false
	}
	h.fields.push(f)
	h.vals = append(h.vals, v)
	return true
}

func (h *hash) del(f string) bool {
	i := h.fields.find(f)
	if i < 0 {
		return false
	}
	h.fields.remove(i)
	h.vals = slices.Delete(h.vals, i, i+1)
	return true
}

func (h *hash) clone() *hash {
	return &hash{fields: h.fields.clone(), vals: slices.Clone(h.vals)}
}

var hashCommands = []*command{
	{name: "hget", arity: 3, run: cmdHGet},
	{name: "hmget", arity: -3, run: cmdHMGet},
	{name: "hset", arity: -4, run: cmdHSet},
	{name: "hdel", arity: -3, run: cmdHDel},
	{name: "hgetall", arity: 2, run: cmdHGetAll},
}

// readHash returns the hash in key (nil when missing) or false on a key of
// another type.
func (s *Server) readHash(key string) (*hash, bool) {
	v, ok := s.getKind(key, kindHash)
	if v == nil {
		return nil, ok
	}
	return v.hash, true
}

func cmdHGet(s *Server, args []string) any {
	h, ok := s.readHash(args[1])
	if !ok {
		return errWrongType
	}
	if h != nil {
		if v, found := h.get(args[2]); found {
			return v
		}
	}
	return nil
}

func cmdHMGet(s *Server, args []string) any {
	h, ok := s.readHash(args[1])
	if !ok {
		return errWrongType
	}
	out := make([]any, len(args)-2)
	if h != nil {
		for i, f := range args[2:] {
			if v, found := h.get(f); found {
				out[i] = v
			}
		}
	}
	return out
}

// cmdHSet is HSET (the number of new fields) and HMSET ("OK").
func cmdHSet(s *Server, args []string) any {
	if len(args)%2 != 0 {
		return errArity(lookup(args[0]).name)
	}
	v, ok := s.writable(args[1], kindHash)
	if !ok {
		return errWrongType
	}
	var added int64
	for i := 2; i < len(args); i += 2 {
		if v.hash.set(args[i], args[i+1]) {
			added++
		}
	}
	if lookup(args[0]).name == "hmset" {
		return statusOK
	}
	return added
}

func cmdHDel(s *Server, args []string) any {
	return removeMembers(s, args, kindHash, func(v *value, f string) bool { return v.hash.del(f) },
		func(v *value) int { return v.hash.fields.len() })
}

// removeMembers is HDEL and SREM: it removes args[2:] from the hash or set
// at args[1] with del, counts what was there, and deletes the key once
// size says it is empty, as Redis does.
func removeMembers(s *Server, args []string, k kind, del func(*value, string) bool, size func(*value) int) any {
	v, ok := s.getKind(args[1], k)
	if !ok {
		return errWrongType
	}
	if v == nil {
		return int64(0)
	}
	v = s.own(args[1], v)
	var n int64
	for _, m := range args[2:] {
		if del(v, m) {
			n++
		}
	}
	if size(v) == 0 {
		s.del(args[1])
	}
	return n
}

// cmdHGetAll is HGETALL: fields and values, in field order.
func cmdHGetAll(s *Server, args []string) any {
	key := args[1]
	h, ok := s.readHash(key)
	if !ok {
		return errWrongType
	}
	out := []any{}
	if h == nil {
		return out
	}
	for i, f := range h.fields.items {
		out = append(out, f, h.vals[i])
	}
	return out
}
