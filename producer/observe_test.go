package producer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// recordingHook implements every Hook* interface and keeps what it saw.
type recordingHook struct {
	mu        sync.Mutex
	buffered  int
	completed []RecordCompletion
	ctxOK     int // completions whose context carried the buffered hook's value
	batches   []BatchWritten
	connected []error
	disconn   int
	throttled []time.Duration
	written   map[int16]int
	read      map[int16]int
	readLat   time.Duration
	meta      []MetadataRefresh
	parked    []string
	unparked  []TopicUnparked
	waited    []time.Duration
	exhausted []int
}

type hookCtxKey struct{}

func newRecordingHook() *recordingHook {
	return &recordingHook{written: map[int16]int{}, read: map[int16]int{}}
}

func (h *recordingHook) OnRecordBuffered(ctx context.Context, rec *Record) context.Context {
	h.mu.Lock()
	h.buffered++
	h.mu.Unlock()
	rec.Headers = SetHeader(rec.Headers, "hooked", []byte("1"))
	return context.WithValue(ctx, hookCtxKey{}, rec.Topic)
}

func (h *recordingHook) OnRecordCompleted(ctx context.Context, c RecordCompletion) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.completed = append(h.completed, c)
	if ctx.Value(hookCtxKey{}) == c.Metadata.Topic {
		h.ctxOK++
	}
}

func (h *recordingHook) OnBatchWritten(b BatchWritten) {
	h.mu.Lock()
	h.batches = append(h.batches, b)
	h.mu.Unlock()
}

func (h *recordingHook) OnBrokerConnected(_ BrokerInfo, _ time.Duration, err error) {
	h.mu.Lock()
	h.connected = append(h.connected, err)
	h.mu.Unlock()
}

func (h *recordingHook) OnBrokerDisconnected(BrokerInfo, error) {
	h.mu.Lock()
	h.disconn++
	h.mu.Unlock()
}

func (h *recordingHook) OnBrokerThrottled(_ BrokerInfo, d time.Duration) {
	h.mu.Lock()
	h.throttled = append(h.throttled, d)
	h.mu.Unlock()
}

func (h *recordingHook) OnBrokerRequestWritten(_ BrokerInfo, r RequestWritten) {
	h.mu.Lock()
	h.written[r.Key]++
	h.mu.Unlock()
}

func (h *recordingHook) OnBrokerResponseRead(_ BrokerInfo, r ResponseRead) {
	h.mu.Lock()
	h.read[r.Key]++
	h.readLat = max(h.readLat, r.Latency)
	h.mu.Unlock()
}

func (h *recordingHook) OnMetadataRefreshed(m MetadataRefresh) {
	h.mu.Lock()
	h.meta = append(h.meta, m)
	h.mu.Unlock()
}

func (h *recordingHook) OnTopicParked(topic string) {
	h.mu.Lock()
	h.parked = append(h.parked, topic)
	h.mu.Unlock()
}

func (h *recordingHook) OnTopicUnparked(_ string, u TopicUnparked) {
	h.mu.Lock()
	h.unparked = append(h.unparked, u)
	h.mu.Unlock()
}

func (h *recordingHook) OnBufferWaited(_ string, d time.Duration, _ error) {
	h.mu.Lock()
	h.waited = append(h.waited, d)
	h.mu.Unlock()
}

func (h *recordingHook) OnBufferExhausted(_ string, n int) {
	h.mu.Lock()
	h.exhausted = append(h.exhausted, n)
	h.mu.Unlock()
}

func topicMetrics(m Metrics, name string) TopicMetrics {
	for _, t := range m.Topics {
		if t.Topic == name {
			return t
		}
	}
	return TopicMetrics{}
}

// sendN sends n records to topic with callbacks and returns how many
// failed, once all are complete.
func sendN(t *testing.T, p *Producer, topic string, n int) int {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	wg.Add(n)
	for range n {
		p.SendCallback(ctx, &Record{Topic: topic, Value: []byte("0123456789")}, func(_ RecordMetadata, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		})
	}
	require.NoError(t, p.Flush(ctx))
	wg.Wait()
	return int(failed.Load())
}

