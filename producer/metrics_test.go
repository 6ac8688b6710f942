package producer

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestMetricTablesCoverEveryField guards Each against drift: every numeric
// field of the snapshot types is reported exactly once, and the value Each
// reports is that field's.
func TestMetricTablesCoverEveryField(t *testing.T) {
	check := func(t *testing.T, typ reflect.Type, n int, get func(i int, v reflect.Value) float64, names func(i int) string) {
		// Set every numeric field to a distinct value, then find it in the
		// table by that value.
		v := reflect.New(typ).Elem()
		want := map[float64]string{}
		for i := range typ.NumField() {
			f := v.Field(i)
			val := float64(i + 2) // 1 is a bool field's
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(true)
				val = 1
			case reflect.Int64:
				if f.Type() == reflect.TypeFor[time.Duration]() {
					f.SetInt(int64(val * float64(time.Second)))
				} else {
					f.SetInt(int64(val))
				}
			case reflect.Float64:
				f.SetFloat(val)
			default:
				continue // names and labels
			}
			want[val] = typ.Field(i).Name
		}
		seen := map[string]bool{}
		for i := range n {
			got := get(i, v)
			field, ok := want[got]
			if !ok {
				t.Errorf("%s reports %v, no field's value", names(i), got)
				continue
			}
			if seen[field] {
				t.Errorf("%s is reported twice", field)
			}
			seen[field] = true
		}
		for _, f := range want {
			if !seen[f] {
				t.Errorf("field %s is not reported", f)
			}
		}
	}
	t.Run("producer", func(t *testing.T) {
		check(t, reflect.TypeFor[ProducerMetrics](), len(producerMetricTable),
			func(i int, v reflect.Value) float64 {
				return producerMetricTable[i].get(v.Addr().Interface().(*ProducerMetrics))
			},
			func(i int) string { return producerMetricTable[i].info.Name })
	})
	t.Run("spool", func(t *testing.T) {
		check(t, reflect.TypeFor[SpoolMetrics](), len(spoolMetricTable),
			func(i int, v reflect.Value) float64 {
				return spoolMetricTable[i].get(v.Addr().Interface().(*SpoolMetrics))
			},
			func(i int) string { return spoolMetricTable[i].info.Name })
	})
	t.Run("topic", func(t *testing.T) {
		check(t, reflect.TypeFor[TopicMetrics](), len(topicMetricTable),
			func(i int, v reflect.Value) float64 {
				return topicMetricTable[i].get(v.Addr().Interface().(*TopicMetrics))
			},
			func(i int) string { return topicMetricTable[i].info.Name })
	})
	t.Run("broker", func(t *testing.T) {
		check(t, reflect.TypeFor[BrokerMetrics](), len(brokerMetricTable),
			func(i int, v reflect.Value) float64 {
				return brokerMetricTable[i].get(v.Addr().Interface().(*BrokerMetrics))
			},
			func(i int) string { return brokerMetricTable[i].info.Name })
	})
}

func TestMetricInfos(t *testing.T) {
	infos := MetricInfos()
	if len(infos) != len(producerMetricTable)+len(spoolMetricTable)+len(topicMetricTable)+len(brokerMetricTable) {
		t.Fatalf("%d infos", len(infos))
	}
	seen := map[string]bool{}
	units := map[string]bool{"seconds": true, "bytes": true, "records": true, "batches": true, "requests": true, "connections": true, "ratio": true,
		"segments": true, "fsyncs": true, "boolean": true, "transactions": true}
	for _, in := range infos {
		key := fmt.Sprint(in.Scope, in.Name)
		if seen[key] {
			t.Errorf("%s twice in scope %d", in.Name, in.Scope)
		}
		seen[key] = true
		if !units[in.Unit] || in.Help == "" {
			t.Errorf("%s: unit %q, help %q", in.Name, in.Unit, in.Help)
		}
		if total := len(in.Name) > 6 && in.Name[len(in.Name)-6:] == "-total"; total != (in.Kind == MetricCounter) {
			t.Errorf("%s: kind %d", in.Name, in.Kind)
		}
	}
}

