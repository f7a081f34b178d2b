package contract

import (
	"fmt"
	"regexp"
)

// DefaultNamespace is the namespace of a fleet that names none.
const DefaultNamespace = "flaked"

// namespaceRE is the namespace rule: what may stand inside the {hash tag}
// of every key. No brace, which would end the tag early and scatter the
// namespace's keys over Cluster slots, and no glob character, which would
// make audit's SCAN of {ns}:lease:* match keys of other namespaces.
var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckNamespace reports whether ns may name a fleet's keys. coord and
// fallback wrap its error in their ErrInvalidOptions; audit checks the
// namespace it is asked to read.
func CheckNamespace(ns string) error {
	if !namespaceRE.MatchString(ns) {
		return fmt.Errorf("namespace %q: want 1..64 of A-Z a-z 0-9 . _ -", ns)
	}
	return nil
}

// Keys are the Redis keys of one namespace (docs/design.md, Redis keys).
// They share the hash tag {ns}, so each script touches one Cluster slot.
// The scripts take the fixed ones as KEYS, in the order their header
// comments list; the per-ID lease and owner keys they build themselves
// from Prefix (ARGV[1]), so Lease and Owner here must match what they
// build ("lease:" and "owner:" after the prefix).
type Keys struct {
	Namespace string
	Prefix    string // "{ns}:"
	Layout    string // "{ns}:layout": the fleet's canonical layout
	Meta      string // "{ns}:meta": the registry's hash (Meta* fields)
	Machines  string // "{ns}:machines": every machine ID ever registered
	Reserved  string // "{ns}:reserved": machine ID -> highest tick its owners may use
	Counter   string // "{ns}:counter": the last counter-mode value handed out (hash: tick, seq)
	Events    string // "{ns}:events": the audit stream (Event* types, Field* fields)
	// LeasePrefix and OwnerPrefix are the per-ID keys without their
	// machine ID, "{ns}:lease:" and "{ns}:owner:": what a SCAN for them
	// matches.
	LeasePrefix string
	OwnerPrefix string
}

// NewKeys returns the keys of namespace ns. It does not check ns (see
// CheckNamespace), so a report can name the keys of any namespace it
// was given.
func NewKeys(ns string) Keys {
	p := "{" + ns + "}:"
	return Keys{
		Namespace:   ns,
		Prefix:      p,
		Layout:      p + "layout",
		Meta:        p + "meta",
		Machines:    p + "machines",
		Reserved:    p + "reserved",
		Counter:     p + "counter",
		Events:      p + "events",
		LeasePrefix: p + "lease:",
		OwnerPrefix: p + "owner:",
	}
}

// Lease is "{ns}:lease:<id>", the owner token of machine ID id (a
// decimal, as the scripts write it; audit also reads keys whose ID part
// is not one).
func (k Keys) Lease(id string) string { return k.LeasePrefix + id }

// Owner is "{ns}:owner:<id>", the owner hash (Owner* fields) of machine
// ID id.
func (k Keys) Owner(id string) string { return k.OwnerPrefix + id }
