package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "print what a layout can do: IDs/s, machine IDs, regions, when its time bits run out and when IDs pass 2^53",
		Description: "Takes serve's layout flags. With --rate (IDs/s wanted) it says how many machine IDs that takes,\n" +
			"and with --nodes how many each node leases (--machine-ids). The figures are flake.Layout's.",
		Flags: append(layoutFlags(),
			&cli.Float64Flag{Name: "rate", EnvVars: commandEnvVars("plan", "rate"), Usage: "IDs per second the fleet (one region) must issue, >= 0"},
			intFlag("nodes", 0, 0, 1<<30, "nodes that share --rate (0: not planned)"),
			&cli.BoolFlag{Name: "json", EnvVars: envVars("json"), Usage: "print one JSON object"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("plan takes no arguments, got %d", c.NArg())
			}
			l, err := layoutFromFlags(c)
			if err != nil {
				return err
			}
			rate := c.Float64("rate")
			if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
				return usagef("--rate %v: want IDs per second, >= 0", rate)
			}
			p := planOf(l, rate, c.Int("nodes"), time.Now())
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(p)
			}
			return writePlan(c.App.Writer, p)
		},
	}
}

// plan is what `flaked plan` prints. Every figure is a method of
// flake.Layout: the generator and counter tests hold those to what the
// code issues.
type plan struct {
	Layout              string     `json:"layout"`
	BitsID              int        `json:"bits_id"`
	BitsTime            int        `json:"bits_time"`
	IDsPerSecond        float64    `json:"ids_per_second_per_machine_id"`
	MachineIDs          int        `json:"machine_ids"` // leasable, in one region
	Regions             int        `json:"regions"`
	MachineIDsPerRegion int        `json:"machine_ids_per_region"`
	Region              int        `json:"region"`
	RegionFirst         int        `json:"region_first_machine_id"`
	RegionLast          int        `json:"region_last_machine_id"` // the last leasable one
	CounterMachineID    int        `json:"counter_machine_id"`
	FleetIDsPerSecond   float64    `json:"fleet_ids_per_second"` // one region, flake mode
	CounterIDsPerSecond float64    `json:"counter_ids_per_second"`
	TimeBitsEnd         time.Time  `json:"time_bits_end"`
	TimeBitsEnded       bool       `json:"time_bits_ended"`
	YearsLeft           float64    `json:"years_left"`           // until the time bits run out; < 0 once they have
	Above2to53          *time.Time `json:"above_2_53,omitempty"` // nil: never
	JSSafe              bool       `json:"js_safe"`
	Rate                float64    `json:"rate,omitempty"`
	MachineIDsForRate   int        `json:"machine_ids_for_rate,omitempty"`
	Nodes               int        `json:"nodes,omitempty"`
	MachineIDsPerNode   int        `json:"machine_ids_per_node,omitempty"`
	Fits                *bool      `json:"fits,omitempty"` // the rate (and nodes) fit the region
}

func planOf(l flake.Layout, rate float64, nodes int, now time.Time) plan {
	p := plan{Layout: l.String(), BitsID: l.BitsID(), BitsTime: l.BitsTime, IDsPerSecond: l.IDsPerSecond(),
		MachineIDs: l.LeasableMachineIDs(), Regions: l.Regions(), MachineIDsPerRegion: l.MachineIDsPerRegion(),
		Region: l.Region, RegionFirst: l.MinMachineID(), RegionLast: l.MaxMachineID(), CounterMachineID: l.CounterMachineID(),
		FleetIDsPerSecond: l.FleetIDsPerSecond(), CounterIDsPerSecond: l.CounterIDsPerSecond(), TimeBitsEnd: l.End()}
	p.TimeBitsEnded = !now.Before(p.TimeBitsEnd)
	p.YearsLeft = math.Round(float64(p.TimeBitsEnd.Unix()-now.Unix())/(365.25*24*3600)*10) / 10
	if at, ok := l.SafeIntegerEnd(); ok {
		p.Above2to53 = &at
	}
	p.JSSafe = p.Above2to53 == nil
	if rate > 0 {
		p.Rate, p.MachineIDsForRate = rate, l.MachineIDsFor(rate)
		fits := p.MachineIDsForRate <= p.MachineIDs
		if nodes > 0 {
			p.Nodes, p.MachineIDsPerNode = nodes, l.MachineIDsFor(rate/float64(nodes))
			fits = p.MachineIDsPerNode <= node.MaxMachineIDs && nodes*p.MachineIDsPerNode <= p.MachineIDs
		}
		p.Fits = &fits
	}
	return p
}

func writePlan(w io.Writer, p plan) error {
	var b strings.Builder
	line := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-22s %s\n", k+":", fmt.Sprintf(format, a...)) }
	line("layout", "%s (%d-bit IDs, %d time bits)", p.Layout, p.BitsID, p.BitsTime)
	line("IDs/s per machine ID", "%s", group(p.IDsPerSecond))
	line("machine IDs", "%s leasable of %s (the last is counter mode's)", group(float64(p.MachineIDs)), group(float64(p.MachineIDsPerRegion)))
	if p.Regions > 1 {
		line("regions", "%d of %s machine IDs each; region %d leases %d..%d, its counter is %d",
			p.Regions, group(float64(p.MachineIDsPerRegion)), p.Region, p.RegionFirst, p.RegionLast, p.CounterMachineID)
	}
	line("fleet capacity", "%s IDs/s in flake mode%s", group(p.FleetIDsPerSecond), perRegion(p))
	line("counter mode", "%s IDs/s%s, shared by every node in counter mode", group(p.CounterIDsPerSecond), perRegion(p))
	if p.TimeBitsEnded {
		line("time bits ran out", "%s (serve refuses this epoch)", p.TimeBitsEnd.Format(time.RFC3339Nano))
	} else {
		line("time bits run out", "%s (%.1f years from now)", p.TimeBitsEnd.Format(time.RFC3339Nano), p.YearsLeft)
	}
	if p.Above2to53 != nil {
		line("IDs pass 2^53", "%s (JavaScript numbers round IDs from then; a 53-bit layout never passes it: --bits-id 53 --bits-sequence 8 --bits-machine 8)", p.Above2to53.Format(time.RFC3339Nano))
	} else {
		line("IDs pass 2^53", "never (every ID is below 2^53: JavaScript-safe)")
	}
	if p.Fits != nil {
		fit := ""
		if !*p.Fits {
			fit = fmt.Sprintf(": does NOT fit (%s leasable machine IDs)", group(float64(p.MachineIDs)))
			if p.Nodes > 0 {
				fit = fmt.Sprintf(": does NOT fit (%s leasable machine IDs, at most %d per node)", group(float64(p.MachineIDs)), node.MaxMachineIDs)
			}
		}
		line("rate wanted", "%s IDs/s needs %d machine IDs%s", group(p.Rate), p.MachineIDsForRate, fit)
		if p.Nodes > 0 {
			line("per node", "%d nodes: --machine-ids %d each (%d in all)", p.Nodes, p.MachineIDsPerNode, p.Nodes*p.MachineIDsPerNode)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func perRegion(p plan) string {
	if p.Regions > 1 {
		return " per region"
	}
	return ""
}

// group prints a rate with thousands separators, to the unit (IDs/s of a
// tick that does not divide a second have a fraction, rounded down).
func group(v float64) string {
	s := strconv.FormatInt(int64(v), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
