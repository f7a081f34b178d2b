package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/seq"
)

// seqCommand manages named sequences (NEXTSEQ's tags).
func seqCommand() *cli.Command {
	return &cli.Command{
		Name:  "seq",
		Usage: "named sequences (NEXTSEQ tag): list, show, create, restore",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "every tag: settings, high-water mark, values given back (free) and lost",
				Flags: auditFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usagef("list takes no arguments, got %q", c.Args().First())
					}
					return withSeqClient(c, func(rdb redis.UniversalClient) error {
						tags, err := seq.List(c.Context, rdb, c.String("namespace"))
						if err != nil {
							return err
						}
						return writeReport(c, tags, writeSeqTable)
					})
				},
			},
			{
				Name:      "show",
				Usage:     "one tag, as list shows it",
				ArgsUsage: "<tag>",
				Flags:     auditFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("want one tag, got %d arguments", c.NArg())
					}
					return withSeqClient(c, func(rdb redis.UniversalClient) error {
						ti, err := seq.Info(c.Context, rdb, c.String("namespace"), c.Args().First())
						if err != nil {
							return err
						}
						if ti.Missing {
							return fmt.Errorf("%w %s in namespace %s", seq.ErrUnknownTag, ti.Tag, c.String("namespace"))
						}
						return writeReport(c, []seq.TagInfo{ti}, writeSeqTable)
					})
				},
			},
			{
				Name:      "create",
				Usage:     "create a tag; its settings are fixed from then on",
				ArgsUsage: "<tag>",
				Flags:     append(auditFlags(), seqOptionFlags()...),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("want one tag, got %d arguments", c.NArg())
					}
					return withSeqs(c, func(s *seq.Sequences) error {
						if err := s.Create(c.Context, c.Args().First(), seqOptions(c)); err != nil {
							return err
						}
						_, err := fmt.Fprintf(c.App.Writer, "created %s\n", c.Args().First())
						return err
					})
				},
			},
			{
				Name:      "restore",
				Usage:     "resume a tag after a Redis data loss, above a value your records hold",
				ArgsUsage: "<tag>",
				Description: "NEXTSEQ refuses a tag it cannot continue safely: Redis lost the tag while nodes had\n" +
					"taken values of it, or a loss would make it jump further than its --max-jump. --above N\n" +
					"must be at or above every value the tag ever handed out (your own records: the last order\n" +
					"number stored, ...): the tag continues at N+1. A missing tag is created with the options.\n" +
					"After a restore, save Redis (BGSAVE) so that a later restart from an older copy does not\n" +
					"bring back the state before it.",
				Flags: append(append(auditFlags(), &cli.Int64Flag{Name: "above", EnvVars: envVars("above"), Required: true,
					Usage: "the highest value the tag may have handed out"}), seqOptionFlags()...),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("want one tag, got %d arguments", c.NArg())
					}
					return withSeqs(c, func(s *seq.Sequences) error {
						high, err := s.Restore(c.Context, c.Args().First(), c.Int64("above"), seqOptions(c))
						if err != nil {
							return err
						}
						_, err = fmt.Fprintf(c.App.Writer, "restored %s: continues after %d\n", c.Args().First(), high)
						return err
					})
				},
			},
		},
	}
}

func seqOptionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Int64Flag{Name: "start", EnvVars: envVars("start"), Usage: "the first value (default 1)"},
		&cli.Int64Flag{Name: "step", EnvVars: envVars("step"), Usage: "the smallest segment a node takes (default 1000; more under load); a crash skips up to two segments"},
		&cli.Int64Flag{Name: "max", EnvVars: envVars("max"), Usage: "the last value handed out (default none: 2^53-1)"},
		&cli.Int64Flag{Name: "rate", EnvVars: commandEnvVars("seq", "rate"), Usage: "values per second the tag may hand out, fleet-wide (default 1000000): a Redis data loss skips about rate x (the surviving copy's age + 1 s)"},
		&cli.Int64Flag{Name: "burst", EnvVars: envVars("burst"), Usage: "values handed out at once above the rate (default max(rate, 2 x step))"},
		&cli.Int64Flag{Name: "max-jump", EnvVars: envVars("max-jump"), Usage: "block the tag instead of skipping more than this after a loss (default 0: no limit)"},
	}
}

func seqOptions(c *cli.Context) seq.TagOptions {
	return seq.TagOptions{Start: c.Int64("start"), Step: c.Int64("step"), Max: c.Int64("max"),
		Rate: c.Int64("rate"), Burst: c.Int64("burst"), MaxJump: c.Int64("max-jump")}
}

func withSeqClient(c *cli.Context, f func(redis.UniversalClient) error) error {
	rdb, err := auditClient(c)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return f(rdb)
}

func withSeqs(c *cli.Context, f func(*seq.Sequences) error) error {
	return withSeqClient(c, func(rdb redis.UniversalClient) error {
		s, err := seq.New(rdb, seq.Options{Namespace: c.String("namespace")})
		if err != nil {
			return usageError{err}
		}
		defer s.Close(context.WithoutCancel(c.Context))
		return f(s)
	})
}

// writeSeqTable prints tags as a table.
func writeSeqTable(w io.Writer, tags []seq.TagInfo) error {
	if len(tags) == 0 {
		_, err := fmt.Fprintln(w, "no sequence tags")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tSTART\tSTEP\tMAX\tRATE/S\tHIGH\tFREE\tGIVEN BACK\tLOST\tJUMPS\tSTATE")
	for _, t := range tags {
		mx := "-"
		if t.Max > 0 {
			mx = fmt.Sprint(t.Max)
		}
		state := "ok"
		switch {
		case t.Missing && !t.MissingSince.IsZero():
			state = "missing since " + t.MissingSince.Format(time.RFC3339) + " (lost, evicted or deleted): flaked seq restore from " +
				t.RestoreFrom().Format(time.RFC3339)
		case t.Missing:
			state = "missing (Redis lost it? flaked seq restore)"
		case t.Blocked != "":
			state = "blocked: " + t.Blocked
		case t.Max > 0 && t.High >= t.Max && t.FreeCount == 0:
			state = "at max"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Tag, t.Start, t.Step, mx, t.Rate,
			t.High, t.FreeCount, t.GivenBack, t.Lost, t.Jumps, state)
	}
	return tw.Flush()
}

// writeAuditSeqs adds the namespace's sequence tags under the audit table
// (text only; flaked seq list --json has them as JSON).
func writeAuditSeqs(c *cli.Context) error {
	return withSeqClient(c, func(rdb redis.UniversalClient) error {
		tags, err := seq.List(c.Context, rdb, c.String("namespace"))
		if err != nil || len(tags) == 0 {
			return err
		}
		fmt.Fprintf(c.App.Writer, "\nsequence tags (%d):\n", len(tags))
		return writeSeqTable(c.App.Writer, tags)
	})
}
