package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flaked/flaked/node"
)

// alarmCollector exports what the alert rules (deploy/prometheus) need
// beyond the node's INFO gauges: the node's alarm counts, which stay up
// after it recovered by itself, the mode it was configured with (counter
// mode is an alarm only where it was not asked for), and when the
// layout's time bits run out.
type alarmCollector struct {
	n                                                   *node.Node
	lost, fenced, losses, clones, configured, layoutEnd *prometheus.Desc
}

func newAlarmCollector(n *node.Node) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &alarmCollector{n: n,
		lost:       d("flaked_node_leases_lost_total", "Leases the node lost (expired while cut off from Redis, taken over, fenced, or refused after Redis lost writes)."),
		fenced:     d("flaked_node_leases_fenced_total", "Leases taken over by a process started from a copy of this node's state file."),
		losses:     d("flaked_node_data_losses_total", "Claims that found Redis had lost the registry or may have lost writes (restart without persistence, failover)."),
		clones:     d("flaked_node_clones_total", "Claims that found the state file's machine ID held by a live process with the same state-file node ID."),
		configured: d("flaked_mode_configured", "1 for the mode the node was started with (--mode: flake, counter or auto), 0 for the others.", "mode"),
		layoutEnd: d("flaked_layout_end_timestamp_seconds",
			"When the layout's time bits run out (Unix seconds): no flake ID can be issued after it."),
	}
}

func (c *alarmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lost, c.fenced, c.losses, c.clones, c.configured, c.layoutEnd} {
		ch <- d
	}
}

func (c *alarmCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.n.Alarms()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.lost, a.LeasesLost}, {c.fenced, a.LeasesFenced}, {c.losses, a.DataLosses}, {c.clones, a.Clones}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	for _, m := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		v := 0.0
		if c.n.ConfiguredMode() == m {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.configured, prometheus.GaugeValue, v, m.String())
	}
	end := c.n.Layout().End()
	ch <- prometheus.MustNewConstMetric(c.layoutEnd, prometheus.GaugeValue, float64(end.UnixMilli())/1000)
}
