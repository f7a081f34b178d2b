package simredis

import (
	"maps"
	"slices"
)

// ordered is a list of distinct strings in insertion order; removing one
// keeps the order of the rest. It holds hash fields and set members: the
// order Redis's small encodings (listpacks) keep, and above all an order
// that does not depend on Go's map iteration, so a simulation replays
// exactly. Lookups scan the list while it is short and use an index once
// it is longer (a registry's {ns}:reserved may hold thousands of IDs).
type ordered struct {
	items []string
	index map[string]int // position of every item; nil while len(items) <= indexFrom
}

// indexFrom is the length above which lookups use the index: scanning a
// few short strings is faster than hashing one.
const indexFrom = 16

func (o *ordered) len() int { return len(o.items) }

// find returns the position of s, or -1.
func (o *ordered) find(s string) int {
	if o.index != nil {
		if i, ok := o.index[s]; ok {
			return i
		}
		return -1
	}
	for i, it := range o.items {
		if it == s {
			return i
		}
	}
	return -1
}

// push appends s, which the caller found missing.
func (o *ordered) push(s string) {
	o.items = append(o.items, s)
	switch {
	case o.index != nil:
		o.index[s] = len(o.items) - 1
	case len(o.items) > indexFrom:
		o.index = make(map[string]int, 2*len(o.items))
		for i, it := range o.items {
			o.index[it] = i
		}
	}
}

// remove deletes the item at position i, shifting the later ones down.
func (o *ordered) remove(i int) {
	if o.index != nil {
		delete(o.index, o.items[i])
		for j := i + 1; j < len(o.items); j++ {
			o.index[o.items[j]] = j - 1
		}
	}
	o.items = slices.Delete(o.items, i, i+1)
}

// clone returns a copy that shares nothing writable with o.
func (o *ordered) clone() ordered {
	return ordered{items: slices.Clone(o.items), index: maps.Clone(o.index)}
}
