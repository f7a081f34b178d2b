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

type streamEntry struct {
	id     streamID
	fields []string // field, value, ...
}

// stream is a Redis stream, which flaked's scripts only append to (the
// event stream: XADD with MAXLEN ~). Entries are never changed once
// added, and trimming reslices from the front, so copies of a stream
// share the entries' backing array: clone is O(1), and the first XADD
// after it copies the slice once.
type stream struct {
	entries []streamEntry
	last    streamID // the last ID added, kept when entries are trimmed
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
func (st *stream) trim(maxLen int64, approx bool) {
	excess := int64(len(st.entries)) - maxLen
	if approx {
		excess -= excess % approxNode
	}
	if excess > 0 {
		st.entries = st.entries[excess:]
	}
}

// approxNode is stream-node-max-entries's default.
const approxNode = 100

var streamCommands = []*command{
	{name: "xadd", arity: -5, run: cmdXAdd},
}

// cmdXAdd is XADD key [MAXLEN [= | ~] n] * field value [field value ...],
// what flaked's scripts send. The ID is <server ms>-0, or the last ID's
// ms with the next sequence when the clock has not moved past it (Redis's
// rule, which keeps IDs increasing when the clock steps back). Other
// forms (an explicit ID, NOMKSTREAM, LIMIT, MINID) are refused, naming
// what is missing: the simulator sends none.
func cmdXAdd(s *Server, args []string) any {
	i, maxLen, approx := 2, int64(-1), false
	if strings.EqualFold(args[i], "MAXLEN") {
		i++
		if args[i] == "~" || args[i] == "=" {
			approx = args[i] == "~"
			i++
		}
		if i >= len(args) {
			return errSyntax
		}
		n, ok := parseInt(args[i])
		if !ok {
			return errNotInt
		}
		if n < 0 {
			return Error("ERR The MAXLEN argument must be >= 0.")
		}
		maxLen = n
		i++
	}
	if i >= len(args) {
		return errArity("xadd")
	}
	if args[i] != "*" {
		return Error("ERR simredis: XADD takes MAXLEN and the ID * only (what flaked sends), not " + args[i])
	}
	fields := args[i+1:]
	if len(fields) == 0 || len(fields)%2 != 0 {
		return errArity("xadd")
	}
	v, ok := s.getKind(args[1], kindStream)
	if !ok {
		return errWrongType
	}
	if v == nil {
		v, _ = s.writable(args[1], kindStream)
	} else {
		v = s.own(args[1], v)
	}
	st := v.stream
	var id streamID
	if ms := uint64(s.nowMs); ms > st.last.ms {
		id = streamID{ms, 0}
	} else if st.last.seq == math.MaxUint64 {
		return Error("ERR The stream has exhausted the last possible ID, unable to add more items")
	} else {
		id = streamID{st.last.ms, st.last.seq + 1}
	}
	st.entries = append(st.entries, streamEntry{id: id, fields: slices.Clone(fields)})
	st.last = id
	if maxLen >= 0 {
		st.trim(maxLen, approx)
	}
	return id.String()
}
