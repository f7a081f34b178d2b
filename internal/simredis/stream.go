package simredis

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// streamID is an entry ID, <ms>-<seq>.
type streamID struct{ ms, seq uint64 }

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

func (id streamID) less(o streamID) bool {
	return id.ms < o.ms || id.ms == o.ms && id.seq < o.seq
}

// parseStreamID reads "<ms>-<seq>" or "<ms>", which stands for <ms>-seq.
func parseStreamID(s string, seq uint64) (streamID, bool) {
	msText, seqText, full := strings.Cut(s, "-")
	ms, err := strconv.ParseUint(msText, 10, 64)
	if err != nil {
		return streamID{}, false
	}
	if full {
		if seq, err = strconv.ParseUint(seqText, 10, 64); err != nil {
			return streamID{}, false
		}
	}
	return streamID{ms, seq}, true
}

type streamEntry struct {
	id     streamID
	fields []string // field, value, ...
}

// stream is a Redis stream. Entries are never changed once added, and
// removing them (trimming, XDEL) makes a new slice or reslices from the
// front, so copies of a stream share the entries' backing array: clone is
// O(1), and the first XADD after it copies the slice once.
type stream struct {
	entries    []streamEntry
	last       streamID // the last ID added, kept when entries are removed
	added      uint64   // entries ever added (XINFO entries-added)
	maxDeleted streamID // highest ID removed by XDEL
}

func (st *stream) clone() *stream {
	c := *st
	c.entries = slices.Clip(st.entries) // an append must not write into the shared array
	return &c
}

// trim removes the oldest entries beyond maxLen. An approximate trim
// (MAXLEN ~) removes only whole nodes of approxNode entries, as Redis
// removes whole radix-tree nodes: the stream keeps at least maxLen and
// fewer than maxLen + approxNode entries. Redis's nodes end at 100
// entries or 4 KB, so its trims come in other steps.
func (st *stream) trim(maxLen int64, approx bool) int64 {
	excess := int64(len(st.entries)) - maxLen
	if approx {
		excess -= excess % approxNode
	}
	if excess <= 0 {
		return 0
	}
	st.entries = st.entries[excess:]
	return excess
}

// approxNode is stream-node-max-entries's default.
const approxNode = 100

// find returns the position of the first entry with an ID >= id.
func (st *stream) find(id streamID) int {
	i, _ := slices.BinarySearchFunc(st.entries, id, func(e streamEntry, id streamID) int {
		switch {
		case e.id.less(id):
			return -1
		case id.less(e.id):
			return 1
		}
		return 0
	})
	return i
}

var streamCommands = []*command{
	{name: "xadd", arity: -5, run: cmdXAdd},
	{name: "xlen", arity: 2, run: cmdXLen},
	{name: "xrange", arity: -4, run: func(s *Server, a []string) any { return xrange(s, a, false) }},
	{name: "xrevrange", arity: -4, run: func(s *Server, a []string) any { return xrange(s, a, true) }},
	{name: "xtrim", arity: -4, run: cmdXTrim},
	{name: "xdel", arity: -3, run: cmdXDel},
	{name: "xinfo", arity: -2, run: cmdXInfo},
}

// readStream returns the stream in key (nil when missing) or false on a
// key of another type.
func (s *Server) readStream(key string) (*stream, bool) {
	v, ok := s.getKind(key, kindStream)
	if v == nil {
		return nil, ok
	}
	return v.stream, true
}

// trimArgs are the MAXLEN and LIMIT options of XADD and XTRIM (MINID is
// not supported).
type trimArgs struct {
	maxLen int64 // -1 for none
	approx bool
}

