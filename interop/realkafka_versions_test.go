package interop

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
)

// The broker version matrix (issue 32): the same checks against every
// Apache Kafka release that teams run, each a real broker started by
// interop/kafka/start.sh -version V. SAMSA_KAFKA_MATRIX names them,
// space-separated VERSION=BOOTSTRAP pairs (BOOTSTRAP a comma-separated
// list), e.g. "2.8.2=127.0.0.1:9092 4.4.0=127.0.0.1:9192"; make test
// (interop/kafka/with-clusters.sh) sets it for 2.8, 3.9 and 4.4, and
// interop/kafka/matrix.sh for every version, one at a time. Each broker
// auto-creates topics (Kafka's default).

// matrixBroker is one broker of the matrix.
type matrixBroker struct {
	version string
	addrs   []string
}

// matrixBrokers returns the brokers of SAMSA_KAFKA_MATRIX, or skips the test.
func matrixBrokers(t *testing.T) []matrixBroker {
	t.Helper()
	v := realEnv(t, "SAMSA_KAFKA_MATRIX", "no broker version matrix (interop/kafka/matrix.sh; make test starts 2.8, 3.9 and 4.4)")
	var out []matrixBroker
	for _, f := range strings.Fields(v) {
		version, bootstrap, ok := strings.Cut(f, "=")
		require.True(t, ok && version != "" && bootstrap != "", "SAMSA_KAFKA_MATRIX: %q is not VERSION=BOOTSTRAP", f)
		out = append(out, matrixBroker{version, strings.Split(bootstrap, ",")})
	}
	return out
}

// releaseAtLeast reports whether version (X.Y.Z) is major.minor or later.
func releaseAtLeast(t *testing.T, version string, major, minor int) bool {
	t.Helper()
	parts := strings.SplitN(version, ".", 3)
	require.Len(t, parts, 3, "version %q", version)
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	require.NoError(t, err1)
	require.NoError(t, err2)
	return ma > major || (ma == major && mi >= minor)
}

// TestRealKafkaVersions runs, against each broker of SAMSA_KAFKA_MATRIX
// (subtests named by version, then by check; matrix.sh tabulates them):
//   - codecs/<codec>: idempotent produce (the default) with each of the five
//     codecs, read back by kgo field for field: key, value (null and empty
//     apart), headers in order, timestamp, partition and offset, in Send
//     order per partition, each batch with the codec and a producer id;
//   - headers: records with many, large, binary, null-valued and repeated
//     headers, and none beyond the sequence header, read back by kgo;
//   - parking: KIP-286, records sent to a topic that does not exist yet
//     (the producer's Metadata requests do not let the broker create it)
//     wait in the producer without failing, and are delivered once an
//     admin creates the topic;
//   - transactions: committed and aborted transactions read by a kgo
//     read_committed consumer (exactly the committed records), on the wire
//     with the transaction version the broker offers;
//   - missing features: what a user gets for what the broker lacks:
//     transaction version 2 (KIP-890, Kafka 4.0+) and client telemetry
//     (KIP-714, Kafka 3.7+ with a metrics plugin).
func TestRealKafkaVersions(t *testing.T) {
	for _, b := range matrixBrokers(t) {
		t.Run(b.version, func(t *testing.T) {
			c := &realCluster{addrs: b.addrs, dirVar: "SAMSA_KAFKA_MATRIX " + b.version}
			waitBrokerServes(t, c)
			t.Run("codecs", func(t *testing.T) {
				for _, codec := range codecs {
					t.Run(codec.String(), func(t *testing.T) { testVersionCodec(t, c, codec) })
				}
			})
			t.Run("headers", func(t *testing.T) { testVersionHeaders(t, c) })
			t.Run("parking", func(t *testing.T) { testVersionParking(t, c) })
			t.Run("transactions", func(t *testing.T) { testVersionTransactions(t, c, b.version) })
			t.Run("missing features", func(t *testing.T) { testVersionMissingFeatures(t, c, b.version) })
		})
	}
}

