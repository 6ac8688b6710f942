package interop

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaSendBeforeTopicExists is KIP-286 against a real cluster that
// does not auto-create topics (the 3-node one): records are sent, at a
// steady pace, to a topic that does not exist yet, an admin CreateTopics
// creates it 2 s after the first Send, and the Sends go on meanwhile and
// after. No Send waits for the topic: each returns in microseconds (the
// percentiles are logged; speed goals live in benchmarks). The test asserts
// bounds that only a Send blocking on metadata would break, whatever the
// machine's load: a p99 under 100 ms and a maximum under half the creation
// delay (two thirds of the Sends go before the topic exists, and each of
// them would wait for it). None of the records completes before the topic exists, and then
// every one is delivered, in Send order per partition.
func TestRealKafkaSendBeforeTopicExists(t *testing.T) {
	c := realKafka3(t)
	n := recordCount(20_000, 5_000)
	const createAfter, sendFor = 2 * time.Second, 3 * time.Second
	topic := uniqueTopic("samsa-late")
	admin := newKgoClient(t, c.addrs)
	p := newSamsaProducer(t, c.addrs, producer.Config{Compression: compression.LZ4})
	recs := makeSamsaRecords(topic, n)
	ctx := testContext(t)

	futs := make([]*producer.Future, n)
	took := make([]time.Duration, n)
	created := make(chan error, 1)
	var sentBefore int // records sent before CreateTopics went out
	start := time.Now()
	for i, r := range recs {
		if sentBefore == 0 && time.Since(start) >= createAfter {
			sentBefore = i
			for j, f := range futs[:i] {
				if _, done, err := f.Result(); done {
					t.Fatalf("record %d completed before its topic existed: %v", j, err)
				}
			}
			go func() { created <- createTopicWith(ctx, admin, topic, samsaPartitions, 3, nil) }()
		}
		// Pace the Sends over sendFor, so that some go before the topic
		// exists, some while it is being created, some after.
		if wait := time.Duration(i)*sendFor/time.Duration(n) - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
		t0 := time.Now()
		futs[i] = p.Send(ctx, r)
		took[i] = time.Since(t0)
	}
	require.Positive(t, sentBefore, "every Send was done before the topic was created")
	require.NoError(t, <-created)
	mds := waitAll(t, p, futs)
	require.NoError(t, p.Close(ctx))

	sorted := slices.Clone(took)
	slices.Sort(sorted)
	p50, p99, maxTook := sorted[n/2], sorted[n*99/100], sorted[n-1]
	t.Logf("%d Sends (%d before CreateTopics): p50 %d µs, p99 %d µs, max %d µs",
		n, sentBefore, p50.Microseconds(), p99.Microseconds(), maxTook.Microseconds())
	assert.Less(t, p99, 100*time.Millisecond, "Send p99 while the topic was missing or being created")
	assert.Less(t, maxTook, createAfter/2, "a Send waited for the topic")

	got := consumeAll(t, c.addrs, topic, samsaPartitions, n)
	checkDelivered(t, recs, mds, got, samsaPartitions, compression.LZ4)
}

// TestRealKafkaBrokerAutoCreatesTopic: with the broker's default
// auto.create.topics.enable=true (the 1-node cluster) and the producer's
// defaults (allow.auto.create.topics=true, like the Java producer), records
// for a topic nobody created are delivered: the broker creates the topic
// when the producer asks for its metadata.
func TestRealKafkaBrokerAutoCreatesTopic(t *testing.T) {
	c := realKafka(t)
	const n = 300
	topic := uniqueTopic("samsa-auto")
	// A producer that does not get the topic created fails its records
	// after MaxBlock instead of hanging the test.
	p := newSamsaProducer(t, c.addrs, producer.Config{MaxBlock: 10 * time.Second, DeliveryTimeout: 20 * time.Second})
	recs := makeSamsaRecords(topic, n)
	mds := sendAll(t, p, recs)
	require.NoError(t, p.Close(testContext(t)))

	partitions := c.partitionCount(t, topic)
	require.Positive(t, partitions)
	t.Logf("the broker created %s with %d partition(s)", topic, partitions)
	got := consumeAll(t, c.addrs, topic, partitions, n)
	checkDelivered(t, recs, mds, got, partitions, compression.None)
}

