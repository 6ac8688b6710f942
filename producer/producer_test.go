package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testbroker"
)

func TestMain(m *testing.M) {
	// Producers without a Logger log Warn and above to slog.Default():
	// the tests' deliberate failures stay out of the output.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

// newCluster starts a test cluster that is closed with the test.
func newCluster(t testing.TB, cfg testbroker.Config) *testbroker.Cluster {
	t.Helper()
	c, err := testbroker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newProducer starts a producer on c that is closed with the test.
func newProducer(t testing.TB, c *testbroker.Cluster, cfg Config) *Producer {
	t.Helper()
	cfg.Brokers = c.Addrs()
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 10 * time.Millisecond
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = 100 * time.Millisecond
	}
	if cfg.Logger == nil && os.Getenv("SAMSA_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func waitAll(t testing.TB, fs []*Future) []RecordMetadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mds := make([]RecordMetadata, len(fs))
	for i, f := range fs {
		md, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
		mds[i] = md
	}
	return mds
}

// TestSendDeliversEveryRecordWithEveryCodec checks the whole path: what Send
// accepted is stored by the broker, record by record, in Send order, with
// the IO goroutine compressing alone and with helpers (more than the
// machine's cores, so that they interleave).
func TestSendDeliversEveryRecordWithEveryCodec(t *testing.T) {
	for _, codec := range []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/compressors=%d", codec, workers), func(t *testing.T) {
				testSendDelivers(t, codec, workers)
			})
		}
	}
}

func testSendDelivers(t *testing.T, codec compression.Type, workers int) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("events", 3))
	p := newProducer(t, c, Config{Compression: codec, CompressionConcurrency: workers, BatchSize: 4096})
	const n = 2000
	fs := make([]*Future, n)
	for i := range fs {
		fs[i] = p.Send(context.Background(), &Record{
			Topic:   "events",
			Key:     []byte(fmt.Sprintf("k%d", i%10)),
			Value:   []byte(fmt.Sprintf("value-%06d-%s", i, strings.Repeat("x", 50))),
			Headers: []Header{{Key: "h", Value: []byte{byte(i)}}},
		})
	}
	mds := waitAll(t, fs)
	stored := map[int32][]testbroker.Record{}
	for part := range int32(3) {
		recs, err := c.Records("events", part)
		require.NoError(t, err)
		stored[part] = recs
	}
	for i, md := range mds {
		require.Equal(t, "events", md.Topic)
		require.Equal(t, KeyPartition([]byte(fmt.Sprintf("k%d", i%10)), 3), md.Partition, "record %d", i)
		recs := stored[md.Partition]
		require.Less(t, md.Offset, int64(len(recs)))
		got := recs[md.Offset]
		require.Equal(t, []byte(fmt.Sprintf("value-%06d-%s", i, strings.Repeat("x", 50))), got.Value)
		require.Equal(t, []byte{byte(i)}, got.Headers[0].Value)
	}
	if st := p.Metrics().Producer; codec != compression.None {
		require.Greater(t, st.BatchAckTotal, int64(3), "several batches per partition")
		require.Less(t, st.BatchAckBytesTotal, st.BatchAckUncompressedBytesTotal, "batches went out compressed")
	}
}

// TestParkedRecordsKeepSendOrder: Send before the topic exists returns at
// once, and once the topic appears every record is delivered, in Send order
// within each partition (KIP-286).
func TestParkedRecordsKeepSendOrder(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	p := newProducer(t, c, Config{})
	const n = 20000
	fs := make([]*Future, n)
	start := time.Now()
	for i := range fs {
		fs[i] = p.Send(context.Background(), &Record{Topic: "later", Key: []byte{byte(i % 7)}, Value: []byte(fmt.Sprint(i))})
	}
	sendTime := time.Since(start)
	for _, f := range fs[:100] {
		_, done, _ := f.Result()
		require.False(t, done, "no record can be done before its topic exists")
	}
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, c.CreateTopic("later", 4))
	mds := waitAll(t, fs)
	last := map[int32]int64{}
	for i, md := range mds {
		prev, ok := last[md.Partition]
		require.True(t, !ok || md.Offset > prev, "record %d out of order in partition %d", i, md.Partition)
		last[md.Partition] = md.Offset
	}
	for part := range int32(4) {
		recs, err := c.Records("later", part)
		require.NoError(t, err)
		prev := -1
		for _, r := range recs {
			var v int
			fmt.Sscan(string(r.Value), &v)
			require.Greater(t, v, prev, "partition %d stores records out of Send order", part)
			prev = v
		}
	}
	t.Logf("%d Sends before the topic existed took %v", n, sendTime)
}

