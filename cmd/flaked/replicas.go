package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
)

// auditReplicasCommand shows, and with --set changes, the fleet's
// replicas high-water mark: how many replicas must acknowledge a grant
// before a node uses it (coord's package doc, Split brain).
func auditReplicasCommand() *cli.Command {
	return &cli.Command{
		Name:  "replicas",
		Usage: "the replicas every grant must reach before it is used: the high-water mark, and the master's replicas",
		Description: "Nodes use a claim, a reservation or a counter segment only after WAIT says the replicas\n" +
			"the fleet has had hold it, so none that a split brain could promote lacks what a node uses.\n" +
			"The scripts raise the mark to the replicas the master lists and start it again after a\n" +
			"restart or failover; it never goes down by itself. While a replica is down, grants are\n" +
			"refused (nodes issue only under what they hold): bring it back, or, when it is gone for\n" +
			"good, lower the mark with --set N (N: the replicas that remain). Exit status 1 while the\n" +
			"mark is above the replicas online.",
		Flags: append(auditFlags(),
			&cli.IntFlag{Name: "set", EnvVars: envVars("set"), Value: -1,
				Usage: "set the mark to N (>= 0): a replica was removed for good"}),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("replicas takes no arguments, got %q", c.Args().First())
			}
			if c.IsSet("set") && c.Int("set") < 0 {
				return usagef("--set %d: must be >= 0", c.Int("set"))
			}
			rdb, err := auditClient(c)
			if err != nil {
				return err
			}
			defer rdb.Close()
			ns := c.String("namespace")
			if c.IsSet("set") {
				host, _ := os.Hostname()
				prev, err := coord.SetReplicaMark(c.Context, rdb, ns, c.Int("set"), host)
				if err != nil {
					return err
				}
				zerolog.Ctx(c.Context).Info().Str("namespace", ns).Int("replicas", c.Int("set")).Int("previous", prev).
					Msg("replicas high-water mark set")
			}
			m, err := coord.SplitBrainCheck(c.Context, rdb, ns)
			if err != nil {
				return err
			}
			if err := writeReport(c, replicasReport{m, m.Problem()}, writeReplicas); err != nil {
				return err
			}
			if p := m.Problem(); p != "" {
				return fmt.Errorf("namespace %s: %s", ns, p)
			}
			return nil
		},
	}
}

type replicasReport struct {
	coord.ReplicaMark
	Problem string `json:"problem,omitempty"`
}

func writeReplicas(w io.Writer, r replicasReport) error {
	mark := fmt.Sprint(r.Mark)
	if r.Mark < 0 {
		mark = "none (no registry yet)"
	}
	list := strings.Join(r.Replicas, ", ")
	if list == "" {
		list = "none"
	}
	since := strings.Join(r.Since, ", ")
	if since == "" {
		since = "none"
	}
	_, err := fmt.Fprintf(w, "namespace %s: high-water mark %s; the master lists %d replicas, %d online: %s; listed since it took the registry over: %s\n",
		r.Namespace, mark, r.Listed, r.Online, list, since)
	return err
}
