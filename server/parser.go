package server

import "math"

// reqParser reads requests out of a connection's input buffer. It replaces
// redcon's Reader, which copies every request and allocates its argument
// slices, grows its buffer without bound, rescans buffered bytes and
// recurses once per read while a request is incomplete, loops over an
// argument count before the arguments arrive, panics on a bulk length near
// 2^63, and drops the requests read with an inline line that has
// unbalanced quotes. The parser accepts exactly the requests redcon
// accepts, splits them into the same arguments (FuzzParser checks both
// against redcon), and:
//   - scans each byte once, as it arrives, so input dripped a byte at a
//     time costs no rescans;
//   - refuses a line longer than MaxLine, a bulk longer than MaxBulk or an
//     argument count above MaxArgs before it is buffered;
//   - returns the arguments of RESP requests as slices of its buffer
//     (inline ones are unquoted into a scratch buffer), allocating nothing
//     in steady state;
//   - answers the requests before a violation, then reports it.
//
// The input buffer holds at most one incomplete request beyond the ones
// already read, so its size is bounded by the limits.
type reqParser struct {
	maxLine, maxBulk, maxArgs int64

	buf        []byte // buf[:end] is the input read so far
	start, pos int    // start of the request being parsed; next byte to scan
	end        int

	st    int
	n     int64   // inline: line length so far; bulk: bytes left incl. CRLF
	left  int64   // bulks left in the current request
	hdr   header  // the count or length line being read
	q     quoting // inline: the quotes of the current line
	cr    bool    // inline: the last byte was '\r'
	marks []int   // RESP: start and end of each argument, relative to start
	args  [][]byte
	line  []byte // inline: the unquoted arguments, back to back
	err   error
}

const (
	// minRead is the least free space a read is offered.
	minRead = 4 << 10
	// keepIn bounds the input buffer a connection keeps between requests.
	keepIn = 256 << 10
)

func newReqParser(o Options) *reqParser {
	return &reqParser{maxLine: int64(o.MaxLine), maxBulk: int64(o.MaxBulk), maxArgs: int64(o.MaxArgs)}
}

// space returns the free end of the buffer for the next read, making room:
// consumed bytes are dropped, the partial request moves to the front, and
// the buffer grows when that is not enough.
func (p *reqParser) space() []byte {
	if p.start == p.end && cap(p.buf) > keepIn {
		p.buf = nil
	}
	if p.buf == nil {
		p.buf = make([]byte, minRead)
	}
	if len(p.buf)-p.end >= minRead {
		return p.buf[p.end:]
	}
	if p.start > 0 {
		copy(p.buf, p.buf[p.start:p.end])
		p.pos -= p.start
		p.end -= p.start
		p.start = 0
	}
	if len(p.buf)-p.end < minRead {
		nb := make([]byte, max(2*len(p.buf), p.end+minRead))
		copy(nb, p.buf[:p.end])
		p.buf = nb
	}
	return p.buf[p.end:]
}

// wrote records n bytes read into space().
func (p *reqParser) wrote(n int) { p.end += n }

// buffered reports whether input is read but not yet returned.
func (p *reqParser) buffered() bool { return p.start < p.end }