func TestRecorderSnapshot(t *testing.T) {
	r := newRecorder()
	a, b := r.topic("b-topic"), r.topic("a-topic")
	if r.topic("b-topic") != a {
		t.Fatal("topic stats are not reused")
	}
	b1, b2 := r.broker(2, "h2:9092"), r.broker(1, "h1:9092")
	if r.broker(2, "h2b:9092") != b1 {
		t.Fatal("broker stats are not reused")
	}

	r.recordSize(100)
	r.recordSize(300)
	r.recordSize(200)
	r.bufferWaited(3*time.Millisecond, false)
	r.bufferWaited(2*time.Millisecond, true)
	r.bufferWaited(0, true)
	r.batchSent(a, batchSample{records: 2, recordBytes: 400, uncompressed: 461, wire: 200, queued: 10 * time.Millisecond})
	r.batchSent(b, batchSample{records: 1, recordBytes: 200, uncompressed: 261, wire: 261, queued: 30 * time.Millisecond})
	r.batchSent(a, batchSample{records: 2, recordBytes: 400, uncompressed: 461, wire: 200, retry: true})
	r.requestWritten(b1)
	r.wrote(b1, 1000)
	r.requestWritten(b1)
	r.wrote(b1, 500)
	r.requestWritten(b2)
	r.wrote(b2, 100)
	r.responseRead(b1, 4*time.Millisecond, true)
	r.read(b1, 80)
	r.responseRead(b1, 0, false) // broken connection: no answer
	r.throttled(b2, 50*time.Millisecond)
	r.throttled(b2, 0)
	r.connected(b1)
	r.connected(b1)
	r.disconnected(b1)
	r.connected(b2)
	r.recordsFailed(a, 2)
	r.recordsFailed(nil, 1) // no valid topic
	parked := func() (int64, int64) { return 2, 60 }
	b.parkedOf.Store(&parked)
	now := time.Unix(1000, 0)
	r.metadataRefreshed(now.Add(-7 * time.Second))

	m := r.snapshot(now, liveGauges{bufferAvailable: 10, bufferTotal: 100})
	p := m.Producer
	want := ProducerMetrics{
		RecordSendTotal: 3, RecordErrorTotal: 3, RecordRetryTotal: 2,
		RecordSizeAvg: 200, RecordSizeMax: 300,
		RecordQueueTimeAvg: 20 * time.Millisecond, RecordQueueTimeMax: 30 * time.Millisecond,
		BatchSizeAvg: 230.5, BatchSizeMax: 261,
		RecordsPerRequestAvg: 5.0 / 3,
		CompressionRateAvg:   461.0 / 722,
		RequestLatencyAvg:    4 * time.Millisecond, RequestLatencyMax: 4 * time.Millisecond,
		RequestLatencyP50: p.RequestLatencyP50, RequestLatencyP99: p.RequestLatencyP99, // estimates, below
		RequestsInFlight: 1, RequestTotal: 3, ResponseTotal: 1,
		BufferAvailableBytes: 10, BufferTotalBytes: 100,
		BufferPoolWaitTimeTotal: 5 * time.Millisecond, BufferExhaustedTotal: 2,
		ProduceThrottleTimeAvg: 50 * time.Millisecond, ProduceThrottleTimeMax: 50 * time.Millisecond,
		MetadataAge:   7 * time.Second,
		ParkedRecords: 2, ParkedBytes: 60,
		OutgoingByteTotal: 1600, IncomingByteTotal: 80,
		ConnectionCount: 2, ConnectionCreationTotal: 3, ConnectionCloseTotal: 1,
	}
	if p != want {
		t.Errorf("producer metrics\n got %+v\nwant %+v", p, want)
	}
	for _, q := range []time.Duration{p.RequestLatencyP50, p.RequestLatencyP99} {
		if d := q - 4*time.Millisecond; d < -250*time.Microsecond || d > 250*time.Microsecond {
			t.Errorf("latency quantile %v, want 4ms within 1/16", q)
		}
	}
	wantTopics := []TopicMetrics{
		{Topic: "a-topic", RecordSendTotal: 1, ByteTotal: 261, CompressionRate: 1, ParkedRecords: 2, ParkedBytes: 60},
		{Topic: "b-topic", RecordSendTotal: 2, RecordErrorTotal: 2, RecordRetryTotal: 2, ByteTotal: 461, CompressionRate: 200.0 / 461},
	}
	if !reflect.DeepEqual(m.Topics, wantTopics) {
		t.Errorf("topics\n got %+v\nwant %+v", m.Topics, wantTopics)
	}
	if len(m.Brokers) != 2 || m.Brokers[0].NodeID != 1 || m.Brokers[1].NodeID != 2 {
		t.Fatalf("brokers %+v", m.Brokers)
	}
	br := m.Brokers[1]
	if br.Addr != "h2b:9092" || br.RequestTotal != 2 || br.ResponseTotal != 1 || br.RequestsInFlight != 0 ||
		br.OutgoingByteTotal != 1500 || br.ConnectionCount != 1 || br.ConnectionCreationTotal != 2 || br.RequestLatencyMax != 4*time.Millisecond {
		t.Errorf("broker 2: %+v", br)
	}
	if m.Brokers[0].ProduceThrottleTimeMax != 50*time.Millisecond || m.Brokers[0].RequestsInFlight != 1 {
		t.Errorf("broker 1: %+v", m.Brokers[0])
	}

	// Each reports producer values, then topics, then brokers, in seconds.
	var got []string
	m.Each(func(info *MetricInfo, l Labels, v float64) {
		switch {
		case info.Name == "metadata-age", info.Name == "record-send-total" && l.Topic == "b-topic",
			info.Name == "connection-count" && l.NodeID == 2:
			got = append(got, fmt.Sprintf("%s %d %q %q/%d %v", info.Name, info.Scope, l.Topic, l.Addr, l.NodeID, v))
		}
	})
	wantEach := []string{
		`metadata-age 0 "" ""/0 7`,
		`record-send-total 1 "b-topic" ""/0 2`,
		`connection-count 2 "" "h2b:9092"/2 1`,
	}
	if !reflect.DeepEqual(got, wantEach) {
		t.Errorf("Each\n got %q\nwant %q", got, wantEach)
	}
}

