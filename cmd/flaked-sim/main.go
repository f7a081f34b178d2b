// Command flaked-sim runs the fleet simulator (package sim): many seeded
// schedules of a simulated fleet running flaked's real code on virtual
// time, with faults, checking every ID. A failing seed replays exactly:
//
//	flaked-sim hunt --seeds 10000          # seeds 1..10000
//	flaked-sim replay 4242                 # the schedule, the shrunk one, the duplicate
//	flaked-sim replay --log 4242           # and every node's log on virtual time
package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/sim"
)

func main() {
	app := &cli.App{
		Name:  "flaked-sim",
		Usage: "hunt duplicate IDs through seeded fault schedules of a simulated fleet",
		Commands: []*cli.Command{
			{
				Name:  "hunt",
				Usage: "run the schedules of a range of seeds; exit 1 if any fails",
				Flags: []cli.Flag{
					&cli.Uint64Flag{Name: "from", Value: 1, Usage: "first seed"},
					&cli.Uint64Flag{Name: "seeds", Value: 1000, Usage: "how many seeds"},
					&cli.IntFlag{Name: "workers", Usage: "parallel runs (default: the number of CPUs)"},
					&cli.StringFlag{Name: "mutation", Usage: "re-introduce a known bug (see `flaked-sim mutations`)"},
					&cli.BoolFlag{Name: "stop-at-first", Usage: "stop at the first failing seed"},
					&cli.BoolFlag{Name: "coverage", Usage: "print the coverage table: script branches and mode transitions reached"},
					&cli.StringFlag{Name: "unreached", Usage: "fail unless every guard branch and transition is reached or listed, with why, in this `FILE` (sim/unreached.txt)"},
					&cli.BoolFlag{Name: "blocks", Usage: "every other batch is a client's block (NEXTBLOCK)"},
					&cli.BoolFlag{Name: "sequences", Usage: "add a client of one named sequence (NEXTSEQ), every value checked"},
				},
				Action: hunt,
			},
			{
				Name:      "replay",
				Usage:     "run one seed again: its schedule, the failure, the shrunk schedule",
				ArgsUsage: "SEED",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "mutation", Usage: "the mutation the seed failed under"},
					&cli.StringFlag{Name: "exposure", Usage: "the fault kind forced into the schedule (flaked-sim exposure)"},
					&cli.BoolFlag{Name: "log", Usage: "print the nodes' logs (of the shrunk schedule)"},
					&cli.BoolFlag{Name: "blocks", Usage: "the seed failed with blocks (hunt --blocks)"},
					&cli.BoolFlag{Name: "sequences", Usage: "the seed failed with sequences (hunt --sequences)"},
				},
				Action: replay,
			},
			{
				Name:  "exposure",
				Usage: "measure what each fault kind the guards do not cover costs: schedules with duplicates, duplicates per schedule",
				Flags: []cli.Flag{
					&cli.Uint64Flag{Name: "from", Value: 1, Usage: "first seed"},
					&cli.Uint64Flag{Name: "seeds", Value: 200, Usage: "how many seeds per kind"},
					&cli.IntFlag{Name: "workers", Usage: "parallel runs (default: the number of CPUs)"},
					&cli.StringSliceFlag{Name: "kind", Usage: "the fault kinds (default: every uncovered one; also: " + strings.Join(sim.Exposable, ", ") + ")"},
				},
				Action: exposure,
			},
			{
				Name:  "mutations",
				Usage: "list the bugs the simulator can re-introduce",
				Action: func(*cli.Context) error {
					for _, m := range sim.Mutations {
						fmt.Printf("%-26s %s\n", m.Name, m.Bug)
					}
					return nil
				},
			},
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "flaked-sim:", err)
		os.Exit(2)
	}
}

func hunt(c *cli.Context) error {
	off, err := enable(c.String("mutation"))
	if err != nil {
		return err
	}
	defer off()
	o := sim.HuntOptions{
		From: c.Uint64("from"), Count: c.Uint64("seeds"), Workers: c.Int("workers"),
		Run:         sim.Options{Mutation: c.String("mutation"), Blocks: c.Bool("blocks"), Sequences: c.Bool("sequences")},
		StopAtFirst: c.Bool("stop-at-first"),
	}
	// A terminal gets a line that updates every second; a log (CI) one line
	// a minute.
	tty := isatty.IsTerminal(os.Stderr.Fd())
	var last time.Duration
	o.Progress = func(s sim.Summary) {
		if !tty && s.Elapsed-last < time.Minute {
			return
		}
		last = s.Elapsed
		end := "\n"
		if tty {
			end = "   \r"
		}
		fmt.Fprintf(os.Stderr, "%d schedules, %d failing, %.0f/min%s", s.Schedules, len(s.Failures),
			float64(s.Schedules)/s.Elapsed.Minutes(), end)
	}
	if m, err := sim.FindMutation(o.Run.Mutation); err == nil && m.Switch != "" {
		o.Workers = 1 // a Go mutation is a global switch
	}
	s := sim.Hunt(o)
	fmt.Fprintln(os.Stderr)
	printSummary(s)
	if c.Bool("coverage") {
		fmt.Println("coverage (count, branch or transition, source line; ! never reached):")
		sim.PrintCoverage(os.Stdout, s.Coverage)
	}
	// Failing seeds are printed before the coverage verdict: a failing
	// run must name its seeds whatever else it finds.
	if len(s.Failures) > 0 {
		for _, f := range s.Failures {
			fmt.Println("FAIL", f)
		}
		blocks := ""
		if o.Run.Blocks {
			blocks = "--blocks "
		}
		if o.Run.Sequences {
			blocks += "--sequences "
		}
		fmt.Printf("replay: flaked-sim replay %s%s%d\n", blocks, mutationFlag(o.Run.Mutation), s.Failures[0].Schedule.Seed)
	}
	if path := c.String("unreached"); path != "" {
		problems, err := sim.CheckCoverage(s.Coverage, path)
		if err != nil {
			return err
		}
		failed := false
		for _, p := range problems {
			fmt.Println("COVERAGE", p)
			failed = failed || !strings.HasPrefix(p, "listed in")
		}
		if failed {
			return cli.Exit("coverage: guard branches not reached by these seeds; reach them (a schedule pattern) or list them with the reason", 1)
		}
	}
	if len(s.Failures) > 0 {
		return cli.Exit("", 1)
	}
	return nil
}

