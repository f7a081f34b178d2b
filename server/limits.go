package server

import (
	"fmt"
	"math"
	"strings"
)

// protocolError is a request that breaks the protocol or a limit. Its text
// follows Redis ("Protocol error: ..."), as does redcon's own.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

func protocolErrorf(format string, args ...any) error {
	return protocolError(fmt.Sprintf(format, args...))
}

// isProtocolError tells ours and redcon's protocol errors (redcon's type is
// unexported; its messages share the prefix) from I/O errors.
func isProtocolError(err error) bool {
	return strings.HasPrefix(err.Error(), "Protocol error: ")
}

// errUnbalancedQuotes is redcon's error for an inline line it cannot
// split. Found here, the requests before the line are still answered;
// found by redcon, they would be dropped with the whole batch.
var errUnbalancedQuotes = protocolError("unbalanced quotes in request")

// quoting follows redcon's inline tokenizer through a line: arguments are
// split on spaces; a quote may open only at the start of an argument, a
// closing quote must be followed by a space or the end of the line, and a
// backslash escapes the next byte inside quotes.
type quoting struct {
	start  bool // at the start of an argument
	quote  byte // the open quote, or 0
	esc    bool // after a backslash inside quotes
	closed bool // right after a closing quote
}

// add takes the next byte of the line; false means unbalanced quotes.
func (q *quoting) add(c byte) bool {
	switch {
	case q.closed:
		q.closed, q.start = false, true
		return c == ' '
	case q.quote != 0:
		switch {
		case q.esc:
			q.esc = false
		case c == '\\':
			q.esc = true
		case c == q.quote:
			q.quote, q.closed = 0, true
		}
	case c == ' ':
		q.start = true
	case c == '"' || c == '\'':
		if !q.start {
			return false
		}
		q.quote, q.start = c, false
	default:
		q.start = false
	}
	return true
}

// States of the scanner.
const (
	stStart     = iota // at the first byte of a request
	stInline           // in an inline line
	stArrayHdr         // after '*', in the argument count line
	stBulkStart        // expecting '$'
	stBulkHdr          // after '$', in the bulk length line
	stBulk             // in a bulk's data and its CRLF
)

// header parses "<int>\r\n" the way redcon does (strconv.Atoi of the bytes
// before "\r\n"), incrementally.
type header struct {
	len    int64
	val    int64
	neg    bool
	digits int
	bad    bool
	cr     bool // the last byte was '\r'
}

func (h *header) reset() { *h = header{} }

// add takes one byte other than '\n'.
func (h *header) add(c byte) {
	h.len++
	if h.cr { // the '\r' was not the end: it is part of the number
		h.bad = true
	}
	h.cr = false
	switch {
	case c == '\r':
		h.cr = true
	case (c == '+' || c == '-') && h.len == 1:
		h.neg = c == '-'
	case c >= '0' && c <= '9':
		h.digits++
		if h.val > (math.MaxInt64-9)/10 {
			h.val = math.MaxInt64 // beyond every limit; Atoi may still accept it
		} else {
			h.val = h.val*10 + int64(c-'0')
		}
	default:
		h.bad = true
	}
}

// value is the number once '\n' arrived; ok is false where redcon fails.
func (h *header) value() (int64, bool) {
	if !h.cr || h.bad || h.digits == 0 {
		return 0, false
	}
	if h.neg {
		return -h.val, true
	}
	return h.val, true
}