func TestRecorderEmpty(t *testing.T) {
	m := newRecorder().snapshot(time.Now(), liveGauges{})
	if m.Producer.CompressionRateAvg != 1 || m.Producer.MetadataAge != 0 || m.Producer.RecordsPerRequestAvg != 0 ||
		len(m.Topics) != 0 || len(m.Brokers) != 0 {
		t.Fatalf("%+v", m)
	}
}

// TestRecorderConcurrentWritersAndSnapshots: every goroutine kind records
// while snapshots run, under -race; the totals add up afterwards.
func TestRecorderConcurrentWritersAndSnapshots(t *testing.T) {
	r := newRecorder()
	var wg sync.WaitGroup
	const n = 2000
	for w := range 4 {
		wg.Go(func() {
			ts := r.topic(fmt.Sprint("t", w%2))
			bs := r.broker(int32(w), "h")
			for i := range n {
				r.recordSize(i)
				r.batchSent(ts, batchSample{records: 1, recordBytes: 10, uncompressed: 71, wire: 71})
				r.requestWritten(bs)
				r.wrote(bs, 100)
				r.responseRead(bs, time.Millisecond, true)
				r.read(bs, 50)
			}
		})
	}
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				r.snapshot(time.Now(), liveGauges{})
			}
		}
	})
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	m := r.snapshot(time.Now(), liveGauges{})
	if m.Producer.RecordSendTotal != 4*n || m.Producer.RequestTotal != 4*n || m.Producer.RequestsInFlight != 0 ||
		m.Producer.ParkedRecords != 0 || len(m.Topics) != 2 || len(m.Brokers) != 4 || m.Producer.RecordSizeMax != n-1 {
		t.Fatalf("%+v", m.Producer)
	}
}

func BenchmarkRecorderBatchSent(b *testing.B) {
	r := newRecorder()
	ts := r.topic("t")
	b.ReportAllocs()
	for b.Loop() {
		r.batchSent(ts, batchSample{records: 10, recordBytes: 1000, uncompressed: 1061, wire: 500, queued: time.Millisecond})
	}
}

func BenchmarkRecorderRecordSizeParallel(b *testing.B) {
	r := newRecorder()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.recordSize(100)
		}
	})
}

// TestMetricsAfterRetriesAndThrottles: ProducerMetrics counts what a
// run with retries (a retriable error on the first Produce answers) and
// throttles (on Produce and on Metadata answers) did, and once every
// record completed, nothing is buffered, in flight or held of the pool.
func TestMetricsAfterRetriesAndThrottles(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("stats", 2))
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 2, ErrorCode: 6}) // NOT_LEADER_OR_FOLLOWER
	c.Intercept(testbroker.Interceptor{Keys: []int16{0, 3}, Times: 4, After: true, Throttle: 5 * time.Millisecond})
	p := newProducer(t, c, Config{Compression: compression.Gzip})
	fs := make([]*Future, 200)
	for i := range fs {
		fs[i] = p.Send(context.Background(), &Record{Topic: "stats", Key: []byte{byte(i)}, Value: bytes.Repeat([]byte("v"), 100)})
	}
	pending := p.Metrics().Producer.BufferedRecords
	assert.Positive(t, pending, "records still buffered right after Send")
	waitAll(t, fs)

	// A batch's memory returns once its outcomes are delivered, just
	// after Wait returns.
	var m ProducerMetrics
	require.Eventually(t, func() bool {
		m = p.Metrics().Producer
		return m.BufferedRecords == 0 && m.RequestsInFlight == 0 && m.BufferTotalBytes == m.BufferAvailableBytes
	}, 5*time.Second, time.Millisecond, "records buffered, requests in flight or memory held after every record completed: %+v", m)
	assert.Positive(t, m.BatchAckTotal)
	assert.Less(t, m.BatchAckBytesTotal, m.BatchAckUncompressedBytesTotal, "gzip made the batches smaller")
	assert.GreaterOrEqual(t, m.BatchRetryTotal, int64(1), "the NOT_LEADER answers were retried")
	assert.GreaterOrEqual(t, m.ThrottleTimeTotal, 5*time.Millisecond, "the throttles were seen")
}

// bufferUsed is the pool memory p holds, in bytes.
func bufferUsed(p *Producer) int64 {
	m := p.Metrics().Producer
	return m.BufferTotalBytes - m.BufferAvailableBytes
}
