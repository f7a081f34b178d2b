package server

import (
	"fmt"
	"io"
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

// limitReader sits between a connection and redcon's reader, which enforces
// no limits: its buffer grows without bound, it rescans buffered bytes and
// recurses once per read while a request is incomplete, it loops over an
// argument count before the arguments arrive, a bulk length near 2^63
// overflows an index and panics, and an inline line with unbalanced quotes
// drops the requests read with it. limitReader frames requests exactly as
// redcon does (FuzzLimitReader checks it), as the bytes arrive, so that
//   - a line longer than MaxLine, a bulk longer than MaxBulk or an argument
//     count above MaxArgs is refused before it is buffered, and every length
//     redcon sees is small, and it never sees unbalanced quotes;
//   - redcon is handed whole requests: Read returns once it holds at least
//     one complete request and keeps any bytes past the last one for the
//     next Read, so redcon parses each request once and its buffer empties
//     (and shrinks) after every batch.
//
// Requests before a violation are delivered; the Read after them returns
// the protocolError.
type limitReader struct {
	r                         io.Reader
	maxLine, maxBulk, maxArgs int64

	st    int
	n     int64 // inline: line length so far; bulk: bytes left incl. CRLF
	args  int64 // bulks left in the current request
	hdr   header
	q     quoting // inline: the quotes of the current line
	cr    bool    // inline: the last byte was '\r' (it ends the line if '\n' follows)
	carry []byte  // scanned bytes past the last request boundary, from off
	off   int
	err   error
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

func newLimitReader(r io.Reader, o Options) *limitReader {
	return &limitReader{r: r, maxLine: int64(o.MaxLine), maxBulk: int64(o.MaxBulk), maxArgs: int64(o.MaxArgs)}
}

func (g *limitReader) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := copy(p, g.carry[g.off:])
	if g.off += n; g.off < len(g.carry) || n == len(p) {
		return n, nil
	}
	g.carry, g.off = g.carry[:0], 0
	if cap(g.carry) > 64<<10 {
		g.carry = nil
	}
	for n < len(p) {
		m, err := g.r.Read(p[n:])
		last, verr := g.scan(p[n : n+m])
		if verr != nil {
			g.err = verr
			if last >= 0 {
				return n + last, nil
			}
			return 0, verr
		}
		if last >= 0 {
			g.carry = append(g.carry, p[n+last:n+m]...)
			return n + last, nil
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// scan advances the framer over b. last is the offset just past the last
// complete request in b (-1 if none ended in b); err is a violation, after
// which nothing is scanned.
func (g *limitReader) scan(b []byte) (last int, err error) {
	last = -1
	for i := 0; i < len(b); {
		switch g.st {
		case stStart:
			if b[i] == '*' {
				g.st, i = stArrayHdr, i+1
				g.hdr.reset()
				continue
			}
			g.st, g.n, g.q, g.cr = stInline, 0, quoting{start: true}, false
		case stInline:
			c := b[i]
			i++
			if c == '\n' {
				if g.q.quote != 0 {
					return last, errUnbalancedQuotes
				}
				g.st, last = stStart, i
				continue
			}
			if g.n++; g.n > g.maxLine {
				return last, protocolErrorf("too big inline request (over %d bytes)", g.maxLine)
			}
			if g.cr && !g.q.add('\r') || c != '\r' && !g.q.add(c) {
				return last, errUnbalancedQuotes
			}
			g.cr = c == '\r'
		case stArrayHdr, stBulkHdr:
			c := b[i]
			i++
			if c != '\n' {
				if g.hdr.add(c); g.hdr.len > g.maxLine {
					if g.st == stArrayHdr {
						return last, protocolError("too big mbulk count string")
					}
					return last, protocolError("too big bulk count string")
				}
				continue
			}
			v, ok := g.hdr.value()
			if g.st == stArrayHdr {
				switch {
				case !ok || v <= 0:
					return last, protocolError("invalid multibulk length")
				case v > g.maxArgs:
					return last, protocolErrorf("invalid multibulk length %d (max %d arguments)", v, g.maxArgs)
				}
				g.args, g.st = v, stBulkStart
				continue
			}
			switch {
			case !ok || v < 0:
				return last, protocolError("invalid bulk length")
			case v > g.maxBulk:
				return last, protocolErrorf("invalid bulk length %d (max %d bytes)", v, g.maxBulk)
			}
			g.n, g.st = v+2, stBulk
		case stBulkStart:
			if b[i] != '$' {
				return last, protocolErrorf("expected '$', got '%c'", b[i])
			}
			g.st, i = stBulkHdr, i+1
			g.hdr.reset()
		case stBulk:
			if g.n > 2 {
				k := min(g.n-2, int64(len(b)-i))
				g.n -= k
				i += int(k)
				continue
			}
			if want := "\r\n"[2-g.n]; b[i] != want {
				return last, protocolError("invalid bulk length")
			}
			g.n--
			i++
			if g.n > 0 {
				continue
			}
			if g.args--; g.args > 0 {
				g.st = stBulkStart
				continue
			}
			g.st, last = stStart, i
		}
	}
	return last, nil
}