// TestTopicThatNeverAppearsFailsNamingIt: parked records fail after
// DeliveryTimeout with an error that names the topic.
func TestTopicThatNeverAppearsFailsNamingIt(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	p := newProducer(t, c, Config{DeliveryTimeout: 300 * time.Millisecond, RequestTimeout: 200 * time.Millisecond, Linger: -1})
	f := p.Send(context.Background(), &Record{Topic: "missing", Value: []byte("v")})
	_, err := f.Wait(context.Background())
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Contains(t, err.Error(), `"missing"`)
}

// TestBadInputFailsOnlyThatRecord: each bad record gets a clear error on its
// own future, and good records around it are delivered.
func TestBadInputFailsOnlyThatRecord(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ok", 2))
	p := newProducer(t, c, Config{MaxRequestSize: 64 << 10, Partitioner: ManualPartitioner()})
	// Metadata for "ok" first, so the partition check runs in Send.
	_, err := p.Send(context.Background(), &Record{Topic: "ok", Partition: 0, Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)

	cases := []struct {
		name string
		rec  *Record
		want error
	}{
		{"nil record", nil, ErrInvalidRecord},
		{"empty topic", &Record{Value: []byte("v")}, ErrInvalidRecord},
		{"invalid topic", &Record{Topic: "bad topic!", Value: []byte("v")}, ErrInvalidRecord},
		{"dot topic", &Record{Topic: "..", Value: []byte("v")}, ErrInvalidRecord},
		{"too large", &Record{Topic: "ok", Value: bytes.Repeat([]byte("x"), 65<<10)}, ErrRecordTooLarge},
		{"negative partition", &Record{Topic: "ok", Partition: -2, Value: []byte("v")}, ErrInvalidRecord},
		{"partition out of range", &Record{Topic: "ok", Partition: 9, Value: []byte("v")}, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			good := p.Send(context.Background(), &Record{Topic: "ok", Partition: 1, Value: []byte("good")})
			_, err := p.Send(context.Background(), tc.rec).Wait(context.Background())
			require.ErrorIs(t, err, tc.want)
			_, err = good.Wait(context.Background())
			require.NoError(t, err)
		})
	}
}

// TestBufferFullBlocksForMaxBlock: with the broker stalled, Send blocks for
// MaxBlock and then fails with ErrBufferExhausted; TrySend fails at once; the
// heap stays within BufferMemory plus a small constant.
func TestBufferFullBlocksForMaxBlock(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("stalled", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	defer remove()
	const bufferMemory = 256 << 10
	p := newProducer(t, c, Config{BufferMemory: bufferMemory, BatchSize: 16 << 10, MaxBlock: 200 * time.Millisecond, Linger: -1})

	var before, after runtimeMem
	before.read()
	value := bytes.Repeat([]byte("v"), 1000)
	var fs []*Future
	var exhausted *Future
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		f := p.Send(context.Background(), &Record{Topic: "stalled", Value: value})
		if _, done, err := f.Result(); done && errors.Is(err, ErrBufferExhausted) {
			require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "Send must wait about MaxBlock before giving up")
			exhausted = f
			break
		}
		fs = append(fs, f)
	}
	require.NotNil(t, exhausted, "the pool never filled up")
	after.read()
	require.Less(t, after.heap-before.heap, int64(bufferMemory+4<<20), "live heap grew beyond BufferMemory plus a small constant")

	start := time.Now()
	_, err := p.TrySend(context.Background(), &Record{Topic: "stalled", Value: value}).Wait(context.Background())
	require.ErrorIs(t, err, ErrBufferExhausted)
	require.Less(t, time.Since(start), 100*time.Millisecond, "TrySend must not block")

	remove()
	waitAll(t, fs)
}

