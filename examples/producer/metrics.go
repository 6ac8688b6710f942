package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/producer"
)

// The -metrics-addr server: Producer.Metrics in Prometheus' text format,
// written by hand. The example is part of samsa's own module, which must
// not require client_golang (only observe/samsaprom does), so it cannot
// use samsaprom's collector; the names are the ones samsaprom exports
// (samsa_producer_<java name>, "_seconds" for durations, "topic_" and
// "broker_" for those scopes), so dashboards work with either.

// metricsServer serves /metrics until stop.
type metricsServer struct {
	srv  *http.Server
	done chan error
	addr string // the address it listens on (":0" resolved)
}

// serveMetrics listens on addr and serves p's metrics at /metrics.
func serveMetrics(addr string, p *producer.Producer) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m := p.Metrics()
		bw := bufio.NewWriter(w)
		writeExposition(bw, &m)
		_ = bw.Flush()
	})
	s := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan error, 1),
		addr: ln.Addr().String(),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// stop closes the server and waits for it.
func (s *metricsServer) stop() {
	_ = s.srv.Close()
	<-s.done // http.ErrServerClosed: the run is over either way
}

// promName is samsaprom's name for in, with the samsa_producer_ prefix.
func promName(in *producer.MetricInfo) string {
	name := strings.ReplaceAll(in.Name, "-", "_")
	if in.Unit == "seconds" {
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			name = base + "_seconds_total"
		} else {
			name += "_seconds"
		}
	}
	switch in.Scope {
	case producer.ScopeTopic:
		name = "topic_" + name
	case producer.ScopeBroker:
		name = "broker_" + name
	}
	return "samsa_producer_" + name
}

// writeExposition writes m in the text exposition format: each metric's
// HELP and TYPE once, then its samples (Each visits a topic's metrics
// together, so samples are grouped by name first).
func writeExposition(w *bufio.Writer, m *producer.Metrics) {
	type family struct {
		info    *producer.MetricInfo
		samples []string
	}
	var order []string
	families := map[string]*family{}
	m.Each(func(info *producer.MetricInfo, l producer.Labels, v float64) {
		name := promName(info)
		f := families[name]
		if f == nil {
			f = &family{info: info}
			families[name] = f
			order = append(order, name)
		}
		var labels string
		switch info.Scope {
		case producer.ScopeTopic:
			labels = fmt.Sprintf("{topic=%s}", strconv.Quote(l.Topic))
		case producer.ScopeBroker:
			labels = fmt.Sprintf("{address=%s,node_id=\"%d\"}", strconv.Quote(l.Addr), l.NodeID)
		}
		f.samples = append(f.samples, name+labels+" "+strconv.FormatFloat(v, 'g', -1, 64))
	})
	for _, name := range order {
		f := families[name]
		kind := "gauge"
		if f.info.Kind == producer.MetricCounter {
			kind = "counter"
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, f.info.Help, name, kind)
		for _, s := range f.samples {
			w.WriteString(s)
			w.WriteByte('\n')
		}
	}
}