func printSummary(s sim.Summary) {
	fmt.Printf("schedules:      %d\n", s.Schedules)
	fmt.Printf("simulated time: %.1f h\n", s.Virtual.Hours())
	fmt.Printf("IDs checked:    %d\n", s.IDs)
	if s.SeqValues > 0 {
		fmt.Printf("seq values:     %d checked, %d operator restores\n", s.SeqValues, s.SeqRestores)
	}
	fmt.Printf("failing seeds:  %d\n", len(s.Failures))
	fmt.Printf("strays refused: %d (another layout; %d more started in counter mode, refused at their first segment)\n",
		s.StraysRefused, s.StraysStarted)
	fmt.Printf("no registry:    %d starts refused (NOREGISTRY), retried\n", s.NoRegistry)
	fmt.Printf("wall time:      %v (%.0f schedules/min)\n", s.Elapsed.Round(time.Second), float64(s.Schedules)/s.Elapsed.Minutes())
	kinds := make([]string, 0, len(s.Faults))
	total := 0
	for k, v := range s.Faults {
		kinds = append(kinds, k)
		total += v
	}
	sort.Strings(kinds)
	fmt.Printf("faults:         %d\n", total)
	for _, k := range kinds {
		fmt.Printf("  %-20s %d\n", k, s.Faults[k])
	}
}

func replay(c *cli.Context) error {
	seed, err := strconv.ParseUint(c.Args().First(), 10, 64)
	if err != nil {
		return fmt.Errorf("replay: want a seed, got %q", c.Args().First())
	}
	off, err := enable(c.String("mutation"))
	if err != nil {
		return err
	}
	defer off()
	o := sim.Options{Mutation: c.String("mutation"), Blocks: c.Bool("blocks"), Sequences: c.Bool("sequences")}
	s := sim.NewSchedule(seed)
	if k := c.String("exposure"); k != "" {
		s = s.WithExposure(k)
	}
	fmt.Print(s)
	res := sim.Run(s, o)
	fmt.Printf("%d IDs in %v simulated\n", res.IDs, res.Virtual.Round(time.Millisecond))
	if res.Failure == nil {
		fmt.Println("no failure")
		return nil
	}
	fmt.Println("FAIL", res.Failure)
	small, sres := sim.Shrink(s, o)
	fmt.Printf("\nshrunk to %d of %d faults:\n%s", len(small.Faults), len(s.Faults), small)
	fmt.Println("FAIL", sres.Failure)
	if c.Bool("log") {
		o.Log = zerolog.ConsoleWriter{Out: os.Stdout, NoColor: true}
		sim.Run(small, o)
	}
	return cli.Exit("", 1)
}

// exposure runs each fault kind's schedules and prints what they cost.
func exposure(c *cli.Context) error {
	kinds := c.StringSlice("kind")
	if len(kinds) == 0 {
		kinds = sim.Uncovered
	}
	for _, k := range kinds {
		if !slices.Contains(sim.Exposable, k) {
			return fmt.Errorf("exposure: no fault kind %q; known: %s", k, strings.Join(sim.Exposable, ", "))
		}
	}
	fmt.Printf("%-24s %9s %9s %10s %11s %9s  %s\n", "fault kind", "covered", "schedules", "with dups", "violations", "per sched", "first failing seed")
	for _, k := range kinds {
		s := sim.Exposure(k, sim.HuntOptions{From: c.Uint64("from"), Count: c.Uint64("seeds"), Workers: c.Int("workers")})
		first := "-"
		if len(s.Failures) > 0 {
			min := s.Failures[0]
			for _, f := range s.Failures {
				if f.Schedule.Seed < min.Schedule.Seed {
					min = f
				}
			}
			first = fmt.Sprintf("flaked-sim replay --exposure %s %d", k, min.Schedule.Seed)
		}
		covered := "yes"
		if sim.IsUncovered(k) {
			covered = "no"
		}
		fmt.Printf("%-24s %9s %9d %10d %11d %9.1f  %s\n", k, covered, s.Schedules, len(s.Failures), s.Violations,
			float64(s.Violations)/float64(max(s.Schedules, 1)), first)
	}
	return nil
}

func enable(name string) (func(), error) {
	if name == "" {
		return func() {}, nil
	}
	m, err := sim.FindMutation(name)
	if err != nil {
		return nil, err
	}
	return m.Enable()
}

func mutationFlag(m string) string {
	if m == "" {
		return ""
	}
	return "--mutation " + m + " "
}