// TestEveryFutureCompletesOnceOnClose: Close with a context that ends at once
// still completes every future, each exactly once (complete panics on a
// second completion), and leaves no goroutine behind (goleak in TestMain).
func TestEveryFutureCompletesOnceOnClose(t *testing.T) {
	for _, cfg := range []Config{
		{},
		// Compression helpers at work on small batches when Close comes.
		{Compression: compression.Zstd, CompressionConcurrency: 4, BatchSize: 1024},
	} {
		t.Run(cfg.Compression.String(), func(t *testing.T) { testCloseCompletesAll(t, cfg) })
	}
}

func testCloseCompletesAll(t *testing.T, cfg Config) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 3))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Delay: 200 * time.Millisecond})
	defer remove()
	p := newProducer(t, c, cfg)
	var fs []*Future
	var callbacks sync.WaitGroup
	var calls sync.Map
	for i := range 3000 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")}))
		callbacks.Add(1)
		p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ RecordMetadata, _ error) {
			_, dup := calls.LoadOrStore(i, true)
			if dup {
				t.Errorf("callback %d called twice", i)
			}
			callbacks.Done()
		})
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "never-created", Value: []byte("v")}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Close(ctx), context.Canceled)
	require.ErrorIs(t, p.Close(context.Background()), context.Canceled, "a second Close returns the first result")
	for i, f := range fs {
		_, done, err := f.Result()
		require.True(t, done, "future %d not completed after Close", i)
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("future %d: unexpected error %v", i, err)
		}
	}
	callbacks.Wait()
	_, err := p.Send(context.Background(), &Record{Topic: "t"}).Wait(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.Flush(context.Background()), ErrClosed)
}

// TestFlushWaitsForCallbacks: Flush returns only after every callback of
// the records sent before it has run.
func TestFlushWaitsForCallbacks(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 2))
	p := newProducer(t, c, Config{Linger: time.Hour})
	var mu sync.Mutex
	done := 0
	for range 500 {
		p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ RecordMetadata, err error) {
			require.NoError(t, err)
			mu.Lock()
			done++
			mu.Unlock()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(ctx), "Flush must not wait for a one-hour linger")
	mu.Lock()
	require.Equal(t, 500, done)
	mu.Unlock()
}

// TestSendToDeliversEveryResult: the delivery channel gets one Result per
// record.
func TestSendToDeliversEveryResult(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 2))
	p := newProducer(t, c, Config{})
	results := make(chan Result, 100)
	recs := make([]*Record, 100)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}
		p.SendTo(context.Background(), recs[i], results)
	}
	seen := map[*Record]bool{}
	for range recs {
		r := <-results
		require.NoError(t, r.Err)
		require.False(t, seen[r.Record])
		seen[r.Record] = true
	}
	require.Len(t, seen, 100)
}

// TestFaultsLoseNoAckedRecord: leader moves, NOT_LEADER answers, dropped
// connections and a broker restart while producing; every future completes,
// and every acknowledged record is stored exactly once.
func TestFaultsLoseNoAckedRecord(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("faults", 6))
	p := newProducer(t, c, Config{DeliveryTimeout: 20 * time.Second, RequestTimeout: 2 * time.Second})
	removeNL := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.05, ErrorCode: 6})
	defer removeNL()
	removeDrop := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.02, Drop: true})
	defer removeDrop()

	const n = 20000
	fs := make([]*Future, 0, n)
	for i := range n {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "faults", Key: []byte(fmt.Sprint(i % 50)), Value: []byte(fmt.Sprint(i))}))
		switch i {
		case n / 4:
			require.NoError(t, c.MoveLeader("faults", 0, 2))
			require.NoError(t, c.MoveLeader("faults", 1, 0))
		case n / 2:
			require.NoError(t, c.StopBroker(1))
		case n/2 + 2000:
			require.NoError(t, c.RestartBroker(1))
		}
	}
	removeNL()
	removeDrop()
	mds := waitAll(t, fs)
	stored := map[string]int{}
	for part := range int32(6) {
		recs, err := c.Records("faults", part)
		require.NoError(t, err)
		for _, r := range recs {
			stored[string(r.Value)]++
		}
	}
	for i, md := range mds {
		require.Equal(t, 1, stored[fmt.Sprint(i)], "record %d (partition %d offset %d) stored %d times", i, md.Partition, md.Offset, stored[fmt.Sprint(i)])
	}
}