// TestMetricsAndHooksAfterKnownWorkload: a workload with one NOT_LEADER,
// one throttled answer and one refused batch shows in Metrics and in every
// hook, with the right figures.
func TestMetricsAndHooksAfterKnownWorkload(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("ok", 3))
	require.NoError(t, c.CreateTopic("bad", 1))
	h := newRecordingHook()
	p := newProducer(t, c, Config{Hooks: []Hook{h}, DisableIdempotence: true})

	const n = 300
	require.Zero(t, sendN(t, p, "ok", n))
	m := p.Metrics()
	assert.EqualValues(t, n, m.Producer.RecordSendTotal)
	assert.Zero(t, m.Producer.RecordErrorTotal)
	assert.Zero(t, m.Producer.RecordRetryTotal)
	assert.Positive(t, m.Producer.RequestLatencyAvg)
	assert.Positive(t, m.Producer.RequestLatencyP50)
	assert.GreaterOrEqual(t, m.Producer.RequestLatencyP99, m.Producer.RequestLatencyP50)
	assert.Positive(t, m.Producer.BatchSizeAvg)
	assert.Positive(t, m.Producer.RecordsPerRequestAvg)
	assert.InDelta(t, 1, m.Producer.CompressionRateAvg, 1e-9, "no compression")
	assert.Positive(t, m.Producer.ConnectionCount)
	assert.EqualValues(t, m.Producer.ConnectionCount, m.Producer.ConnectionCreationTotal)
	assert.Positive(t, m.Producer.OutgoingByteTotal)
	assert.Positive(t, m.Producer.IncomingByteTotal)
	assert.Positive(t, m.Producer.MetadataAge)
	assert.Less(t, m.Producer.MetadataAge, time.Minute)
	assert.Zero(t, m.Producer.RequestsInFlight)
	assert.Equal(t, m.Producer.BufferTotalBytes, m.Producer.BufferAvailableBytes, "all memory back after Flush")
	assert.EqualValues(t, n, topicMetrics(m, "ok").RecordSendTotal)
	assert.EqualValues(t, 22, m.Producer.RecordSizeMax, "a 10-byte value and the hook's header, with their length fields")

	// NOT_LEADER_OR_FOLLOWER once: the request's batches are sent again.
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 6})
	require.Zero(t, sendN(t, p, "ok", n))
	// A throttled answer.
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Throttle: 30 * time.Millisecond})
	require.Zero(t, sendN(t, p, "ok", 10))
	// INVALID_RECORD: not retriable, the batch fails.
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 87})
	failed := sendN(t, p, "bad", 5)
	require.Positive(t, failed)

	m = p.Metrics()
	assert.EqualValues(t, 2*n+10+5, m.Producer.RecordSendTotal, "each record counts once, at its first send")
	assert.Positive(t, m.Producer.RecordRetryTotal)
	assert.EqualValues(t, failed, m.Producer.RecordErrorTotal)
	assert.EqualValues(t, failed, topicMetrics(m, "bad").RecordErrorTotal)
	assert.EqualValues(t, m.Producer.RecordRetryTotal, topicMetrics(m, "ok").RecordRetryTotal)
	assert.Equal(t, 30*time.Millisecond, m.Producer.ProduceThrottleTimeMax)
	assert.Equal(t, 30*time.Millisecond, m.Producer.ProduceThrottleTimeAvg)
	assert.Equal(t, m.Producer.BufferTotalBytes, m.Producer.BufferAvailableBytes)
	var retried, requests int64
	for _, b := range m.Brokers {
		requests += b.RequestTotal
		assert.Equal(t, b.RequestTotal, b.ResponseTotal, "broker %d", b.NodeID)
		assert.NotEmpty(t, b.Addr)
	}
	assert.Len(t, m.Brokers, 2)
	assert.Equal(t, m.Producer.RequestTotal, requests)
	assert.Positive(t, requests)

	h.mu.Lock()
	defer h.mu.Unlock()
	total := 2*n + 10 + 5
	assert.Equal(t, total, h.buffered)
	assert.Len(t, h.completed, total)
	assert.Equal(t, total, h.ctxOK, "the buffered hook's context reaches the completion")
	errs := 0
	for _, rc := range h.completed {
		assert.Positive(t, rc.Elapsed)
		if rc.Err != nil {
			errs++
		}
	}
	assert.Equal(t, failed, errs)
	var records, firsts int
	for _, b := range h.batches {
		assert.Positive(t, b.WireBytes)
		assert.GreaterOrEqual(t, b.UncompressedBytes, b.WireBytes)
		assert.Positive(t, b.Latency)
		assert.GreaterOrEqual(t, b.Broker.NodeID, int32(0))
		if b.Attempt == 1 {
			firsts += b.Records
		} else {
			retried += int64(b.Records)
		}
		records += b.Records
	}
	assert.Equal(t, total, firsts)
	assert.Equal(t, m.Producer.RecordRetryTotal, retried)
	assert.Greater(t, records, total)
	assert.NotEmpty(t, h.connected)
	for _, err := range h.connected {
		assert.NoError(t, err)
	}
	assert.Equal(t, []time.Duration{30 * time.Millisecond}, h.throttled)
	assert.Positive(t, h.written[0])
	assert.Equal(t, h.written[0], h.read[0], "Produce requests written and answered")
	assert.Positive(t, h.readLat)
	assert.NotEmpty(t, h.meta)
	for _, mr := range h.meta {
		assert.NoError(t, mr.Err)
		assert.NotEmpty(t, mr.Broker.Addr)
		assert.Equal(t, 2, mr.Brokers)
	}
}

