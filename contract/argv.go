package contract

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// The scripts take their ARGV as name/value pairs (args.lua reads them
// into a table), so a script names what it reads and the Go side names
// what it sends: each Args type (claim.go, renew.go, ...) tags its fields
// with the name (`arg:"token"`), and argvOf sends every tagged field under
// it. Values stay Go numbers and strings, which go-redis writes in decimal
// (floats in their shortest form), as the scripts read them; a list goes
// as one comma-joined value, Keys as its prefix.
//
// Fields most Args types share, described once here:
//   - Keys (arg "prefix" where the script builds per-ID keys): the
//     namespace's keys, sent as KEYS in the order its KeysArgv gives;
//   - Host, PID (and Addr): the caller's, written to events and owner
//     hashes;
//   - EventsMaxLen: {ns}:events is trimmed to about this many entries;
//   - EpochUs, TickUs: the layout's epoch (us since the Unix epoch) and
//     tick length (us), to turn Redis TIME into a tick;
//   - Generation: the registry generation the caller ran under, with which
//     it restores a missing {ns}:meta; "" when it never ran under one,
//     and a missing registry is refused (guard.lua);
//   - Mark: the replicas high-water mark of the caller's last grant
//     (replwait.Waiter.Mark), which a restored {ns}:meta starts from;
//   - Identity: IdentityInfo ("" sends it) or IdentityNone (identity.go).

// argField is one tagged field of an Args type: its index and name.
type argField struct {
	index int
	name  string
}

var argFields sync.Map // reflect.Type -> []argField

// fieldsOf are the tagged fields of the struct type t, in order.
func fieldsOf(t reflect.Type) []argField {
	if f, ok := argFields.Load(t); ok {
		return f.([]argField)
	}
	var out []argField
	for i := 0; i < t.NumField(); i++ {
		if name, ok := t.Field(i).Tag.Lookup("arg"); ok {
			out = append(out, argField{i, name})
		}
	}
	argFields.Store(t, out)
	return out
}

// argvOf is the ARGV of a call with the Args struct a: name, value, name,
// value, ... for each tagged field.
func argvOf(a any) []any {
	v := reflect.ValueOf(a)
	fields := fieldsOf(v.Type())
	argv := make([]any, 0, 2*len(fields))
	for _, f := range fields {
		argv = append(argv, f.name, argValue(v.Field(f.index).Interface()))
	}
	return argv
}

// argValue is one field's ARGV value.
func argValue(x any) any {
	switch x := x.(type) {
	case Keys:
		return x.Prefix
	case []int:
		return joinInts(x)
	case []PruneID:
		b := make([]byte, 0, len(x)*40)
		for i, p := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(p.MachineID), 10)
			b = append(b, ':')
			b = append(b, strings.ReplaceAll(p.Token, ",", "")...)
		}
		return string(b)
	}
	return x
}

// joinInts is ids as one ARGV value, comma separated ("1,7,12").
func joinInts(ids []int) string {
	b := make([]byte, 0, len(ids)*6)
	for i, x := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(b)
}
