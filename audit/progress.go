package audit

import (
	"fmt"
	"io"
	"time"
)

// ReadOptions tune ReadWith.
type ReadOptions struct {
	// Progress receives a line ("read 30,000/65,535 machine IDs...") now
	// and then once a read has taken longer than ProgressAfter, so an
	// operator auditing a large registry sees it is not stuck. nil: none.
	Progress io.Writer
	// ProgressAfter is how long a read runs before its first line, and
	// the least time between two lines. Default 1 s.
	ProgressAfter time.Duration
	// Now is the clock the progress lines are timed by (default
	// time.Now); tests inject one.
	Now func() time.Time
}

// progress writes the lines of one read. A nil *progress writes nothing.
type progress struct {
	w     io.Writer
	after time.Duration
	now   func() time.Time
	start time.Time
	last  time.Time // of the last line; zero before the first
}

func (o ReadOptions) progress() *progress {
	if o.Progress == nil {
		return nil
	}
	p := &progress{w: o.Progress, after: o.ProgressAfter, now: o.Now}
	if p.after <= 0 {
		p.after = time.Second
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.start = p.now()
	return p
}

// report writes "read <done>/<total> <what>..." when the read has run for
// p.after and no line was written within p.after; total < 0 is unknown.
func (p *progress) report(done, total int, what string) {
	if p == nil {
		return
	}
	t := p.now()
	if t.Sub(p.start) < p.after || (!p.last.IsZero() && t.Sub(p.last) < p.after) {
		return
	}
	p.last = t
	if total < 0 {
		fmt.Fprintf(p.w, "read %s %s...\n", group(done), what)
		return
	}
	fmt.Fprintf(p.w, "read %s/%s %s...\n", group(done), group(total), what)
}