// TestHookHeadersAreEncoded: headers a HookRecordBuffered sets reach the
// broker; the caller's Record is unchanged.
func TestHookHeadersAreEncoded(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("h", 1))
	p := newProducer(t, c, Config{Hooks: []Hook{newRecordingHook()}})
	ctx := context.Background()
	rec := &Record{Topic: "h", Value: []byte("v"), Headers: []Header{{Key: "mine", Value: []byte("x")}}}
	_, err := p.Send(ctx, rec).Wait(ctx)
	require.NoError(t, err)
	assert.Len(t, rec.Headers, 1, "the caller's headers are not touched")
	recs, err := c.Records("h", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	var keys []string
	for _, h := range recs[0].Headers {
		keys = append(keys, h.Key)
	}
	assert.Equal(t, []string{"mine", "hooked"}, keys)
}

// TestParkedMetricsAndHooks: records of an unknown topic show as parked,
// with the hooks, until the topic exists; then 0.
func TestParkedMetricsAndHooks(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	h := newRecordingHook()
	p := newProducer(t, c, Config{Hooks: []Hook{h}, DisableAutoTopicCreation: true})
	ctx := context.Background()
	futs := make([]*Future, 4)
	for i := range futs {
		futs[i] = p.Send(ctx, &Record{Topic: "later", Value: []byte("0123456789")})
	}
	m := p.Metrics()
	assert.EqualValues(t, 4, m.Producer.ParkedRecords)
	assert.EqualValues(t, 4, topicMetrics(m, "later").ParkedRecords)
	assert.Positive(t, topicMetrics(m, "later").ParkedBytes)
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.parked) == 1
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, c.CreateTopic("later", 2))
	for _, f := range futs {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	m = p.Metrics()
	assert.Zero(t, m.Producer.ParkedRecords)
	assert.Zero(t, m.Producer.ParkedBytes)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{"later"}, h.parked)
	require.Len(t, h.unparked, 1)
	assert.Equal(t, 4, h.unparked[0].Records)
	assert.Positive(t, h.unparked[0].Parked)
	assert.NoError(t, h.unparked[0].Err)
}

// TestBufferWaitMetricsAndHooks: with Produce stalled, Sends wait for
// memory (bufferpool-wait-time-total, HookBufferWaited) and then fail
// (buffer-exhausted-total, HookBufferExhausted).
func TestBufferWaitMetricsAndHooks(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("w", 1))
	h := newRecordingHook()
	p := newProducer(t, c, Config{Hooks: []Hook{h}, BufferMemory: 64 << 10, BatchSize: 16 << 10, MaxBlock: 30 * time.Millisecond})
	ctx := context.Background()
	_, err := p.Send(ctx, &Record{Topic: "w", Value: []byte("x")}).Wait(ctx)
	require.NoError(t, err)
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	value := make([]byte, 4<<10)
	var futs []*Future
	for range 40 {
		futs = append(futs, p.Send(ctx, &Record{Topic: "w", Value: value}))
	}
	remove()
	exhausted := 0
	for _, f := range futs {
		if _, err := f.Wait(ctx); errors.Is(err, ErrBufferExhausted) {
			exhausted++
		}
	}
	require.Positive(t, exhausted)
	m := p.Metrics()
	assert.EqualValues(t, exhausted, m.Producer.BufferExhaustedTotal)
	assert.GreaterOrEqual(t, m.Producer.BufferPoolWaitTimeTotal, time.Duration(exhausted)*30*time.Millisecond)
	require.NoError(t, p.Flush(ctx))
	assert.Equal(t, p.Metrics().Producer.BufferTotalBytes, p.Metrics().Producer.BufferAvailableBytes)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Len(t, h.exhausted, exhausted)
	assert.GreaterOrEqual(t, len(h.waited), exhausted)
	for _, n := range h.exhausted {
		assert.Greater(t, n, 4<<10)
	}
}

// panicHook panics in every event it implements.
type panicHook struct{}