// TestThrottledBrokerDeliversEverything: a produce quota throttles the
// producer (KIP-219) and every record is still delivered.
func TestThrottledBrokerDeliversEverything(t *testing.T) {
	c := newCluster(t, testbroker.Config{ProduceByteRate: 200 << 10})
	require.NoError(t, c.CreateTopic("slow", 2))
	p := newProducer(t, c, Config{})
	value := bytes.Repeat([]byte("x"), 1000)
	fs := make([]*Future, 600)
	for i := range fs {
		fs[i] = p.Send(context.Background(), &Record{Topic: "slow", Value: value})
	}
	waitAll(t, fs)
	require.Greater(t, p.Metrics().Producer.ThrottleTimeTotal, time.Duration(0), "the broker's throttle was not seen")
}

// TestAutoCreateUnderMutationQuota: a missing topic is created by the
// producer; a KIP-599 quota throttles the creation, and everything is
// delivered after it.
func TestAutoCreateUnderMutationQuota(t *testing.T) {
	c := newCluster(t, testbroker.Config{MutationRate: 2, MutationBurst: 1})
	p := newProducer(t, c, Config{AutoCreateTopics: true, AutoCreatePartitions: 3})
	var fs []*Future
	for _, topic := range []string{"auto-a", "auto-b"} {
		for i := range 100 {
			fs = append(fs, p.Send(context.Background(), &Record{Topic: topic, Value: []byte(fmt.Sprint(i))}))
		}
	}
	waitAll(t, fs)
	for _, topic := range []string{"auto-a", "auto-b"} {
		total := int64(0)
		for part := range int32(3) {
			hw, err := c.HighWatermark(topic, part)
			require.NoError(t, err)
			total += hw
		}
		require.Equal(t, int64(100), total)
	}
}

// TestSendFromManyGoroutines: concurrent Sends are all delivered.
func TestSendFromManyGoroutines(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("many", 8))
	p := newProducer(t, c, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs := make([]*Future, 2000)
			for i := range fs {
				fs[i] = p.Send(context.Background(), &Record{Topic: "many", Key: []byte(fmt.Sprintf("%d-%d", g, i%13)), Value: []byte("v")})
			}
			for _, f := range fs {
				if _, err := f.Wait(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

type runtimeMem struct{ heap int64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = int64(ms.HeapAlloc)
}

// TestSlowMetadataNeverBlocksSend: with Metadata answers delayed, Send still
// returns at once and every record is delivered once metadata arrives.
func TestSlowMetadataNeverBlocksSend(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("slowmeta", 3))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Delay: 500 * time.Millisecond})
	defer remove()
	p := newProducer(t, c, Config{})
	fs := make([]*Future, 1000)
	start := time.Now()
	for i := range fs {
		fs[i] = p.Send(context.Background(), &Record{Topic: "slowmeta", Value: []byte(fmt.Sprint(i))})
	}
	require.Less(t, time.Since(start), 400*time.Millisecond, "Send waited for metadata")
	waitAll(t, fs)
}