// parseTrim reads [MAXLEN [= | ~] n [LIMIT count]] at args[i:], returning
// the position after them.
func parseTrim(args []string, i int) (trimArgs, int, any) {
	t := trimArgs{maxLen: -1}
	for i < len(args) {
		switch strings.ToUpper(args[i]) {
		case "MAXLEN":
			i++
			if i < len(args) && (args[i] == "~" || args[i] == "=") {
				t.approx = args[i] == "~"
				i++
			}
			if i >= len(args) {
				return t, i, errSyntax
			}
			n, ok := parseInt(args[i])
			if !ok {
				return t, i, errNotInt
			}
			if n < 0 {
				return t, i, Error("ERR The MAXLEN argument must be >= 0.")
			}
			t.maxLen = n
			i++
		case "LIMIT": // a bound on work per trim; nothing to bound here
			if i+1 >= len(args) {
				return t, i, errSyntax
			}
			if _, ok := parseInt(args[i+1]); !ok {
				return t, i, errNotInt
			}
			i += 2
		case "MINID":
			return t, i, Error("ERR simredis: XADD/XTRIM MINID is not supported")
		default:
			return t, i, nil
		}
	}
	return t, i, nil
}

// cmdXAdd is XADD key [NOMKSTREAM] [MAXLEN [= | ~] n [LIMIT count]] * | id
// field value [field value ...]. An automatic ID is <server ms>-0, or the
// last ID's ms with the next sequence when the clock has not moved past
// it (Redis's rule, which keeps IDs increasing when the clock steps back).
func cmdXAdd(s *Server, args []string) any {
	i, noMake := 2, false
	if strings.EqualFold(args[i], "NOMKSTREAM") {
		noMake = true
		i++
	}
	trim, i, err := parseTrim(args, i)
	if err != nil {
		return err
	}
	if i >= len(args) {
		return errArity("xadd")
	}
	idText := args[i]
	fields := args[i+1:]
	if len(fields) == 0 || len(fields)%2 != 0 {
		return errArity("xadd")
	}
	var explicit streamID
	if idText != "*" {
		id, ok := parseStreamID(idText, 0)
		if !ok {
			return Error("ERR Invalid stream ID specified as stream command argument")
		}
		if id == (streamID{}) {
			return Error("ERR The ID specified in XADD must be greater than 0-0")
		}
		explicit = id
	}
	v, ok := s.getKind(args[1], kindStream)
	if !ok {
		return errWrongType
	}
	if v == nil && noMake {
		return nil
	}
	if v == nil {
		v, _ = s.writable(args[1], kindStream)
	} else {
		v = s.own(args[1], v)
	}
	st := v.stream
	id := explicit
	switch {
	case idText == "*":
		if ms := uint64(s.nowMs); ms > st.last.ms {
			id = streamID{ms, 0}
		} else if st.last.seq == math.MaxUint64 {
			return Error("ERR The stream has exhausted the last possible ID, unable to add more items")
		} else {
			id = streamID{st.last.ms, st.last.seq + 1}
		}
	case !st.last.less(id):
		return Error("ERR The ID specified in XADD is equal or smaller than the target stream top item")
	}
	st.entries = append(st.entries, streamEntry{id: id, fields: slices.Clone(fields)})
	st.last = id
	st.added++
	if trim.maxLen >= 0 {
		st.trim(trim.maxLen, trim.approx)
	}
	return id.String()
}

func cmdXLen(s *Server, args []string) any {
	st, ok := s.readStream(args[1])
	if !ok {
		return errWrongType
	}
	if st == nil {
		return int64(0)
	}
	return int64(len(st.entries))
}

// xrange is XRANGE key start end [COUNT n] and XREVRANGE key end start
// [COUNT n]: "-" and "+" for the ends, "(" for an exclusive bound, a bare
// <ms> for its first (start) or last (end) sequence.
func xrange(s *Server, args []string, rev bool) any {
	startText, endText := args[2], args[3]
	if rev {
		startText, endText = endText, startText
	}
	start, ok1 := rangeBound(startText, false)
	end, ok2 := rangeBound(endText, true)
	if !ok1 || !ok2 {
		return Error("ERR Invalid stream ID specified as stream command argument")
	}
	count := int64(-1)
	if len(args) > 4 {
		if len(args) != 6 || !strings.EqualFold(args[4], "COUNT") {
			return errSyntax
		}
		n, ok := parseInt(args[5])
		if !ok {
			return errNotInt
		}
		count = max(n, 0)
	}
	st, ok := s.readStream(args[1])
	if !ok {
		return errWrongType
	}
	out := []any{}
	if st == nil || count == 0 || end.less(start) {
		return out
	}
	lo := st.find(start)
	hi := lo
	for hi < len(st.entries) && !end.less(st.entries[hi].id) {
		hi++
	}
	sel := st.entries[lo:hi]
	if count >= 0 && int64(len(sel)) > count {
		if rev {
			sel = sel[int64(len(sel))-count:]
		} else {
			sel = sel[:count]
		}
	}
	for k := range sel {
		e := sel[k]
		if rev {
			e = sel[len(sel)-1-k]
		}
		out = append(out, entryReply(e))
	}
	return out
}