func (panicHook) OnRecordBuffered(context.Context, *Record) context.Context { panic("buffered") }
func (panicHook) OnRecordCompleted(context.Context, RecordCompletion)       { panic("completed") }
func (panicHook) OnBatchWritten(BatchWritten)                               { panic("batch") }

// TestPanickingHookIsRecoveredAndLoggedOnce: each event kind's panic is
// logged once, and every record still completes exactly once.
func TestPanickingHookIsRecoveredAndLoggedOnce(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("p", 2))
	var logs testutil.SyncBuffer
	h := newRecordingHook()
	p := newProducer(t, c, Config{
		Hooks:  []Hook{panicHook{}, h},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	const n = 50
	var calls atomic.Int64
	ctx := context.Background()
	for range n {
		p.SendCallback(ctx, &Record{Topic: "p", Value: []byte("v")}, func(RecordMetadata, error) { calls.Add(1) })
	}
	require.NoError(t, p.Flush(ctx))
	assert.EqualValues(t, n, calls.Load())
	out := logs.String()
	assert.Equal(t, 3, strings.Count(out, "a hook panicked"), out)
	for _, ev := range []string{"OnRecordBuffered", "OnRecordCompleted", "OnBatchWritten"} {
		assert.Equal(t, 1, strings.Count(out, "event="+ev), ev)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Len(t, h.completed, n, "the next hook still runs")
}

// reentrantHook calls back into the producer from its hooks.
type reentrantHook struct {
	p       atomic.Pointer[Producer]
	sends   atomic.Int64
	metrics atomic.Int64
}

func (h *reentrantHook) OnRecordCompleted(_ context.Context, c RecordCompletion) {
	p := h.p.Load()
	p.Metrics()
	h.metrics.Add(1)
	if c.Metadata.Topic == "a" {
		// A Send from the completion goroutine: it never waits for memory.
		p.SendCallback(context.Background(), &Record{Topic: "b", Value: []byte("v")}, func(RecordMetadata, error) {})
		h.sends.Add(1)
	}
}

func (h *reentrantHook) OnBatchWritten(BatchWritten) {
	h.p.Load().Metrics()
	h.metrics.Add(1)
}

func (h *reentrantHook) OnMetadataRefreshed(MetadataRefresh) { h.p.Load().Metrics() }

// TestHooksMayCallTheProducer: a hook calling Metrics, or Send from the
// completion goroutine, does not deadlock (no samsa lock is held).
func TestHooksMayCallTheProducer(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("a", 2))
	require.NoError(t, c.CreateTopic("b", 2))
	h := &reentrantHook{}
	cfg := Config{Brokers: c.Addrs(), Hooks: []Hook{h}}
	p, err := New(cfg)
	require.NoError(t, err)
	h.p.Store(p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 100 {
		p.SendCallback(ctx, &Record{Topic: "a", Value: []byte("v")}, func(RecordMetadata, error) {})
	}
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, p.Close(ctx))
	assert.EqualValues(t, 100, h.sends.Load())
	assert.Positive(t, h.metrics.Load())
	assert.EqualValues(t, 200, p.Metrics().Producer.RecordSendTotal)
}

func TestHooksConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hooks []Hook
		want  string
	}{
		{"nil hook", []Hook{newRecordingHook(), nil}, "hook 1 is nil"},
		{"no interface", []Hook{42}, "hook 0 (int) implements no Hook interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Brokers: []string{"localhost:9092"}, Hooks: tc.hooks})
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestRecordObsIsCharged: with a HookRecordCompleted hook each record also
// keeps a recordObs, and the pool is charged for it, so BufferMemory still
// bounds the heap of buffered records; a HookRecordBuffered hook alone
// keeps none and costs no charge.
func TestRecordObsIsCharged(t *testing.T) {
	base, err := New(Config{Brokers: []string{"127.0.0.1:1"}})
	require.NoError(t, err)
	defer base.Close(context.Background())
	for _, tc := range []struct {
		name  string
		hook  Hook
		extra int
	}{
		{"completed", completedOnly{}, int(unsafe.Sizeof(recordObs{}))},
		{"buffered", bufferedOnly{}, 0},
	} {
		p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Hooks: []Hook{tc.hook}})
		require.NoError(t, err)
		require.Equal(t, base.acc.RecordCharge()+tc.extra, p.acc.RecordCharge(), tc.name)
		require.NoError(t, p.Close(context.Background()))
	}
}

type completedOnly struct{}

func (completedOnly) OnRecordCompleted(context.Context, RecordCompletion) {}

type bufferedOnly struct{}

func (bufferedOnly) OnRecordBuffered(ctx context.Context, _ *Record) context.Context { return ctx }
