package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/coord"
)

// auditFlags are the flags of every audit command and whois: where the
// registry is, and --json.
func auditFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"),
			Usage: "the fleet's Redis URL: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]"},
		&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
			Usage: "the fleet's namespace (keys {ns}:...)"},
		&cli.BoolFlag{Name: "json", EnvVars: envVars("json"), Usage: "print JSON instead of text"},
	}
}

// writeReport prints v as JSON with --json, else as text.
func writeReport[T any](c *cli.Context, v T, text func(io.Writer, T) error) error {
	if c.Bool("json") {
		return audit.WriteJSON(c.App.Writer, v)
	}
	return text(c.App.Writer, v)
}

// auditSnapshot connects to --redis and reads --namespace.
func auditSnapshot(c *cli.Context) (*audit.Snapshot, error) {
	batchGC()
	rdb, err := auditClient(c)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	// A read that takes over a second (a large registry) says how far it
	// got on stderr, which --json leaves clean for the report.
	s, err := audit.ReadWith(c.Context, rdb, c.String("namespace"), audit.ReadOptions{Progress: c.App.ErrWriter})
	if err != nil {
		return nil, err
	}
	zerolog.Ctx(c.Context).Debug().Str("namespace", s.Namespace).Int("machine_ids", len(s.Records)).
		Int("events", len(s.Events)).Bool("history_complete", s.Stream.Complete).Msg("registry read")
	return s, nil
}

// batchGC collects garbage less often for an audit command: nearly all it
// allocates is the snapshot, held until the command exits, so each
// collection while it reads marks the whole growing snapshot and frees
// little. At GOGC 200 an audit of 60,000 machine IDs and 100,000 events
// took about 25% less CPU for about 10% more peak memory (BENCHMARKS.md,
// Scale). A GOGC set by the operator wins.
func batchGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
}

func auditClient(c *cli.Context) (redis.UniversalClient, error) {
	url := c.String("redis")
	if url == "" {
		return nil, usagef("--redis (or FLAKED_REDIS) is required: the fleet's Redis URL, such as redis://127.0.0.1:6379")
	}
	if err := checkNamespace(c.String("namespace")); err != nil {
		return nil, err
	}
	return redisClient(url)
}

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "table of every registered machine ID: state, owner, lease, reservation",
		Description: "States: live (leased), expired (the owner stopped renewing: crashed, killed or cut off),\n" +
			"released (stopped cleanly), orphan (registered without owner data), conflict (inconsistent:\n" +
			"the lines under the table say why). Times are UTC; ages are measured by Redis TIME. The\n" +
			"header names the last possible data loss (a Redis restart or failover, or the registry made\n" +
			"anew) when it was within a day.",
		Flags: append(auditFlags(),
			&cli.StringFlag{Name: "state", EnvVars: envVars("state"),
				Usage: "show only these states, comma-separated: live, expired, released, orphan, conflict"}),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown subcommand %q: want history, verify, prune or replicas", c.Args().First())
			}
			var states []audit.State
			if s := c.String("state"); s != "" {
				var err error
				if states, err = audit.ParseStates(s); err != nil {
					return usageError{fmt.Errorf("--state: %w", err)}
				}
			}
			s, err := auditSnapshot(c)
			if err != nil {
				return err
			}
			rep := audit.Build(s)
			rep.Only(states)
			if err := writeReport(c, rep, audit.WriteTable); err != nil || c.Bool("json") {
				return err
			}
			return writeAuditSeqs(c)
		},
		Subcommands: []*cli.Command{auditHistoryCommand(), auditVerifyCommand(), auditPruneCommand(), auditReplicasCommand()},
	}
}

func auditHistoryCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "the events of one machine ID and the registry's possible data losses, oldest first, with their owners",
		ArgsUsage: "<machine-id>",
		Flags:     auditFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("want one machine ID, got %d arguments", c.NArg())
			}
			mid, err := strconv.Atoi(c.Args().First())
			if err != nil || mid < 0 {
				return usagef("machine ID %q: want a non-negative integer", c.Args().First())
			}
			s, err := auditSnapshot(c)
			if err != nil {
				return err
			}
			if l := s.Layout; l.BitsTime != 0 && (mid < l.MinMachineID() || mid > l.CounterMachineID()) {
				return usagef("machine ID %d: the fleet's layout has machine IDs %d..%d (%d is counter mode's)", mid, l.MinMachineID(), l.CounterMachineID(), l.CounterMachineID())
			}
			return writeReport(c, audit.HistoryOf(s, mid), audit.WriteHistory)
		},
	}
}

