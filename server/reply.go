package server

import (
	"fmt"
	"strconv"

	"github.com/tidwall/redcon"
)

// Replies, encoded into c.out, which flush or an event loop writes out.
// redcon's Append functions replace CR and LF in simple strings and errors
// with spaces, so a client's bytes cannot break the framing.
//
// Integers, strings, errors and arrays are the same bytes in RESP2 and
// RESP3, so the hot path (NEXTID, NEXTIDS) never looks at the protocol.
// The writers below that differ follow what Redis 7 sends: a map is a flat
// array of pairs in RESP2, a set an array, null "$-1", verbatim text a
// bulk string.

func appendError(b []byte, msg string) []byte { return redcon.AppendError(b, msg) }

func (c *conn) writeError(msg string)          { c.out = redcon.AppendError(c.out, msg) }
func (c *conn) writeErrorf(f string, a ...any) { c.writeError(fmt.Sprintf(f, a...)) }
func (c *conn) writeOK()                       { c.out = redcon.AppendOK(c.out) }
func (c *conn) writeStatus(s string)           { c.out = redcon.AppendString(c.out, s) }
func (c *conn) writeInt(n int64)               { c.out = redcon.AppendInt(c.out, n) }
func (c *conn) writeUint(n uint64)             { c.out = redcon.AppendUint(c.out, n) }
func (c *conn) writeBulk(b []byte)             { c.out = redcon.AppendBulk(c.out, b) }
func (c *conn) writeBulkString(s string)       { c.out = redcon.AppendBulkString(c.out, s) }
func (c *conn) writeArray(n int)               { c.out = redcon.AppendArray(c.out, n) }

// writeUintString writes n as a bulk string of its decimal digits (the
// STRING option of NEXTID and NEXTIDS), without allocating.
func (c *conn) writeUintString(n uint64) {
	var buf [20]byte
	c.out = redcon.AppendBulk(c.out, strconv.AppendUint(buf[:0], n, 10))
}

// writeNull writes Redis's null: "_" in RESP3, the null bulk string in RESP2.
func (c *conn) writeNull() {
	if c.resp3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = redcon.AppendNull(c.out)
}

// writeMap begins a map of n pairs; the caller writes 2n elements.
func (c *conn) writeMap(n int) {
	if c.resp3 {
		c.out = appendHeader(c.out, '%', n)
		return
	}
	c.out = redcon.AppendArray(c.out, 2*n)
}

// writeSet begins a set of n elements.
func (c *conn) writeSet(n int) {
	if c.resp3 {
		c.out = appendHeader(c.out, '~', n)
		return
	}
	c.out = redcon.AppendArray(c.out, n)
}

// writeVerbatim writes plain text: in RESP3 a verbatim string of format
// "txt", as Redis 7 answers INFO and CLIENT INFO/LIST.
func (c *conn) writeVerbatim(s string) {
	if !c.resp3 {
		c.writeBulkString(s)
		return
	}
	c.out = appendHeader(c.out, '=', len(s)+4)
	c.out = append(c.out, "txt:"...)
	c.out = append(c.out, s...)
	c.out = append(c.out, '\r', '\n')
}

func appendHeader(b []byte, typ byte, n int) []byte {
	b = append(b, typ)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// writeStrings writes an array of bulk strings.
func (c *conn) writeStrings(ss ...string) {
	c.writeArray(len(ss))
	for _, s := range ss {
		c.writeBulkString(s)
	}
}

// writePairs writes a map of name/value pairs given flat: n0, v0, n1, ....
func (c *conn) writePairs(kv ...string) {
	c.writeMap(len(kv) / 2)
	for _, s := range kv {
		c.writeBulkString(s)
	}
}
