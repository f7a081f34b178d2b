package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WriteTable writes the report as an aligned table, a summary line and
// the findings, one a line. Times are UTC.
func WriteTable(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "namespace %s  layout %s  at %s UTC (Redis TIME)%s\n", r.Namespace, orDash(r.Layout), fmtTimeMs(r.Now), lossNote(r))
	if len(r.Machines) > 0 {
		rows := make([][]string, 0, len(r.Machines)+1)
		rows = append(rows, []string{"MID", "STATE", "HOST", "PID", "ADDR", "VERSION", "MODE", "TTL", "HEARTBEAT", "RESERVED",
			"RESERVED AT", "FIRST CLAIM", "LAST CLAIM"})
		for _, m := range r.Machines {
			rows = append(rows, tableRow(m))
		}
		writeAligned(ew, rows)
	}
	fmt.Fprintln(ew, summaryLine(r))
	for _, f := range r.Findings {
		fmt.Fprintln(ew, f.String())
	}
	return ew.err
}

// tableRow is one machine's cells.
func tableRow(m Machine) []string {
	host, pid, addr, version := "-", "-", "-", "-"
	if o := m.Owner; o != nil {
		host, addr, version = orDash(o.Host), orDash(o.Addr), orDash(o.Version)
		if o.PID != 0 {
			pid = strconv.Itoa(o.PID)
		}
	}
	ttl := "-"
	if m.LeaseTTLMs != nil {
		ttl = "never"
		if *m.LeaseTTLMs >= 0 {
			ttl = fmtDuration(time.Duration(*m.LeaseTTLMs) * time.Millisecond)
		}
	}
	hb := "-"
	if m.HeartbeatAgeMs != nil {
		hb = fmtAge(time.Duration(*m.HeartbeatAgeMs) * time.Millisecond)
	}
	reserved, reservedAt := "-", "-"
	if m.ReservedTick != nil {
		reserved = strconv.FormatInt(*m.ReservedTick, 10)
	}
	if m.ReservedTime != nil {
		reservedAt = fmtTimeMs(*m.ReservedTime)
	}
	return []string{strconv.Itoa(m.MachineID), string(m.State), host, pid, addr, version, orDash(m.Mode), ttl, hb,
		reserved, reservedAt, fmtTimePtr(m.FirstClaim), fmtTimePtr(m.LastClaim)}
}

// writeAligned writes rows as text/tabwriter does with padding 2 and
// blanks (every column but the last as wide as its widest cell plus two),
// without tabwriter's cost per cell: a table of 60,000 machine IDs took a
// third of the audit's time in it.
func writeAligned(w io.Writer, rows [][]string) {
	var width []int
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	// Buffered: one write per 64 KiB, not per row, to an unbuffered
	// stdout.
	b := bufio.NewWriterSize(w, 64<<10)
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			b.WriteString(c)
			for range width[i] - utf8.RuneCountInString(c) + 2 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(row[len(row)-1])
		b.WriteByte('\n')
	}
	b.Flush()
}

// recentLoss is how long a possible data loss is named in the table's
// header: long enough to explain claims that waited out a loss floor, or
// IDs that went missing, the day it happened.
const recentLoss = 24 * time.Hour

// lossNote is "  last possible data loss <when> (<age>: <cause>)" when
// Redis may have lost writes within recentLoss of its TIME, else "".
func lossNote(r *Report) string {
	d := r.DataLoss
	if d == nil || !d.At.After(r.Now.Add(-recentLoss)) {
		return ""
	}
	cause := "Redis restarted or failed over"
	if d.Cause == LossCreated {
		cause = "registry created: a new fleet, or Redis lost everything"
	}
	return fmt.Sprintf("  last possible data loss %s (%s: %s)", fmtTimeMs(d.At), fmtAge(r.Now.Sub(d.At)), cause)
}

// summaryLine is "4 machine IDs: 1 live, ...; 3 of 5 leasable IDs free, 1
// never used".
func summaryLine(r *Report) string {
	s := r.Summary
	var counts []string
	for _, st := range States {
		counts = append(counts, fmt.Sprintf("%d %s", s.Counts[st], st))
	}
	line := fmt.Sprintf("%s %s: %s", group(s.Listed), plural(s.Listed, "machine ID", "machine IDs"), strings.Join(counts, ", "))
	if s.Leasable > 0 {
		line += fmt.Sprintf("; %s of %s leasable IDs free (no lease), %s never used", group(s.Free), group(s.Leasable), group(s.NeverUsed))
	} else {
		line += "; IDs left unknown (no layout)"
	}
	if s.Pruned > 0 {
		line += fmt.Sprintf(", %s pruned (reservation kept)", group(s.Pruned))
	}
	if len(r.Filter) > 0 {
		line += fmt.Sprintf("; showing %d (%s)", len(r.Machines), joinStates(r.Filter))
	}
	if len(r.Findings) > 0 {
		line += fmt.Sprintf("; %d %s:", len(r.Findings), plural(len(r.Findings), "inconsistency", "inconsistencies"))
	}
	return line
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fmtTimeMs is "2006-01-02 15:04:05.000" in UTC.
func fmtTimeMs(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") }

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// fmtDuration is short and readable: 850ms, 8.5s, 4m10s, 3h5m, 12d3h.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(float64(d/(100*time.Millisecond))/10, 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

// fmtAge is how long ago: "1.2s ago"; a time ahead of now (a clock off
// Redis TIME) reads "in 1.2s".
func fmtAge(d time.Duration) string {
	if d < 0 {
		return "in " + fmtDuration(-d)
	}
	return fmtDuration(d) + " ago"
}

// group writes n with thousands separators: 65,535.
func group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// errWriter keeps the first write error, so the writers above can print
// freely and check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
