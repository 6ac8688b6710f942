package samsaprom

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// liveProducer starts a cluster with topic "t" and a producer on it.
func liveProducer(tb testing.TB) *producer.Producer {
	tb.Helper()
	cluster := samsatest.Start(tb, samsatest.Config{Brokers: 1, Topics: map[string]int32{"t": 2}})
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// value returns the sample of series in a scrape (the whole line before
// the value, labels included).
func value(t *testing.T, out, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("scrape lacks %s", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCollectorOnLiveProducer scrapes a real producer over HTTP after a
// known workload.
func TestCollectorOnLiveProducer(t *testing.T) {
	p := liveProducer(t)
	ctx := context.Background()
	const n = 250
	for i := range n {
		p.Send(ctx, &producer.Record{Topic: "t", Value: fmt.Appendf(nil, "record %d", i)})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, NewCollector(p, WithConstLabels(prometheus.Labels{"client_id": "live"})))
	for series, want := range map[string]float64{
		`samsa_producer_record_send_total{client_id="live"}`:                 n,
		`samsa_producer_record_error_total{client_id="live"}`:                0,
		`samsa_producer_topic_record_send_total{client_id="live",topic="t"}`: n,
		`samsa_producer_requests_in_flight{client_id="live"}`:                0,
		`samsa_producer_connection_count{client_id="live"}`:                  1,
		`samsa_producer_parked_records{client_id="live"}`:                    0,
	} {
		if got := value(t, out, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if total, avail := value(t, out, `samsa_producer_buffer_total_bytes{client_id="live"}`), value(t, out, `samsa_producer_buffer_available_bytes{client_id="live"}`); total == 0 || total != avail {
		t.Errorf("buffer available %v of %v after Flush", avail, total)
	}
	for _, series := range []string{
		`samsa_producer_request_latency_avg_seconds{client_id="live"}`,
		`samsa_producer_request_latency_p99_seconds{client_id="live"}`,
		`samsa_producer_batch_size_avg{client_id="live"}`,
		`samsa_producer_metadata_age_seconds{client_id="live"}`,
		`samsa_producer_outgoing_byte_total{client_id="live"}`,
	} {
		if v := value(t, out, series); v <= 0 {
			t.Errorf("%s = %v, want > 0", series, v)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// BenchmarkSendWithCollector is the producer's BenchmarkSend/callback with
// the collector registered and scraped every 100 ms meanwhile: the
// collector adds no hook, so Send pays only for the scrapes' snapshots.
func BenchmarkSendWithCollector(b *testing.B) {
	p := liveProducer(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(p))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := reg.Gather(); err != nil {
					panic(err)
				}
			}
		}
	}()
	benchSend(b, p)
	close(stop)
	<-done
}

var benchValue = make([]byte, 100)

func benchSend(b *testing.B, p *producer.Producer) {
	ctx := context.Background()
	if _, err := p.Send(ctx, &producer.Record{Topic: "t", Value: benchValue}).Wait(ctx); err != nil {
		b.Fatal(err)
	}
	noop := func(producer.RecordMetadata, error) {}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.SendCallback(ctx, &producer.Record{Topic: "t", Value: benchValue}, noop)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
