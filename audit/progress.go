package audit

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// ReadOptions tune ReadWith.
type ReadOptions struct {
	// Progress receives a line ("read 30,000/65,535 machine IDs,
	// 40,000/100,000 events...") now
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

// progress counts what one read has read and writes the lines. Its
// methods are safe for the two goroutines of a read (machine IDs and
// events); a nil *progress counts nothing.
type progress struct {
	w     io.Writer
	after time.Duration
	now   func() time.Time
	start time.Time

	mu              sync.Mutex
	last            time.Time // of the last line; zero before the first
	ids, idsTotal   int       // idsTotal 0: still listing
	events, evTotal int
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

// listed counts machine IDs found by the listing so far.
func (p *progress) listed(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = n
	p.line(func() string { return fmt.Sprintf("listed %s machine IDs...", group(n)) })
}

// total starts the reading: ids machine IDs and events events to read,
// the first chunk of IDs read.
func (p *progress) total(ids, firstChunk, events int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids, p.idsTotal, p.evTotal = firstChunk, ids, events
}

// read counts ids machine IDs and events events more.
func (p *progress) read(ids, events int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids += ids
	p.events += events
	p.line(func() string {
		return fmt.Sprintf("read %s/%s machine IDs, %s/%s events...", group(p.ids), group(p.idsTotal), group(p.events), group(p.evTotal))
	})
}

// line writes text() once the read has run for p.after, and no line
// was written within p.after. p.mu is held.
func (p *progress) line(text func() string) {
	t := p.now()
	if t.Sub(p.start) < p.after || (!p.last.IsZero() && t.Sub(p.last) < p.after) {
		return
	}
	p.last = t
	fmt.Fprintln(p.w, text())
}
