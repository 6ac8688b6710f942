package samsaprom

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/samsa-go/samsa/producer"
)

// fakeSource returns the snapshot it holds, as Producer.Metrics will.
type fakeSource struct {
	mu sync.Mutex
	m  producer.Metrics
}

func (f *fakeSource) Metrics() producer.Metrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m
}

func (f *fakeSource) set(m producer.Metrics) {
	f.mu.Lock()
	f.m = m
	f.mu.Unlock()
}

func scrape(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v\n%s", resp.StatusCode, err, body)
	}
	return string(body)
}

func sample() producer.Metrics {
	return producer.Metrics{
		Producer: producer.ProducerMetrics{
			RecordSendTotal:         42,
			RequestLatencyAvg:       1500 * time.Microsecond,
			BufferPoolWaitTimeTotal: 2 * time.Second,
			BufferAvailableBytes:    1 << 20,
		},
		Topics: []producer.TopicMetrics{
			{Topic: "a", RecordSendTotal: 40, CompressionRate: 0.5},
			{Topic: "b", RecordSendTotal: 2, CompressionRate: 1},
		},
		Brokers: []producer.BrokerMetrics{{NodeID: 3, Addr: "k3:9092", RequestTotal: 7}},
		Spool: &producer.SpoolMetrics{
			Bytes: 1 << 20, Records: 12, OldestRecordAge: 1500 * time.Millisecond,
			ReplayTotal: 5, FsyncTotal: 9, FsyncTimeTotal: 3 * time.Second, FsyncLatencyP99: 2 * time.Millisecond,
		},
	}
}

func TestCollectorScrape(t *testing.T) {
	src := &fakeSource{m: sample()}
	out := scrape(t, NewCollector(src, WithConstLabels(prometheus.Labels{"client_id": "c1"})))
	for _, want := range []string{
		"# TYPE samsa_producer_record_send_total counter",
		`samsa_producer_record_send_total{client_id="c1"} 42`,
		"# TYPE samsa_producer_request_latency_avg_seconds gauge",
		`samsa_producer_request_latency_avg_seconds{client_id="c1"} 0.0015`,
		`samsa_producer_bufferpool_wait_time_seconds_total{client_id="c1"} 2`,
		`samsa_producer_buffer_available_bytes{client_id="c1"} 1.048576e+06`,
		`samsa_producer_topic_record_send_total{client_id="c1",topic="a"} 40`,
		`samsa_producer_topic_compression_rate{client_id="c1",topic="a"} 0.5`,
		`samsa_producer_broker_request_total{address="k3:9092",client_id="c1",node_id="3"} 7`,
		`samsa_producer_topics_dropped{client_id="c1"} 0`,
		"# TYPE samsa_producer_spool_bytes gauge",
		`samsa_producer_spool_bytes{client_id="c1"} 1.048576e+06`,
		`samsa_producer_spool_records{client_id="c1"} 12`,
		`samsa_producer_spool_oldest_record_age_seconds{client_id="c1"} 1.5`,
		"# TYPE samsa_producer_spool_replay_total counter",
		`samsa_producer_spool_replay_total{client_id="c1"} 5`,
		`samsa_producer_spool_fsync_total{client_id="c1"} 9`,
		`samsa_producer_spool_fsync_time_seconds_total{client_id="c1"} 3`,
		`samsa_producer_spool_fsync_latency_p99_seconds{client_id="c1"} 0.002`,
		`samsa_producer_spool_failed{client_id="c1"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// TestCollectorNoSpool: a producer without a spool has no spool series.
func TestCollectorNoSpool(t *testing.T) {
	m := sample()
	m.Spool = nil
	out := scrape(t, NewCollector(&fakeSource{m: m}))
	if !strings.Contains(out, "samsa_producer_record_send_total 42\n") {
		t.Errorf("scrape lacks the producer's series:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "samsa_producer_spool_") {
			t.Errorf("spool series without a spool: %s", line)
		}
	}
}

func TestCollectorNamespaceAndTopicCap(t *testing.T) {
	src := &fakeSource{m: sample()}
	c := NewCollector(src, WithNamespace("app"), WithSubsystem("kafka"), WithMaxTopics(1))
	out := scrape(t, c)
	for _, want := range []string{
		`app_kafka_record_send_total 42`,
		`app_kafka_topic_record_send_total{topic="a"} 40`,
		`app_kafka_topics_dropped 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `topic="b"`) {
		t.Errorf("topic over the cap exported:\n%s", out)
	}

	// A topic admitted first keeps its series when one sorting before it
	// appears: the cap is first come, first served, so counters stay whole.
	m := sample()
	m.Topics = append([]producer.TopicMetrics{{Topic: "0-new", RecordSendTotal: 1}}, m.Topics...)
	src.set(m)
	out = scrape(t, c)
	if !strings.Contains(out, `app_kafka_topic_record_send_total{topic="a"} 40`) || strings.Contains(out, `topic="0-new"`) ||
		!strings.Contains(out, "app_kafka_topics_dropped 2\n") {
		t.Errorf("cap is not stable:\n%s", out)
	}
}

func TestCollectorNoTopics(t *testing.T) {
	out := scrape(t, NewCollector(&fakeSource{m: sample()}, WithMaxTopics(0)))
	if strings.Contains(out, "topic=") || !strings.Contains(out, "samsa_producer_topics_dropped 2\n") {
		t.Errorf("per-topic series with a cap of 0:\n%s", out)
	}
	out = scrape(t, NewCollector(&fakeSource{m: sample()}, WithMaxTopics(-1)))
	if !strings.Contains(out, `topic="b"`) {
		t.Errorf("no cap dropped topics:\n%s", out)
	}
}

func TestMetricName(t *testing.T) {
	cases := []struct {
		in   producer.MetricInfo
		want string
	}{
		{producer.MetricInfo{Name: "record-send-total", Unit: "records"}, "record_send_total"},
		{producer.MetricInfo{Name: "request-latency-max", Unit: "seconds"}, "request_latency_max_seconds"},
		{producer.MetricInfo{Name: "bufferpool-wait-time-total", Unit: "seconds"}, "bufferpool_wait_time_seconds_total"},
		{producer.MetricInfo{Name: "byte-total", Unit: "bytes", Scope: producer.ScopeTopic}, "topic_byte_total"},
		{producer.MetricInfo{Name: "spool-fsync-time-total", Unit: "seconds"}, "spool_fsync_time_seconds_total"},
		{producer.MetricInfo{Name: "spool-oldest-record-age", Unit: "seconds"}, "spool_oldest_record_age_seconds"},
		{producer.MetricInfo{Name: "connection-count", Unit: "connections", Scope: producer.ScopeBroker}, "broker_connection_count"},
	}
	for _, tc := range cases {
		if got := MetricName(tc.in); got != tc.want {
			t.Errorf("MetricName(%s) = %s, want %s", tc.in.Name, got, tc.want)
		}
	}
}