// TestRealKafkaUnknownTopicFailsFast: on a cluster with
// auto.create.topics.enable=false (the 3-node one), records for a topic
// that does not exist fail once they have waited MaxBlock for it (the Java
// client's max.block.ms for metadata), well before DeliveryTimeout, with an
// error that names the topic and says the record was not written; and the
// topic is not created.
func TestRealKafkaUnknownTopicFailsFast(t *testing.T) {
	c := realKafka3(t)
	const n = 100
	const maxBlock, deliveryTimeout = 2 * time.Second, 40 * time.Second
	topic := uniqueTopic("samsa-missing")
	p := newSamsaProducer(t, c.addrs, producer.Config{MaxBlock: maxBlock, DeliveryTimeout: deliveryTimeout})
	ctx := testContext(t)
	start := time.Now()
	futs := make([]*producer.Future, n)
	for i, r := range makeSamsaRecords(topic, n) {
		futs[i] = p.Send(ctx, r)
	}
	for i, f := range futs {
		_, err := f.Wait(ctx)
		require.Error(t, err, "record %d of a missing topic was delivered", i)
		elapsed := time.Since(start)
		if i == 0 {
			t.Logf("the first record failed after %v: %v", elapsed.Round(time.Millisecond), err)
			assert.GreaterOrEqual(t, elapsed, maxBlock*9/10, "failed before waiting MaxBlock for the topic")
		}
		require.Less(t, elapsed, deliveryTimeout/4, "record %d failed only after %v (MaxBlock %v, DeliveryTimeout %v)", i, elapsed, maxBlock, deliveryTimeout)
		require.Contains(t, err.Error(), topic, "record %d's error does not name the topic", i)
		require.NotErrorIs(t, err, producer.ErrOutcomeUnknown, "record %d was never sent", i)
	}
	require.NoError(t, p.Close(ctx))
	mt := c.topicMetadata(ctx, t, topic)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, mt.ErrorCode, "the topic must still not exist")
}