// next returns the next complete request's arguments, nil when no complete
// request is buffered, or the protocol error that ends the connection
// (after the requests before it). The arguments are valid until the next
// call of space or next.
func (p *reqParser) next() ([][]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	for p.pos < p.end {
		args, err := p.scan()
		if err != nil {
			p.err = err
			return nil, err
		}
		if args != nil {
			return args, nil
		}
	}
	if p.start == p.end { // all consumed: start over at the front
		p.start, p.pos, p.end = 0, 0, 0
	}
	return nil, nil
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

// scan advances over buffered bytes until a request ends (its arguments
// are returned), the bytes run out (nil), or the input breaks the
// protocol or a limit.
func (p *reqParser) scan() ([][]byte, error) {
	b := p.buf[:p.end]
	i := p.pos
	defer func() { p.pos = i }()
	for i < len(b) {
		switch p.st {
		case stStart:
			p.start = i
			if b[i] == '*' {
				p.st, i = stArrayHdr, i+1
				p.hdr.reset()
				p.marks = p.marks[:0]
				continue
			}
			p.st, p.n, p.q, p.cr = stInline, 0, quoting{start: true}, false
		case stInline:
			c := b[i]
			i++
			if c == '\n' {
				if p.q.quote != 0 {
					return nil, errUnbalancedQuotes
				}
				p.st = stStart
				line := b[p.start : i-1]
				if len(line) > 0 && line[len(line)-1] == '\r' {
					line = line[:len(line)-1]
				}
				if args := p.inline(line); len(args) > 0 {
					p.start = i
					return args, nil
				}
				p.start = i
				continue
			}
			if p.n++; p.n > p.maxLine {
				return nil, protocolErrorf("too big inline request (over %d bytes)", p.maxLine)
			}
			if p.cr && !p.q.add('\r') || c != '\r' && !p.q.add(c) {
				return nil, errUnbalancedQuotes
			}
			p.cr = c == '\r'
		case stArrayHdr, stBulkHdr:
			var v int64
			var ok bool
			if p.hdr.len == 0 {
				// Fast path: the whole line is here and is plain digits.
				v, i, ok = quickHeader(b, i)
			}
			if !ok {
				c := b[i]
				i++
				if c != '\n' {
					if p.hdr.add(c); p.hdr.len > p.maxLine {
						if p.st == stArrayHdr {
							return nil, protocolError("too big mbulk count string")
						}
						return nil, protocolError("too big bulk count string")
					}
					continue
				}
				v, ok = p.hdr.value()
			}
			if p.st == stArrayHdr {
				switch {
				case !ok || v <= 0:
					return nil, protocolError("invalid multibulk length")
				case v > p.maxArgs:
					return nil, protocolErrorf("invalid multibulk length %d (max %d arguments)", v, p.maxArgs)
				}
				p.left, p.st = v, stBulkStart
				continue
			}
			switch {
			case !ok || v < 0:
				return nil, protocolError("invalid bulk length")
			case v > p.maxBulk:
				return nil, protocolErrorf("invalid bulk length %d (max %d bytes)", v, p.maxBulk)
			}
			from := i - p.start
			p.marks = append(p.marks, from, from+int(v))
			p.n, p.st = v+2, stBulk
		case stBulkStart:
			if b[i] != '$' {
				return nil, protocolErrorf("expected '$', got '%c'", b[i])
			}
			p.st, i = stBulkHdr, i+1
			p.hdr.reset()
		case stBulk:
			if p.n > 2 {
				k := min(p.n-2, int64(len(b)-i))
				p.n -= k
				i += int(k)
				continue
			}
			if want := "\r\n"[2-p.n]; b[i] != want {
				return nil, protocolError("invalid bulk length")
			}
			p.n--
			i++
			if p.n > 0 {
				continue
			}
			if p.left--; p.left > 0 {
				p.st = stBulkStart
				continue
			}
			p.st = stStart
			req := b[p.start:i]
			p.args = p.args[:0]
			for k := 0; k < len(p.marks); k += 2 {
				p.args = append(p.args, req[p.marks[k]:p.marks[k+1]:p.marks[k+1]])
			}
			p.start = i
			return p.args, nil
		}
	}
	return nil, nil
}

// quickHeader reads a count or length line that is all in b from i: 1 to
// 18 plain digits then CRLF. ok is false for anything else (a sign, an
// incomplete line, a stray byte), which the byte-at-a-time path then reads
// with its exact errors; where both read a line they agree.
func quickHeader(b []byte, i int) (v int64, next int, ok bool) {
	j := i
	for j < len(b) && j-i < 18 && '0' <= b[j] && b[j] <= '9' {
		v = v*10 + int64(b[j]-'0')
		j++
	}
	if j == i || j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' {
		return 0, i, false
	}
	return v, j + 2, true
}

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

// errUnbalancedQuotes is redcon's error for an inline line it cannot
// split. Found here, the requests before the line are still answered;
// found by redcon, they would be dropped with the whole batch.
var errUnbalancedQuotes = protocolError("unbalanced quotes in request")

// inline splits a line the way redcon does: arguments are separated by
// spaces; an argument may be quoted with " or ', and inside quotes a
// backslash escapes the next byte (\n, \r and \t are control characters).
// The quotes were checked as the line arrived.
func (p *reqParser) inline(line []byte) [][]byte {
	p.args = p.args[:0]
	p.line = p.line[:0]
	p.marks = p.marks[:0]
	for len(line) > 0 {
		if line[0] == ' ' {
			line = line[1:]
			continue
		}
		from := len(p.line)
		if q := line[0]; q == '"' || q == '\'' {
			i := 1
			for ; i < len(line) && line[i] != q; i++ {
				c := line[i]
				if c == '\\' && i+1 < len(line) {
					i++
					switch c = line[i]; c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					}
				}
				p.line = append(p.line, c)
			}
			line = line[min(i+1, len(line)):]
		} else {
			i := 0
			for i < len(line) && line[i] != ' ' {
				i++
			}
			p.line = append(p.line, line[:i]...)
			line = line[i:]
		}
		p.marks = append(p.marks, from, len(p.line))
	}
	for k := 0; k < len(p.marks); k += 2 {
		p.args = append(p.args, p.line[p.marks[k]:p.marks[k+1]:p.marks[k+1]])
	}
	return p.args
}
