package server

import (
	"fmt"
	"strings"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// rfc3339Millis is RFC 3339 with milliseconds; times are printed in UTC.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// PARSE id: the ID's parts under the fleet's layout, as an array of time
// (RFC 3339, ms, UTC), tick, sequence, machine and mode ("counter" under
// a counter's reserved machine ID, else "flake"), and in a layout with
// regions a sixth element, the machine ID's region (appended, so clients
// reading five keep working). The ID is decimal, or 13 Crockford base32
// characters as `flaked parse` accepts; a string of digits is decimal. An
// ID wider than the layout's (a 53-bit fleet) is an error naming the range.
func cmdParse(c *conn, args [][]byte) {
	l := c.s.layout()
	id, err := parseIDArg(string(args[1]))
	if err == nil {
		err = l.CheckID(id)
	}
	if err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	p := l.Decompose(id)
	mode := node.ModeFlake
	if l.IsCounterMachineID(p.MachineID) {
		mode = node.ModeCounter
	}
	if l.BitsRegion > 0 {
		c.writeArray(6)
	} else {
		c.writeArray(5)
	}
	c.writeBulkString(p.Time.UTC().Format(rfc3339Millis))
	c.writeInt(p.Tick)
	c.writeInt(int64(p.Sequence))
	c.writeInt(int64(p.MachineID))
	c.writeBulkString(mode.String())
	if l.BitsRegion > 0 {
		c.writeInt(int64(p.Region))
	}
}

func parseIDArg(s string) (uint64, error) {
	var (
		id  uint64
		err error
	)
	if len(s) == flake.Base32Len && strings.Trim(s, "0123456789") != "" {
		id, err = flake.ParseBase32(s)
	} else {
		id, err = flake.ParseID(s)
	}
	if err == nil {
		return id, nil
	}
	if len(s) > 64 { // no ID is this long; do not echo all of it back
		s = fmt.Sprintf("%s... (%d bytes)", s[:32], len(s))
	}
	return 0, fmt.Errorf("%w %q: want a decimal integer in 0..%d or %d Crockford base32 characters",
		flake.ErrInvalidID, s, uint64(flake.MaxID), flake.Base32Len)
}
