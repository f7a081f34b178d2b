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
// the counter's reserved machine ID, else "flake"). The ID is decimal, or
// 13 Crockford base32 characters as `flaked parse` accepts; a string of
// digits is decimal.
func cmdParse(c *conn, args [][]byte) {
	id, err := parseIDArg(string(args[1]))
	if err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	l := c.s.layout()
	p := l.Decompose(id)
	mode := node.ModeFlake
	if p.MachineID == l.CounterMachineID() {
		mode = node.ModeCounter
	}
	c.writeArray(5)
	c.writeBulkString(p.Time.UTC().Format(rfc3339Millis))
	c.writeInt(p.Tick)
	c.writeInt(int64(p.Sequence))
	c.writeInt(int64(p.MachineID))
	c.writeBulkString(mode.String())
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