// TestRealKafkaCreateTopicsQuota is KIP-599 against a real broker (the
// 1-node cluster started with -quota, whose controller mutation rate for
// SAMSA_KAFKA_QUOTA_CLIENT_ID is a few partitions per second): a producer
// with that client id and AutoCreateTopics sends to many new topics at
// once, creating them itself with CreateTopics (with AutoCreateTopics its
// Metadata requests never let the broker create them). The broker
// answers THROTTLING_QUOTA_EXCEEDED to most of them; samsa must retry each
// no sooner than the throttle time the broker gave (checked in the
// producer's log), and in the end every topic exists with the requested
// partitions and every record is delivered.
func TestRealKafkaCreateTopicsQuota(t *testing.T) {
	c := realKafka(t)
	clientID := realEnv(t, "SAMSA_KAFKA_QUOTA_CLIENT_ID", "the 1-node cluster was started without -quota")
	// The quota is a rate over Kafka's 11 one-second windows (10 s at
	// first): 2 partitions/s admits 20 partitions at once. Ask for more.
	topics := recordCount(24, 12)
	const partitions = 3
	const perTopic = 50
	var logs testutil.SyncBuffer
	p := newSamsaProducer(t, c.addrs, producer.Config{
		ClientID:                    clientID,
		AutoCreateTopics:            true,
		DisableAutoTopicCreation:    true,
		AutoCreatePartitions:        partitions,
		AutoCreateReplicationFactor: 1,
		MaxBlock:                    2 * time.Minute,
		DeliveryTimeout:             3 * time.Minute,
		Logger:                      slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	prefix := uniqueTopic("samsa-quota")
	var names []string
	var recs []*producer.Record
	for i := range topics {
		name := prefix + "-" + string(rune('a'+i))
		names = append(names, name)
		recs = append(recs, makeSamsaRecords(name, perTopic)...)
	}
	ctx := realContext(t, 3*time.Minute)
	start := time.Now()
	futs := make([]*producer.Future, len(recs))
	for i, r := range recs {
		futs[i] = p.Send(ctx, r)
	}
	require.NoError(t, p.Flush(ctx))
	for i, f := range futs {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d (%s)", i, recs[i].Topic)
	}
	took := time.Since(start)
	stats := p.Metrics().Producer
	require.NoError(t, p.Close(ctx))

	for _, name := range names {
		assert.Equal(t, int32(partitions), c.partitionCount(t, name), "partitions of %s", name)
	}
	throttles := checkThrottledRetries(t, logs.String(), names)
	t.Logf("%d topics x %d partitions created in %v; %d CreateTopics answers were THROTTLING_QUOTA_EXCEEDED, throttled %v in all",
		topics, partitions, took.Round(time.Millisecond), throttles, stats.ThrottleTimeTotal.Round(time.Millisecond))
	assert.Positive(t, throttles, "the broker never throttled the topic creations: is the quota set for %s?", clientID)
	for _, name := range names {
		consumeAll(t, c.addrs, name, partitions, perTopic)
	}
}

// checkThrottledRetries reads the producer's JSON log and checks, for every
// topic, that after each "topic creation throttled" entry (KIP-599) the
// next attempt's outcome was logged no sooner than the throttle time later,
// and that one of the producer's CreateTopics for it succeeded (or found it
// created). It returns how many throttled answers there were.
func checkThrottledRetries(t *testing.T, log string, topics []string) int {
	t.Helper()
	type entry struct {
		Time     time.Time `json:"time"`
		Msg      string    `json:"msg"`
		Topic    string    `json:"topic"`
		Throttle int64     `json:"throttle"` // nanoseconds
		Err      string    `json:"err"`
	}
	byTopic := make(map[string][]entry)
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "log line %q", sc.Text())
		if e.Topic != "" && (strings.Contains(e.Msg, "throttled") || strings.Contains(e.Msg, "created topic") || strings.Contains(e.Msg, "cannot create")) {
			byTopic[e.Topic] = append(byTopic[e.Topic], e)
		}
	}
	require.NoError(t, sc.Err())
	throttled, failed := 0, 0
	defer func() {
		if failed > 0 {
			t.Logf("%d CreateTopics attempts failed otherwise and were retried", failed)
		}
	}()
	for _, topic := range topics {
		es := byTopic[topic]
		if !assert.NotEmpty(t, es, "no CreateTopics outcome logged for %s", topic) {
			continue
		}
		created := false
		for _, e := range es {
			switch {
			case e.Msg == "created topic":
				created = true
			case strings.Contains(e.Msg, "cannot create"):
				// Not a failure as such: samsa retries after a backoff.
				if failed++; failed == 1 {
					t.Logf("e.g. %s: %s at %s: %s", topic, e.Msg, e.Time.Format("15:04:05.000"), e.Err)
				}
			}
		}
		assert.True(t, created, "no CreateTopics of %s succeeded", topic)
		for i, e := range es[:len(es)-1] {
			if !strings.Contains(e.Msg, "throttled") {
				continue
			}
			throttled++
			if throttled == 1 {
				t.Logf("e.g. %s: THROTTLING_QUOTA_EXCEEDED with a throttle time of %v; the next attempt answered %v later",
					topic, time.Duration(e.Throttle), es[i+1].Time.Sub(e.Time))
			}
			// The next attempt was sent at least Throttle after this
			// answer, so its answer came later still. 10 ms of slack for
			// the producer's millisecond clock.
			next := es[i+1]
			if gap := next.Time.Sub(e.Time); gap < time.Duration(e.Throttle)-10*time.Millisecond {
				t.Errorf("%s: CreateTopics retried %v after a THROTTLING_QUOTA_EXCEEDED answer with a throttle time of %v",
					topic, gap, time.Duration(e.Throttle))
			}
		}
	}
	return throttled
}