// TestSendContextEndsTheWaitForMemory: a Send blocked on a full pool fails
// with its context's error when the context ends, and nothing else is
// disturbed.
func TestSendContextEndsTheWaitForMemory(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("ctx", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	defer remove()
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, MaxBlock: time.Minute, Linger: -1})
	value := bytes.Repeat([]byte("v"), 8<<10)
	var fs []*Future
	for range 8 { // fill the pool: each 8 KiB record takes a 16 KiB batch; TrySends past 64 KiB fail at once
		fs = append(fs, p.TrySend(context.Background(), &Record{Topic: "ctx", Value: value}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var blocked *Future
	for time.Since(start) < 10*time.Second {
		f := p.Send(ctx, &Record{Topic: "ctx", Value: value})
		if _, done, err := f.Result(); done && err != nil {
			blocked = f
			break
		}
		fs = append(fs, f)
	}
	require.NotNil(t, blocked)
	_, err := blocked.Wait(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second, "the context, not MaxBlock, ended the wait")
	remove()
	for _, f := range fs {
		if _, _, err := f.Result(); err != nil {
			continue // a TrySend that found the pool full
		}
		_, err := f.Wait(context.Background())
		require.NoError(t, err)
	}
}

// TestFlushFromCallbackFailsFast: Flush inside a callback would wait for
// itself; it returns ErrFlushInCallback at once instead.
func TestFlushFromCallbackFailsFast(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{})
	got := make(chan error, 1)
	p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got <- p.Flush(ctx)
	})
	select {
	case err := <-got:
		require.ErrorIs(t, err, ErrFlushInCallback)
	case <-time.After(10 * time.Second):
		t.Fatal("the callback's Flush did not return")
	}
	require.NoError(t, p.Flush(context.Background()))
}

// TestLingeredBatchWaitsForTheBrokersAnswer: while a Produce request is in
// flight to the leader, a batch past Linger stays open and keeps taking
// records, so records that trickle in during a slow round trip share one
// batch instead of making one batch each.
func TestLingeredBatchWaitsForTheBrokersAnswer(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("pace", 1))
	// The answer comes long after the ten Sends below (about 50 ms of
	// them), however late their sleeps overshoot.
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Delay: 2 * time.Second, Times: 1})
	p := newProducer(t, c, Config{Linger: 2 * time.Millisecond})
	ctx := context.Background()

	first := p.Send(ctx, &Record{Topic: "pace", Value: []byte("first")})
	require.Eventually(t, func() bool { return p.Metrics().Producer.RequestsInFlight == 1 }, 5*time.Second, time.Millisecond)
	var fs []*Future
	for i := range 10 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "pace", Value: fmt.Appendf(nil, "late-%d", i)}))
		time.Sleep(5 * time.Millisecond) // more than Linger between records
	}
	waitAll(t, append([]*Future{first}, fs...))

	n, err := c.NumBatches("pace", 0)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the first record alone, then the ten that waited for its answer")
	recs, err := c.Records("pace", 0)
	require.NoError(t, err)
	require.Len(t, recs, 11)
	require.Equal(t, "late-9", string(recs[10].Value))
}

// TestQuietPartitionIsNotStarvedByABusyOne: a lingered batch waits for at
// most one answer from its broker, even when another partition keeps full
// batches in flight to it all the time.
func TestQuietPartitionIsNotStarvedByABusyOne(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("busy", 2))
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Delay: 20 * time.Millisecond})
	p := newProducer(t, c, Config{
		Linger:             2 * time.Millisecond,
		BatchSize:          1024, // the busy partition fills a batch every few Sends
		DisableIdempotence: true,
		Partitioner:        ManualPartitioner(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	busy := make([]byte, 400)
	wg.Go(func() {
		for ctx.Err() == nil {
			p.Send(ctx, &Record{Topic: "busy", Partition: 0, Value: busy})
			time.Sleep(50 * time.Microsecond)
		}
	})
	require.Eventually(t, func() bool { return p.Metrics().Producer.RequestsInFlight >= 3 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	md, err := p.Send(ctx, &Record{Topic: "busy", Partition: 1, Value: []byte("quiet")}).Wait(wctx)
	require.NoError(t, err, "the quiet record waited for the busy partition to stop")
	require.Equal(t, int32(1), md.Partition)
	// Linger, then at most one 20 ms answer, then its own 20 ms request
	// (behind at most 5 in flight).
	require.Less(t, time.Since(start), time.Second, "the quiet record waited for the busy partition to stop")
	require.Positive(t, p.Metrics().Producer.RequestsInFlight, "the busy partition was still busy")
}

// waitFor polls cond every 5ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