// rangeBound reads one end of an XRANGE. An exclusive bound past the last
// possible ID (or before the first) yields an empty range.
func rangeBound(s string, end bool) (streamID, bool) {
	switch s {
	case "-":
		return streamID{}, true
	case "+":
		return streamID{math.MaxUint64, math.MaxUint64}, true
	}
	exclusive := strings.HasPrefix(s, "(")
	s = strings.TrimPrefix(s, "(")
	seq := uint64(0)
	if end {
		seq = math.MaxUint64
	}
	id, ok := parseStreamID(s, seq)
	if !ok || !exclusive {
		return id, ok
	}
	switch {
	case end && id.seq > 0:
		id.seq--
	case end && id.ms > 0:
		id = streamID{id.ms - 1, math.MaxUint64}
	case end: // before 0-0: nothing; start > end does it
		return streamID{}, true
	case id.seq < math.MaxUint64:
		id.seq++
	case id.ms < math.MaxUint64:
		id = streamID{id.ms + 1, 0}
	}
	return id, true
}

func entryReply(e streamEntry) any {
	fields := make([]any, len(e.fields))
	for i, f := range e.fields {
		fields[i] = f
	}
	return []any{e.id.String(), fields}
}

func cmdXTrim(s *Server, args []string) any {
	trim, i, err := parseTrim(args, 2)
	if err != nil {
		return err
	}
	if i != len(args) || trim.maxLen < 0 {
		return errSyntax
	}
	v, ok := s.getKind(args[1], kindStream)
	if !ok {
		return errWrongType
	}
	if v == nil {
		return int64(0)
	}
	return s.own(args[1], v).stream.trim(trim.maxLen, trim.approx)
}

func cmdXDel(s *Server, args []string) any {
	v, ok := s.getKind(args[1], kindStream)
	if !ok {
		return errWrongType
	}
	ids := make([]streamID, 0, len(args)-2)
	for _, a := range args[2:] {
		id, ok := parseStreamID(a, 0)
		if !ok {
			return Error("ERR Invalid stream ID specified as stream command argument")
		}
		ids = append(ids, id)
	}
	if v == nil {
		return int64(0)
	}
	st := s.own(args[1], v).stream
	kept := make([]streamEntry, 0, len(st.entries)) // a new slice: the old one may be shared
	var n int64
	for _, e := range st.entries {
		if slices.Contains(ids, e.id) {
			n++
			if st.maxDeleted.less(e.id) {
				st.maxDeleted = e.id
			}
			continue
		}
		kept = append(kept, e)
	}
	st.entries = kept
	return n
}

// cmdXInfo is XINFO STREAM key (without FULL): what audit reads.
func cmdXInfo(s *Server, args []string) any {
	if !strings.EqualFold(args[1], "STREAM") {
		return Error("ERR simredis: only XINFO STREAM is supported")
	}
	if len(args) != 3 {
		return errSyntax
	}
	st, ok := s.readStream(args[2])
	if !ok {
		return errWrongType
	}
	if st == nil {
		return Error("ERR no such key")
	}
	var first, last any
	firstID := streamID{}
	if n := len(st.entries); n > 0 {
		first, last = entryReply(st.entries[0]), entryReply(st.entries[n-1])
		firstID = st.entries[0].id
	}
	nodes := int64((len(st.entries) + approxNode - 1) / approxNode)
	return []any{
		"length", int64(len(st.entries)),
		"radix-tree-keys", nodes,
		"radix-tree-nodes", nodes + 1,
		"last-generated-id", st.last.String(),
		"max-deleted-entry-id", st.maxDeleted.String(),
		"entries-added", int64(st.added),
		"recorded-first-entry-id", firstID.String(),
		"groups", int64(0),
		"first-entry", first,
		"last-entry", last,
	}
}
