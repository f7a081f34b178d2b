package simredis

import (
	"slices"
	"time"
)

// What the tests read of a Server's keyspace directly, where Redis would
// need commands the simulator never sends (TYPE, PTTL, KEYS, SMEMBERS,
// XRANGE), so the Server does not implement them. Expired keys count as
// missing, as for a command.

// typeOf is TYPE: "none" for a missing key.
func (s *Server) typeOf(key string) string {
	s.tick()
	if v := s.get(key); v != nil {
		return v.kind.String()
	}
	return "none"
}

// pttl is PTTL: -2 for a missing key, -1 for one without an expiry.
func (s *Server) pttl(key string) time.Duration {
	s.tick()
	if s.get(key) == nil {
		return -2
	}
	at, ok := s.db.expires[key]
	if !ok {
		return -1
	}
	return time.Duration(at-s.nowMs) * time.Millisecond
}

// liveKeys is KEYS *, sorted.
func (s *Server) liveKeys() []string {
	s.tick()
	var out []string
	for _, k := range s.db.Keys() {
		if s.get(k) != nil {
			out = append(out, k)
		}
	}
	return out
}

// members is SMEMBERS, in insertion order.
func (s *Server) members(key string) []string {
	s.tick()
	v, _ := s.getKind(key, kindSet)
	if v == nil {
		return nil
	}
	return slices.Clone(v.set.items)
}

// streamEntries is XRANGE key - +: each entry's ID and fields as a map.
func (s *Server) streamEntries(key string) (ids []string, values []map[string]any) {
	s.tick()
	v, _ := s.getKind(key, kindStream)
	if v == nil {
		return nil, nil
	}
	for _, e := range v.stream.entries {
		m := map[string]any{}
		for i := 0; i+1 < len(e.fields); i += 2 {
			m[e.fields[i]] = e.fields[i+1]
		}
		ids, values = append(ids, e.id.String()), append(values, m)
	}
	return ids, values
}

// hashAll is HGETALL as a map.
func (s *Server) hashAll(key string) map[string]string {
	s.tick()
	v, _ := s.getKind(key, kindHash)
	out := map[string]string{}
	if v != nil {
		for i, f := range v.hash.fields.items {
			out[f] = v.hash.vals[i]
		}
	}
	return out
}
