package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flaked/flaked/node"
)

// stats are the server's counters: plain atomics on the request path, read
// by INFO and by the Prometheus collector when scraped.
type stats struct {
	idsFlake   atomic.Uint64
	_          [56]byte // the ID counters are written by every NEXTID; keep them off the others' line
	idsCounter atomic.Uint64
	_          [56]byte

	nextIDErrors   atomic.Uint64
	unknown        atomic.Uint64 // unknown commands
	protocolErrors atomic.Uint64
	conns          atomic.Int64 // open now
	connsTotal     atomic.Uint64
	rejected       atomic.Uint64 // turned away at MaxConns
	handOffs       atomic.Uint64 // connections an event loop handed to a goroutine
	readopts       atomic.Uint64 // handed-off connections that went back to a loop
}

func (st *stats) issued(counter bool, n uint64) {
	if n == 0 {
		return
	}
	if counter {
		st.idsCounter.Add(n)
	} else {
		st.idsFlake.Add(n)
	}
}

// commandsProcessed is the number of requests run, unknown ones included.
func (s *Server) commandsProcessed() uint64 {
	n := s.stats.unknown.Load()
	for _, cmd := range s.cmds {
		n += cmd.calls.Load()
	}
	return n
}

// collector exposes a Server's stats and its generator's mode and
// readiness to Prometheus.
type collector struct {
	s                                                 *Server
	ids, errs, conns, connsTotal, rejected, protoErrs *prometheus.Desc
	commands, mode, ready                             *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &collector{
		s:          s,
		ids:        d("flaked_ids_issued_total", "IDs delivered to clients, by the mode they were issued in.", "mode"),
		errs:       d("flaked_nextid_errors_total", "NEXTID and NEXTIDS requests the generator could not serve."),
		conns:      d("flaked_connections", "Open client connections."),
		connsTotal: d("flaked_connections_total", "Client connections accepted."),
		rejected:   d("flaked_connections_rejected_total", "Client connections turned away at the connection limit."),
		protoErrs:  d("flaked_protocol_errors_total", "Connections closed for breaking the protocol or a request limit."),
		commands:   d("flaked_commands_total", "Requests run, by command (\"unknown\" for unknown commands).", "command"),
		mode:       d("flaked_mode", "1 for the mode the node issues IDs in now, 0 for the others.", "mode"),
		ready:      d("flaked_ready", "1 when the node can issue IDs."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ids, c.errs, c.conns, c.connsTotal, c.rejected, c.protoErrs, c.commands, c.mode, c.ready} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s, st := c.s, &c.s.stats
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.ids, st.idsFlake.Load(), node.ModeFlake.String())
	counter(c.ids, st.idsCounter.Load(), node.ModeCounter.String())
	counter(c.errs, st.nextIDErrors.Load())
	gauge(c.conns, float64(st.conns.Load()))
	counter(c.connsTotal, st.connsTotal.Load())
	counter(c.rejected, st.rejected.Load())
	counter(c.protoErrs, st.protocolErrors.Load())
	for _, cmd := range s.sortedCommands() {
		counter(c.commands, cmd.calls.Load(), cmd.name)
	}
	counter(c.commands, st.unknown.Load(), "unknown")
	mode := s.gen.Mode()
	for _, m := range []node.Mode{node.ModeFlake, node.ModeCounter} {
		gauge(c.mode, float64(btoi(mode == m)), m.String())
	}
	gauge(c.ready, float64(btoi(s.gen.Ready())))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
