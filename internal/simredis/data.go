package simredis

import (
	"maps"
	"slices"
)

// Data is the keyspace of one server: keys, values, and expiry times in
// absolute milliseconds of the clock of the server that set them, as an
// RDB file or a replica keeps them (a key whose time has passed is gone
// wherever the copy is loaded). Get one from Server.Snapshot; give it to
// Restart, Promote or Load. A Data is never changed once made: servers
// load copies of it, so one Snapshot may be loaded any number of times
// (a backup restored twice).
type Data struct {
	keys    map[string]*value
	expires map[string]int64 // key -> ms; only keys with an expiry
	offset  int64            // the replication offset it was taken at (replicas.go)
}

func newData() *Data {
	return &Data{keys: map[string]*value{}, expires: map[string]int64{}}
}

// Len returns the number of keys, counting those whose expiry has passed
// but that were not removed yet.
func (d *Data) Len() int { return len(d.keys) }

// Keys returns the keys Len counts, sorted.
func (d *Data) Keys() []string { return slices.Sorted(maps.Keys(d.keys)) }

// copy returns a Data that shares d's values until one of the two writes
// them: copying is one map copy however large the hashes and streams are,
// which is what lets a simulation snapshot a master at every step. The
// values are marked shared, and a write copies a shared value first
// (Server.writable); a value stays marked for good, which costs at most
// one needless copy.
func (d *Data) copy(skip func(key string) bool) *Data {
	c := &Data{keys: make(map[string]*value, len(d.keys)), expires: make(map[string]int64, len(d.expires))}
	for k, v := range d.keys {
		if skip != nil && skip(k) {
			continue
		}
		if !v.shared { // only written when false: a Data loaded by servers on several goroutines is only read
			v.shared = true
		}
		c.keys[k] = v
		if at, ok := d.expires[k]; ok {
			c.expires[k] = at
		}
	}
	return c
}

// kind is the type of a value, as TYPE names it.
type kind uint8

const (
	kindString kind = iota + 1
	kindHash
	kindSet
	kindStream
)

func (k kind) String() string {
	switch k {
	case kindString:
		return "string"
	case kindHash:
		return "hash"
	case kindSet:
		return "set"
	case kindStream:
		return "stream"
	}
	return "none"
}

// value is what a key holds. Strings are immutable (SET stores a
// new value); the others are changed in place, so a value shared between
// two Data (shared) is copied before a write.
type value struct {
	kind   kind
	shared bool
	str    string
	hash   *hash
	set    *ordered
	stream *stream
}

func newValue(k kind) *value {
	v := &value{kind: k}
	switch k {
	case kindHash:
		v.hash = &hash{}
	case kindSet:
		v.set = &ordered{}
	case kindStream:
		v.stream = &stream{}
	}
	return v
}

// clone returns an unshared deep copy (stream entries, never changed once
// added, are shared: see stream.clone).
func (v *value) clone() *value {
	c := &value{kind: v.kind, str: v.str}
	switch v.kind {
	case kindHash:
		c.hash = v.hash.clone()
	case kindSet:
		s := v.set.clone()
		c.set = &s
	case kindStream:
		c.stream = v.stream.clone()
	}
	return c
}

// get returns the value of key, or nil when there is none. An expired key
// is deleted on the way, as Redis expires keys lazily on access; "expired"
// is Redis's test, now > expiry, against the time the command started.
func (s *Server) get(key string) *value {
	v := s.db.keys[key]
	if v == nil {
		return nil
	}
	if at, ok := s.db.expires[key]; ok && s.nowMs > at {
		s.del(key)
		return nil
	}
	return v
}

// getKind returns key's value when it is of kind k; nil when there is
// none; and false when it holds another kind (WRONGTYPE).
func (s *Server) getKind(key string, k kind) (*value, bool) {
	v := s.get(key)
	if v != nil && v.kind != k {
		return nil, false
	}
	return v, true
}

// writable returns key's value of kind k ready to be changed, making an
// empty one when there is none; false when the key holds another kind.
// Commands that may leave a hash or set empty delete the key after.
func (s *Server) writable(key string, k kind) (*value, bool) {
	v := s.get(key)
	if v == nil {
		v = newValue(k)
		s.db.keys[key] = v
		return v, true
	}
	if v.kind != k {
		return nil, false
	}
	return s.own(key, v), true
}

// own returns v, the value of key, unshared: a copy when another Data
// holds it too.
func (s *Server) own(key string, v *value) *value {
	if v.shared {
		v = v.clone()
		s.db.keys[key] = v
	}
	return v
}

// del deletes key and its expiry, reporting whether it existed.
func (s *Server) del(key string) bool {
	if _, ok := s.db.keys[key]; !ok {
		return false
	}
	delete(s.db.keys, key)
	delete(s.db.expires, key)
	return true
}

// put stores v under key, dropping any expiry unless keepTTL.
func (s *Server) put(key string, v *value, keepTTL bool) {
	s.db.keys[key] = v
	if !keepTTL {
		delete(s.db.expires, key)
	}
}