// verifyResult is what audit verify --json prints.
type verifyResult struct {
	Namespace  string          `json:"namespace"`
	Consistent bool            `json:"consistent"`
	Summary    audit.Summary   `json:"summary"`
	Findings   []audit.Finding `json:"findings"`
}

func auditVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "check the registry's consistency: exit status 0 only when consistent, 1 otherwise",
		Description: "Checks: a lease whose machine ID is not registered, a lease without owner data or with\n" +
			"another token, a lease without expiry, a live lease without a reservation, a reservation\n" +
			"below a tick already used under its ID (from the events), machine IDs registered while\n" +
			"{ns}:layout or {ns}:meta is missing, machine IDs outside the layout or leasing the counter's,\n" +
			"live leases of two or more processes started from copies of one state file (clone: the same\n" +
			"state-file node ID under different tokens; one line per node ID, naming every process).\n" +
			"Each finding is one line.",
		Flags: auditFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("verify takes no arguments, got %q", c.Args().First())
			}
			s, err := auditSnapshot(c)
			if err != nil {
				return err
			}
			rep := audit.Build(s)
			w := c.App.Writer
			if c.Bool("json") {
				err = audit.WriteJSON(w, verifyResult{Namespace: rep.Namespace, Consistent: rep.Consistent(), Summary: rep.Summary, Findings: rep.Findings})
			} else if rep.Consistent() {
				_, err = fmt.Fprintf(w, "consistent: namespace %s, %d machine IDs, %d events checked\n", rep.Namespace, rep.Summary.Listed, len(s.Events))
			} else {
				for _, f := range rep.Findings {
					if _, err = fmt.Fprintln(w, f.String()); err != nil {
						break
					}
				}
			}
			if err != nil {
				return err
			}
			if n := len(rep.Findings); n == 1 {
				return fmt.Errorf("1 inconsistency in namespace %s", rep.Namespace)
			} else if n > 1 {
				return fmt.Errorf("%d inconsistencies in namespace %s", n, rep.Namespace)
			}
			return nil
		},
	}
}

func auditPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "forget released, expired and orphan machine IDs whose reservation is older than --older-than",
		Description: "Removes such IDs from {ns}:machines and deletes their owner data, writing a prune event\n" +
			"for each. Never touches a live lease, an ID in conflict, or any reservation: the reservation\n" +
			"is what makes the next owner of the ID start above every tick already used.",
		Flags: append(auditFlags(),
			&cli.DurationFlag{Name: "older-than", EnvVars: envVars("older-than"),
				Usage: "forget IDs whose reservation ended longer ago than this (> 0), such as 720h"},
			&cli.BoolFlag{Name: "dry-run", EnvVars: envVars("dry-run"), Usage: "say what would be forgotten; change nothing"}),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("prune takes no arguments, got %q", c.Args().First())
			}
			older := c.Duration("older-than")
			if !c.IsSet("older-than") {
				return usagef("--older-than (or FLAKED_OLDER_THAN) is required, such as --older-than 720h")
			}
			if older <= 0 {
				return usagef("--older-than %v: must be > 0", older)
			}
			batchGC()
			rdb, err := auditClient(c)
			if err != nil {
				return err
			}
			defer rdb.Close()
			res, err := audit.Prune(c.Context, rdb, c.String("namespace"), audit.PruneOptions{OlderThan: older, DryRun: c.Bool("dry-run"),
				Progress: c.App.ErrWriter})
			if err != nil {
				return err
			}
			zerolog.Ctx(c.Context).Info().Str("namespace", res.Namespace).Bool("dry_run", res.DryRun).
				Int("pruned", len(res.Pruned)).Int("kept", len(res.Kept)).Dur("older_than", older).Msg("prune")
			return writeReport(c, res, audit.WritePrune)
		},
	}
}

func whoisCommand() *cli.Command {
	return &cli.Command{
		Name:      "whois",
		Usage:     "decode an ID and name the owner that issued it, from the event history",
		ArgsUsage: "<id>",
		Description: "The ID is decoded under the fleet's layout ({ns}:layout). The owner of a machine ID at a\n" +
			"tick is the one whose claim's floor is the last below that tick. Exit status 1 when no owner\n" +
			"can be named (the answer says why, e.g. the history does not reach back far enough).",
		Flags: auditFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("want one ID, got %d arguments", c.NArg())
			}
			id, err := parseIDArg(c.Args().First())
			if err != nil {
				return usageError{err}
			}
			s, err := auditSnapshot(c)
			if err != nil {
				return err
			}
			w, err := audit.WhoIs(s, id)
			if err != nil {
				return err
			}
			if err := writeReport(c, w, audit.WriteWhois); err != nil {
				return err
			}
			if !w.Known {
				return fmt.Errorf("no owner found for ID %s", w.ID)
			}
			return nil
		},
	}
}
