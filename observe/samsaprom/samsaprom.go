// Package samsaprom exports a samsa producer's metrics to Prometheus: a
// prometheus.Collector over Producer.Metrics, with one series per
// producer-wide metric, per topic and per broker.
//
//	reg.MustRegister(samsaprom.NewCollector(p))
//
// Names are the Java producer's metric names with '-' as '_', after the
// namespace and subsystem (default "samsa" and "producer") and, for topic
// and broker metrics, "topic_" or "broker_": record-send-total becomes
// samsa_producer_record_send_total and, per topic,
// samsa_producer_topic_record_send_total{topic="..."}. Durations are in
// seconds, and their names say so before any "_total"
// (samsa_producer_request_latency_avg_seconds,
// samsa_producer_bufferpool_wait_time_seconds_total). Broker series carry
// node_id and address labels. With Config.Spool, Metrics.Spool's values
// are producer-wide series named spool_... (samsa_producer_spool_bytes,
// samsa_producer_spool_oldest_record_age_seconds,
// samsa_producer_spool_fsync_latency_p99_seconds); without a spool they
// are absent.
//
// Per-topic series are capped (WithMaxTopics, default 100): the first topics
// the collector sees keep their series for good, so their counters stay
// monotonic, and the others are left out and counted in
// samsa_producer_topics_dropped.
//
// Each scrape takes one Producer.Metrics snapshot; the collector adds no
// hook, so Send pays nothing for it.
//
// The package is its own Go module, so that the samsa library does not
// depend on client_golang.
package samsaprom

import (
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/samsa-go/samsa/producer"
)

// Source is what the collector reads: *producer.Producer.
type Source interface {
	Metrics() producer.Metrics
}

// Option configures NewCollector.
type Option func(*options)

type options struct {
	namespace, subsystem string
	maxTopics            int
	constLabels          prometheus.Labels
}

// WithNamespace sets the metric names' namespace. Default "samsa".
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithSubsystem sets the metric names' subsystem. Default "producer".
func WithSubsystem(s string) Option { return func(o *options) { o.subsystem = s } }

// WithMaxTopics caps the topics that get per-topic series. Default 100; 0
// exports no per-topic series; a negative n removes the cap.
func WithMaxTopics(n int) Option { return func(o *options) { o.maxTopics = n } }

// WithConstLabels adds labels to every series, for example to tell several
// producers of one process apart (register one collector per producer).
func WithConstLabels(l prometheus.Labels) Option { return func(o *options) { o.constLabels = l } }

type descKey struct {
	scope producer.MetricScope
	name  string
}

// Collector is a prometheus.Collector over a Source's metrics. It is safe
// for concurrent scrapes; each scrape takes one snapshot.
type Collector struct {
	src       Source
	maxTopics int
	descs     map[descKey]*prometheus.Desc
	kinds     map[descKey]prometheus.ValueType
	dropped   *prometheus.Desc

	mu       sync.Mutex
	admitted map[string]bool // topics with series
}

// NewCollector returns a collector over src's metrics.
func NewCollector(src Source, opts ...Option) *Collector {
	o := options{namespace: "samsa", subsystem: "producer", maxTopics: 100}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Collector{
		src:       src,
		maxTopics: o.maxTopics,
		descs:     map[descKey]*prometheus.Desc{},
		kinds:     map[descKey]prometheus.ValueType{},
		admitted:  map[string]bool{},
	}
	for _, in := range producer.MetricInfos() {
		k := descKey{in.Scope, in.Name}
		var labels []string
		switch in.Scope {
		case producer.ScopeTopic:
			labels = []string{"topic"}
		case producer.ScopeBroker:
			labels = []string{"node_id", "address"}
		}
		c.descs[k] = prometheus.NewDesc(prometheus.BuildFQName(o.namespace, o.subsystem, MetricName(in)), in.Help, labels, o.constLabels)
		c.kinds[k] = prometheus.GaugeValue
		if in.Kind == producer.MetricCounter {
			c.kinds[k] = prometheus.CounterValue
		}
	}
	c.dropped = prometheus.NewDesc(prometheus.BuildFQName(o.namespace, o.subsystem, "topics_dropped"),
		"Topics left without per-topic series by the cardinality cap.", nil, o.constLabels)
	return c
}

// MetricName returns the name a metric gets after the namespace and
// subsystem: the Java name with '_' for '-', "topic_" or "broker_" in
// front for those scopes, and "_seconds" for durations (before a trailing
// "_total").
func MetricName(in producer.MetricInfo) string {
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
	return name
}

// Describe sends every series' description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.dropped
}

// Collect takes a snapshot of the source's metrics and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	dropped := c.admit(m.Topics)
	m.Each(func(in *producer.MetricInfo, l producer.Labels, v float64) {
		k := descKey{in.Scope, in.Name}
		var labels []string
		switch in.Scope {
		case producer.ScopeTopic:
			if !c.isAdmitted(l.Topic) {
				return
			}
			labels = []string{l.Topic}
		case producer.ScopeBroker:
			labels = []string{strconv.Itoa(int(l.NodeID)), l.Addr}
		}
		ch <- prometheus.MustNewConstMetric(c.descs[k], c.kinds[k], v, labels...)
	})
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.GaugeValue, float64(dropped))
}

// admit gives series to topics while the cap allows, first come first
// served, and returns how many topics of ts have none.
func (c *Collector) admit(ts []producer.TopicMetrics) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	dropped := 0
	for _, t := range ts {
		if c.admitted[t.Topic] {
			continue
		}
		if c.maxTopics >= 0 && len(c.admitted) >= c.maxTopics {
			dropped++
			continue
		}
		c.admitted[t.Topic] = true
	}
	return dropped
}

func (c *Collector) isAdmitted(topic string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admitted[topic]
}
