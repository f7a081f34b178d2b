package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/seq"
)

// Sequencer is a generator that also hands out named sequences
// (node.Node). Options.Generator is a node.Generator, which has no
// sequences; /v1/seq answers 501 when it is not also a Sequencer.
type Sequencer interface {
	// NextSeq fills dst with strictly increasing values of tag and returns
	// how many it filled (len(dst) unless err is set).
	NextSeq(ctx context.Context, tag string, dst []int64) (int, error)
}

var _ Sequencer = (*node.Node)(nil)

// seqBody is /v1/seq/{tag}'s answer. Values are below 2^53
// (seq.MaxValue), so unlike IDs they are JSON integers: every JSON
// reader, JavaScript's included, reads them exactly.
type seqBody struct {
	Tag    string  `json:"tag"`
	Values []int64 `json:"values"`
}

// seq answers n values of the named sequence tag: n optional (1), in
// 1..MaxBatch like /v1/ids. All or nothing: when the sequence fails part
// way the answer is the error, and the values taken are skipped (a gap),
// never handed out again, as NEXTSEQ does.
func (a *api) seq(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tag")
	q := r.URL.Query()
	n := 1
	if _, ok := q["n"]; ok {
		var err error
		n, err = strconv.Atoi(q.Get("n"))
		if err != nil || n < 1 || n > a.o.MaxBatch || len(q["n"]) != 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n=%q: want at most one n, an integer in 1..%d (default 1)", q.Get("n"), a.o.MaxBatch))
			return
		}
	}
	if err := contract.CheckTag(name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sq, ok := a.o.Generator.(Sequencer)
	if !ok {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("this generator (%T) has no named sequences: they need a flaked node (node.Node) on Redis", a.o.Generator))
		return
	}
	ctx, cancel := a.issueContext(r)
	defer cancel()
	dst := make([]int64, n)
	if _, err := sq.NextSeq(ctx, name, dst); err != nil {
		// Values taken before the error are skipped, not reused (see
		// above), and not counted: the metric counts values answered.
		a.seqError(w, err)
		return
	}
	a.seqIssued.Add(float64(n))
	writeJSON(w, http.StatusOK, seqBody{Tag: name, Values: dst})
}

// seqError maps the sequence's errors to a status; the message is the
// error, which names the tag, the cause and the fix.
//
//   - 404: the tag does not exist (create it with flaked seq create).
//   - 409: the tag handed out its maximum; retrying cannot help.
//   - 501: a standalone node: its embedded store starts empty at each
//     start, so a tag would start over. A setting of the daemon, not a
//     passing state (start it with --redis), hence 501 without
//     Retry-After, as for a generator without sequences.
//   - 503 with Retry-After: no value can be handed out safely now: Redis
//     away, a segment not acknowledged by the replicas, the tag blocked
//     after a data loss (until flaked seq restore), the node closing.
//     Anything else too: fail closed.
func (a *api) seqError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, seq.ErrUnknownTag):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, seq.ErrMaxReached):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, node.ErrSeqStandalone):
		writeError(w, http.StatusNotImplemented, err.Error())
	default:
		a.issueError(w, err)
	}
}
