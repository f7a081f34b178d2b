// Command benchtable turns the output of the bench/ module's benchmarks
// (go test -bench -benchmem, any -count) into Markdown tables of medians:
// ns/ID, allocs/op and the ratio to sonyflake v2 in the same mode, then
// checks flaked's goals against them.
//
//	go test -run '^$' -bench . -benchmem -count 5 . | tee out.txt
//	go run ./cmd/benchtable out.txt
//
// With no argument it reads standard input.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Names of the benchmarks the goals are about; see core_test.go.
const (
	reference = "sonyflake-v2" // ratios are to this sibling
	goalRatio = 0.2
)

// labels are readable names of the last element of a benchmark's name.
var labels = map[string]string{
	"flaked":            "flaked",
	"flaked-4machines":  "flaked, 4 machine IDs interleaved",
	"flaked-NextIDs100": "flaked NextIDs, batch of 100 (per ID)",
	"sonyflake-v2":      "sonyflake v2",
	"bwmarrin":          "bwmarrin/snowflake",
	"sonyflake-v1-fixed-default-layout-sleeps": "sonyflake v1: fixed default layout (sleeps when the sequence runs out)",
}

// modes are readable names of a benchmark's group.
var modes = map[string]string{
	"Core/single":   "single goroutine",
	"Core/parallel": "RunParallel",
	"DefaultLayout": "default layout 39/8/16, 10 ms",
}

type result struct {
	name    string               // without "Benchmark" and the -GOMAXPROCS suffix
	metrics map[string][]float64 // unit -> one value per count
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) ([]*result, error) {
	var order []*result
	byName := map[string]*result{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		res := byName[name]
		if res == nil {
			res = &result{name: name, metrics: map[string][]float64{}}
			byName[name] = res
			order = append(order, res)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %v", f[0], f[i], err)
			}
			res.metrics[f[i+1]] = append(res.metrics[f[i+1]], v)
		}
	}
	return order, sc.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// nsPerID is ns/ID where the benchmark reports it (batches), else ns/op.
func (r *result) nsPerID() []float64 {
	if v, ok := r.metrics["ns/ID"]; ok {
		return v
	}
	return r.metrics["ns/op"]
}

func split(name string) (group, last string) {
	i := strings.LastIndex(name, "/")
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

func label(last string) string {
	if l, ok := labels[last]; ok {
		return l
	}
	return last
}

func mode(group string) string {
	if m, ok := modes[group]; ok {
		return m
	}
	return group
}

func excluded(last string) bool { return strings.HasPrefix(last, "sonyflake-v1") }

// num formats a value with 3 significant digits or more, with thousands
// separators.
func num(v float64) string {
	var s string
	switch {
	case v >= 100 || v == math.Trunc(v):
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	}
	intPart, frac, _ := strings.Cut(s, ".")
	for i := len(intPart) - 3; i > 0; i -= 3 {
		intPart = intPart[:i] + "," + intPart[i:]
	}
	if frac != "" {
		return intPart + "." + frac
	}
	return intPart
}

func run(in io.Reader, out io.Writer) error {
	results, err := parse(in)
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no benchmark results in the input")
	}
	byName := map[string]*result{}
	var groups []string
	for _, r := range results {
		byName[r.name] = r
		if g, _ := split(r.name); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	counts := len(results[0].nsPerID())

	fmt.Fprintf(out, "Medians of %d counts; ratio = ns/ID over sonyflake v2's in the same mode of the same run.\n\n", counts)
	fmt.Fprintln(out, "| mode | benchmark | ns/ID | min..max | allocs/op | ratio to sonyflake v2 |")
	fmt.Fprintln(out, "|---|---|---:|---:|---:|---:|")
	var rateGroups []string
	for _, g := range groups {
		var rows []*result
		for _, r := range results {
			if rg, _ := split(r.name); rg == g {
				rows = append(rows, r)
			}
		}
		if _, ok := rows[0].metrics["IDs/s"]; ok {
			rateGroups = append(rateGroups, g)
			continue
		}
		ref := byName[g+"/"+reference]
		for _, r := range rows {
			_, last := split(r.name)
			ns := r.nsPerID()
			ratio := "-"
			switch {
			case excluded(last):
				ratio = "excluded (sleeps)"
			case ref != nil:
				ratio = fmt.Sprintf("%.3fx", median(ns)/median(ref.nsPerID()))
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s..%s | %s | %s |\n", mode(g), label(last),
				num(median(ns)), num(slices.Min(ns)), num(slices.Max(ns)), num(median(r.metrics["allocs/op"])), ratio)
		}
	}
	for _, g := range rateGroups {
		fmt.Fprintf(out, "\nSustained rate, %s (one goroutine; burst = IDs issued ahead of the clock before the first wait):\n\n", mode(g))
		fmt.Fprintln(out, "| benchmark | IDs/s | min..max | burst IDs | allocs/op |")
		fmt.Fprintln(out, "|---|---:|---:|---:|---:|")
		for _, r := range results {
			rg, last := split(r.name)
			if rg != g {
				continue
			}
			rate, burst := r.metrics["IDs/s"], "-"
			if b, ok := r.metrics["burst-IDs"]; ok {
				burst = num(median(b))
			}
			fmt.Fprintf(out, "| %s | %s | %s..%s | %s | %s |\n", label(last), num(median(rate)),
				num(slices.Min(rate)), num(slices.Max(rate)), burst, num(median(r.metrics["allocs/op"])))
		}
	}

	fmt.Fprintln(out, "\nGoals:")
	for _, m := range []string{"single", "parallel"} {
		ours, ref := byName["Core/"+m+"/flaked"], byName["Core/"+m+"/"+reference]
		if ours == nil || ref == nil {
			continue
		}
		o, s := median(ours.nsPerID()), median(ref.nsPerID())
		fmt.Fprintf(out, "- %s: flaked ns/ID <= %.1fx sonyflake v2's: %s (%s / %s ns = %.3fx)\n",
			mode("Core/"+m), goalRatio, verdict(o/s <= goalRatio), num(o), num(s), o/s)
	}
	var allocating []string
	for _, r := range results {
		_, last := split(r.name)
		if strings.HasPrefix(last, "flaked") && median(r.metrics["allocs/op"]) != 0 {
			allocating = append(allocating, r.name)
		}
	}
	if len(allocating) == 0 {
		fmt.Fprintln(out, "- zero allocations in every flaked benchmark: met")
	} else {
		fmt.Fprintf(out, "- zero allocations in every flaked benchmark: NOT met (%s)\n", strings.Join(allocating, ", "))
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	if err := run(in, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}