// waitBrokerServes waits until the broker's Metadata lists a broker: a
// ZooKeeper-mode broker logs "started" before its controller told it of
// itself.
func waitBrokerServes(t *testing.T, c *realCluster) {
	t.Helper()
	ctx := realContext(t, 60*time.Second)
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	for {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{} // none: the brokers and the controller only
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Brokers) > 0 && resp.ControllerID >= 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the broker at %v lists no broker in Metadata after 60 s (err %v)", c.addrs, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// testVersionCodec is idempotent produce with codec, read back by kgo.
func testVersionCodec(t *testing.T, c *realCluster, codec compression.Type) {
	checkNoLeak(t)
	n := recordCount(3000, 1000)
	topic := uniqueTopic("samsa-matrix-" + codec.String())
	c.createTopic(t, topic, samsaPartitions, 1, nil)
	recs := makeSamsaRecords(topic, n)
	p := newSamsaProducer(t, c.addrs, producer.Config{Compression: codec})
	mds := sendAll(t, p, recs)
	require.NoError(t, p.Close(testContext(t)))
	got := consumeAll(t, c.addrs, topic, samsaPartitions, n)
	checkDelivered(t, recs, mds, got, samsaPartitions, codec)
	requireIdempotentBatches(t, got)
}

// requireIdempotentBatches fails the test unless every record came in a
// batch with a producer id: the producer ran idempotently.
func requireIdempotentBatches(t *testing.T, got []*kgo.Record) {
	t.Helper()
	for _, r := range got {
		require.GreaterOrEqual(t, r.ProducerID, int64(0), "record at %d/%d: no producer id, not idempotent", r.Partition, r.Offset)
		require.GreaterOrEqual(t, r.ProducerEpoch, int16(0), "record at %d/%d", r.Partition, r.Offset)
	}
}

// testVersionHeaders sends records whose headers go beyond
// makeSamsaRecords' few: none but the sequence header, 100 headers,
// a 64 KiB header value, binary and UTF-8 keys and values, null values and
// repeated keys in an order that matters.
func testVersionHeaders(t *testing.T, c *realCluster) {
	checkNoLeak(t)
	const n = 200
	topic := uniqueTopic("samsa-matrix-headers")
	c.createTopic(t, topic, samsaPartitions, 1, nil)
	recs := makeSamsaRecords(topic, n)
	big := []byte(strings.Repeat("h", 64<<10))
	for i, r := range recs {
		seq := r.Headers[:1]
		switch i % 5 {
		case 0:
			r.Headers = seq // the sequence header only
		case 1:
			for j := range 100 {
				seq = append(seq, producer.Header{Key: "k" + strconv.Itoa(j%7), Value: []byte(strconv.Itoa(j))})
			}
			r.Headers = seq
		case 2:
			r.Headers = append(seq, producer.Header{Key: "big", Value: big})
		case 3:
			r.Headers = append(seq,
				producer.Header{Key: "ключ-キー", Value: []byte("значение")},
				producer.Header{Key: "bin", Value: []byte{0, 0xff, 0x80, 0}},
				producer.Header{Key: "bin", Value: nil})
		}
	}
	p := newSamsaProducer(t, c.addrs, producer.Config{Compression: compression.LZ4})
	mds := sendAll(t, p, recs)
	require.NoError(t, p.Close(testContext(t)))
	got := consumeAll(t, c.addrs, topic, samsaPartitions, n)
	checkDelivered(t, recs, mds, got, samsaPartitions, compression.LZ4)
}

// testVersionParking is KIP-286: records for a topic that does not exist
// park in the producer (not one completes), an admin creates the topic a
// second later, and every record is delivered in Send order. The producer
// does not let its Metadata requests create the topic
// (DisableAutoTopicCreation), so the broker's auto-creation plays no part.
func testVersionParking(t *testing.T, c *realCluster) {
	checkNoLeak(t)
	const n = 500
	topic := uniqueTopic("samsa-matrix-parked")
	p := newSamsaProducer(t, c.addrs, producer.Config{DisableAutoTopicCreation: true, Compression: compression.Zstd})
	recs := makeSamsaRecords(topic, n)
	ctx := testContext(t)
	futs := make([]*producer.Future, n)
	for i, r := range recs {
		futs[i] = p.Send(ctx, r)
	}
	time.Sleep(time.Second)
	for i, f := range futs {
		_, done, err := f.Result()
		require.False(t, done, "record %d completed before its topic existed: %v", i, err)
	}
	mt := c.topicMetadata(ctx, t, topic)
	require.NotZero(t, mt.ErrorCode, "the topic exists before CreateTopics: the producer's Metadata created it")
	c.createTopic(t, topic, samsaPartitions, 1, nil)
	mds := waitAll(t, p, futs)
	require.NoError(t, p.Close(ctx))
	got := consumeAll(t, c.addrs, topic, samsaPartitions, n)
	checkDelivered(t, recs, mds, got, samsaPartitions, compression.Zstd)
}

// testVersionTransactions runs the transaction test of kfake and the test
// broker (committed and aborted transactions, a read_committed kgo
// consumer sees exactly the committed records in Send order, a
// read_uncommitted one every record written) and checks the flow on the
// wire: transaction version 2 (no AddPartitionsToTxn, Produce v12, v13 from
// Kafka 4.1) where
// the broker finalizes it, else version 1 (AddPartitionsToTxn, Produce
// v11 or the broker's highest below).
func testVersionTransactions(t *testing.T, c *realCluster, version string) {
	checkNoLeak(t)
	level := txnVersionOf(t, c)
	if !releaseAtLeast(t, version, 4, 0) {
		require.Zero(t, level, "Kafka %s reports a finalized transaction.version", version)
	}
	wire := newWireCounter()
	testSamsaTransactions(t, realKafkaTxn(t, c, wire))
	n := wire.counts()
	t.Logf("Kafka %s, transaction.version %d: requests on the wire %v", version, level, n)
	if level >= 2 {
		require.Zero(t, n.keys(addPartitionsToTxnKey), "transaction version 2: no AddPartitionsToTxn: %v", n)
		// By topic id (v13) where the broker offers it (4.1+), as Java
		// 4.4 at version 2; else v12.
		want := int16(12)
		if releaseAtLeast(t, version, 4, 1) {
			want = 13
		}
		require.Equal(t, n.keys(produceKey), n[apiVersion{produceKey, want}], "every Produce at v%d: %v", want, n)
		return
	}
	require.Positive(t, n.keys(addPartitionsToTxnKey), "transaction version 1: AddPartitionsToTxn: %v", n)
	require.Zero(t, n[apiVersion{produceKey, 12}]+n[apiVersion{produceKey, 13}], "no Produce of version 2's flow: %v", n)
}

// testVersionMissingFeatures checks what a user gets, on each broker, for
// the features it lacks:
//   - transaction version 2 (KIP-890 part 2, Kafka 4.0+): before 4.0 a
//     transactional producer runs version 1 and says so (Debug), no error;
//   - client telemetry (KIP-714's GetTelemetrySubscriptions, Kafka 3.7+,
//     advertised only with a client metrics plugin): the producer pushes
//     nothing and logs at Debug that the broker does not offer it, naming
//     the Kafka release its API versions are those of; records are
//     unaffected.
func testVersionMissingFeatures(t *testing.T, c *realCluster, version string) {
	checkNoLeak(t)
	ctx := testContext(t)
	// No MaxVersions cap (conn's default caps Produce at v12): the
	// broker's own highest versions.
	cn, err := conn.Dial(ctx, c.addrs[0], conn.Config{MaxVersions: map[int16]int16{}})
	require.NoError(t, err)
	produceMax, telemetry := cn.MaxVersion(produceKey), cn.MaxVersion(getTelemetrySubscriptionsKey)
	level := cn.Features().Level("transaction.version")
	cn.Close()
	t.Logf("Kafka %s: Produce up to v%d, transaction.version %d, GetTelemetrySubscriptions v%d (-1: not offered)", version, produceMax, level, telemetry)
	want, ok := matrixProduceMax[version[:strings.LastIndex(version, ".")]]
	if ok {
		require.Equal(t, want, produceMax, "Kafka %s's Produce version", version)
	}

	var logs testutil.SyncBuffer
	topic := uniqueTopic("samsa-matrix-features")
	c.createTopic(t, topic, 1, 1, nil)
	p := newSamsaProducer(t, c.addrs, producer.Config{
		TransactionalID: uniqueTopic("samsa-matrix-features"),
		ClientID:        "samsa-matrix",
		Logger:          slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("v")}).Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, p.CommitTransaction(ctx))

	flow := "transactions run transaction version 1"
	if level >= 2 {
		flow = "transactions run transaction version 2"
	}
	waitFor(t, 10*time.Second, "the log says "+flow, func() bool { return strings.Contains(logs.String(), flow) })
	if telemetry < 0 {
		const line = "client metrics: the broker does not offer GetTelemetrySubscriptions"
		waitFor(t, 10*time.Second, "the log says "+line, func() bool { return strings.Contains(logs.String(), line) })
		said := findLine(logs.String(), line)
		t.Logf("Kafka %s without KIP-714, the producer logs: %s", version, said)
		require.Contains(t, said, "UNSUPPORTED_VERSION")
		require.Contains(t, said, "API versions are those of Kafka")
	}
	require.NoError(t, p.Close(ctx))
	require.Equal(t, []string{"v"}, readValues(t, c.addrs, topic, 1, kgo.ReadCommitted())[0])
}

// getTelemetrySubscriptionsKey is KIP-714's first request.
const getTelemetrySubscriptionsKey int16 = 71

// matrixProduceMax is the highest Produce version each release line of the
// matrix serves (what a broker's ApiVersions says of its release: 4.x
// answers carry no version string).
var matrixProduceMax = map[string]int16{"2.8": 9, "3.6": 9, "3.9": 11, "4.0": 12, "4.4": 13}
