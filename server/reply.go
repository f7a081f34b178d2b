package server

import (
	"fmt"

	"github.com/tidwall/redcon"
)

// Replies, encoded into c.out, which flush or an event loop writes out.
// redcon's Append functions replace CR and LF in simple strings and errors
// with spaces, so a client's bytes cannot break the framing.

func appendError(b []byte, msg string) []byte { return redcon.AppendError(b, msg) }

func (c *conn) writeError(msg string)          { c.out = redcon.AppendError(c.out, msg) }
func (c *conn) writeErrorf(f string, a ...any) { c.writeError(fmt.Sprintf(f, a...)) }
func (c *conn) writeOK()                       { c.out = redcon.AppendOK(c.out) }
func (c *conn) writeStatus(s string)           { c.out = redcon.AppendString(c.out, s) }
func (c *conn) writeInt(n int64)               { c.out = redcon.AppendInt(c.out, n) }
func (c *conn) writeUint(n uint64)             { c.out = redcon.AppendUint(c.out, n) }
func (c *conn) writeBulk(b []byte)             { c.out = redcon.AppendBulk(c.out, b) }
func (c *conn) writeBulkString(s string)       { c.out = redcon.AppendBulkString(c.out, s) }
func (c *conn) writeNull()                     { c.out = redcon.AppendNull(c.out) }
func (c *conn) writeArray(n int)               { c.out = redcon.AppendArray(c.out, n) }

// writeStrings writes an array of bulk strings.
func (c *conn) writeStrings(ss ...string) {
	c.writeArray(len(ss))
	for _, s := range ss {
		c.writeBulkString(s)
	}
}
