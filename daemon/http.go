package daemon

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// startHTTP serves /metrics, /healthz and /readyz on MetricsAddr, and
// with PProf Go's /debug/pprof/ too.
func startHTTP(o Options, srv *server.Server, n *node.Node, watch *redisWatch, reg *prometheus.Registry) (*http.Server, error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newNodeCollector(n), newAlarmCollector(n))
	if watch != nil {
		reg.MustRegister(watch) // flaked_redis_unsafe{check}
	} else {
		reg.MustRegister(standaloneStore{})
	}
	h, err := server.NewHTTPHandler(srv, reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", o.MetricsAddr, err)
	}
	if o.PProf {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		h = mux
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return hs, nil
}

// nodeCollector exposes the node's numeric INFO fields as gauges
// flaked_node_<key> (lease renewals and failures, reservation headroom,
// NextID waits, mode switches, counter segments ...).
type nodeCollector struct {
	n *node.Node
}

func newNodeCollector(n *node.Node) prometheus.Collector { return nodeCollector{n} }

func (nodeCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: keys depend on the mode

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, kv := range c.n.Info() {
		v, err := strconv.ParseFloat(kv[1], 64)
		if err != nil || strings.HasPrefix(kv[0], "tick_") || kv[0] == "machine_ids" {
			continue
		}
		d := prometheus.NewDesc("flaked_node_"+kv[0], "node INFO field "+kv[0], nil, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
}
