package coord

import "strconv"

// keys are the Redis keys of one namespace. They share the {ns} hash tag,
// so every script touches one Cluster slot.
type keys struct {
	prefix   string // "{ns}:"
	layout   string
	meta     string
	machines string
	reserved string
	counter  string
	events   string
}

func newKeys(ns string) keys {
	p := "{" + ns + "}:"
	return keys{
		prefix:   p,
		layout:   p + "layout",
		meta:     p + "meta",
		machines: p + "machines",
		reserved: p + "reserved",
		counter:  p + "counter",
		events:   p + "events",
	}
}

func (k keys) lease(id int) string { return k.prefix + "lease:" + strconv.Itoa(id) }
func (k keys) owner(id int) string { return k.prefix + "owner:" + strconv.Itoa(id) }
