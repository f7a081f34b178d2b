package audit

import (
	"fmt"
	"strconv"

	"github.com/flaked/flaked/coord"
)

// keys are the Redis keys of one namespace (docs/design.md, Redis keys).
type keys struct {
	ns       string
	prefix   string // "{ns}:"
	layout   string
	meta     string
	machines string
	reserved string
	events   string
}

// newKeys validates the namespace the way the registry does.
func newKeys(ns string) (keys, error) {
	if ns == "" {
		ns = coord.DefaultNamespace
	}
	reg, err := coord.NewRegistry(nil, coord.Options{Namespace: ns})
	if err != nil {
		return keys{}, err
	}
	ns = reg.Options().Namespace
	p := "{" + ns + "}:"
	return keys{
		ns:       ns,
		prefix:   p,
		layout:   p + "layout",
		meta:     p + "meta",
		machines: p + "machines",
		reserved: p + "reserved",
		events:   p + "events",
	}, nil
}

func (k keys) lease(id string) string { return k.prefix + "lease:" + id }
func (k keys) owner(id string) string { return k.prefix + "owner:" + id }

// parseMachineID reads a machine ID as the scripts write it: a canonical
// non-negative decimal.
func parseMachineID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a machine ID", s)
	}
	return n, nil
}
