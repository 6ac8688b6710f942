package interop

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/producer"
)

// samsaBroker is a cluster that samsa's producer writes to in the samsa_*
// tests: kfake or internal/testbroker. The tests read it back only through
// kgo, so both are checked the same way.
type samsaBroker struct {
	addrs []string
	// createTopic creates a topic with the given number of partitions,
	// through the broker's own API.
	createTopic func(t *testing.T, name string, partitions int32)
	// kf is the kfake cluster, for fault control; nil for the test
	// broker.
	kf *kfake.Cluster
	// tb is the test broker, whose stored records a test may inspect; nil
	// for kfake.
	tb *testbroker.Cluster
}

// samsaBrokers are the broker implementations every samsa interop test runs
// against. Neither auto-creates topics: a topic exists only once the test
// creates it.
var samsaBrokers = []struct {
	name  string
	start func(t *testing.T) *samsaBroker
}{
	{"kfake", startKfake},
	{"testbroker", startTestbroker},
}

// startKfake starts a three-broker kfake cluster that the test's cleanup
// closes. Topics are created with a raw CreateTopics request sent through a
// kgo client, as an admin tool would.
func startKfake(t *testing.T) *samsaBroker {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	b := &samsaBroker{addrs: c.ListenAddrs(), kf: c}
	b.createTopic = func(t *testing.T, name string, partitions int32) {
		t.Helper()
		cl := newKgoClient(t, b.addrs)
		defer cl.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = partitions
		rt.ReplicationFactor = 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		require.Zero(t, resp.Topics[0].ErrorCode, "CreateTopics %s", name)
	}
	return b
}

// startTestbroker starts a three-broker internal/testbroker cluster that the
// test's cleanup closes.
func startTestbroker(t *testing.T) *samsaBroker {
	t.Helper()
	c := startCluster(t, testbroker.Config{})
	return &samsaBroker{
		addrs: c.Addrs(),
		tb:    c,
		createTopic: func(t *testing.T, name string, partitions int32) {
			t.Helper()
			require.NoError(t, c.CreateTopic(name, partitions))
		},
	}
}

// newKgoClient returns a kgo client seeded with addrs, with short backoffs;
// the test's cleanup closes it.
func newKgoClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(20 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// newSamsaProducer returns a samsa producer for addrs with cfg's settings,
// short retry backoffs and a delivery timeout below the test timeout, so
// that a lost record fails its future instead of hanging the test. The
// test's cleanup closes it; a test that checks Close's result calls Close
// itself first.
func newSamsaProducer(t *testing.T, addrs []string, cfg producer.Config) *producer.Producer {
	t.Helper()
	cfg.Brokers = addrs
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 20 * time.Millisecond
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = 200 * time.Millisecond
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 40 * time.Second
	}
	p, err := producer.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx) // already closed by a test that checks the result
	})
	return p
}

// seqHeader is the first header of every record makeSamsaRecords builds:
// the record's index in Send order, so that a consumer can match what it
// reads with what was sent, even for records with null keys and values.
const seqHeader = "seq"

// compressibleValue is long and repetitive, so that every codec shrinks
// even a batch holding just one such record: samsa sends a batch
// uncompressed when compressing would not make it smaller.
var compressibleValue = strings.Repeat("samsa interop ", 16)

// compressibleLen is the length from which a value is compressibleValue's:
// a record with a value at least this long must arrive compressed.
const compressibleLen = 100

// makeSamsaRecords returns n records for topic covering what a record can
// hold: null, empty and repeated keys; null, empty and long values; no
// header beyond seq, a null header value, an empty header value and key,
// and repeated header keys whose order matters; and explicit timestamps
// with a sub-millisecond part that the wire drops.
func makeSamsaRecords(topic string, n int) []*producer.Record {
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	recs := make([]*producer.Record, n)
	for i := range recs {
		r := &producer.Record{
			Topic:     topic,
			Timestamp: base.Add(time.Duration(i)*time.Millisecond + 123*time.Microsecond),
			Headers:   []producer.Header{{Key: seqHeader, Value: []byte(strconv.Itoa(i))}},
		}
		switch {
		case i%7 == 0: // null key: the sticky partitioner places it
		case i%13 == 3:
			r.Key = []byte{} // an empty key is a key: murmur2 of nothing
		default:
			r.Key = []byte("key-" + strconv.Itoa(i%50))
		}
		switch i % 11 {
		case 0: // null value (a tombstone)
		case 5:
			r.Value = []byte{}
		default:
			r.Value = []byte(strconv.Itoa(i) + " " + compressibleValue)
		}
		switch i % 4 {
		case 1:
			r.Headers = append(r.Headers, producer.Header{Key: "null", Value: nil})
		case 2:
			r.Headers = append(r.Headers,
				producer.Header{Key: "a", Value: []byte("1")},
				producer.Header{Key: "b", Value: nil},
				producer.Header{Key: "a", Value: []byte("2")})
		case 3:
			r.Headers = append(r.Headers,
				producer.Header{Key: "empty", Value: []byte{}},
				producer.Header{Key: "", Value: []byte("empty key")})
		}
		recs[i] = r
	}
	return recs
}

// sendAll sends recs with p in order, flushes, and returns every record's
// metadata; it fails the test if any record fails.
func sendAll(t *testing.T, p *producer.Producer, recs []*producer.Record) []producer.RecordMetadata {
	t.Helper()
	ctx := testContext(t)
	futs := make([]*producer.Future, len(recs))
	for i, r := range recs {
		futs[i] = p.Send(ctx, r)
	}
	return waitAll(t, p, futs)
}

// waitAll flushes p and waits for every future, failing the test on the
// first failed record.
func waitAll(t *testing.T, p *producer.Producer, futs []*producer.Future) []producer.RecordMetadata {
	t.Helper()
	ctx := testContext(t)
	require.NoError(t, p.Flush(ctx))
	mds := make([]producer.RecordMetadata, len(futs))
	for i, f := range futs {
		md, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
		mds[i] = md
	}
	return mds
}

// consumeAll reads topic from the start with a fresh kgo consumer until it
// has n records, then checks with ListOffsets that the partitions hold no
// more than that (a duplicate appended after the last record read would
// otherwise go unseen). It fails the test if the records do not come within
// the test's context or if a fetch fails.
func consumeAll(t *testing.T, addrs []string, topic string, partitions int32, n int) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	cl := newKgoClient(t, addrs,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	out := pollN(ctx, t, cl, topic, n)
	require.Len(t, out, n, "the consumer read more records than were sent")

	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // the end offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	var total int64
	for _, t2 := range resp.Topics {
		for _, p := range t2.Partitions {
			require.Zero(t, p.ErrorCode, "ListOffsets %s/%d", topic, p.Partition)
			total += p.Offset
		}
	}
	require.Equal(t, int64(n), total, "records stored in %s (end offsets summed)", topic)
	return out
}

// describeBytes shows a byte slice with its nil-ness, which
// assert.Equal does not tell apart from empty.
func describeBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

// sameBytes reports whether a and b are equal, a nil slice being different
// from an empty one (Kafka keeps null and empty apart).
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// checkDelivered checks that got, read back by kgo, is exactly sent, with
// mds the metadata samsa returned for each sent record:
//   - every record read once, none missing, matched by its seq header;
//   - key, value (null and empty kept apart), headers in order, timestamp
//     in milliseconds;
//   - partition and offset equal to the record's metadata, and for a keyed
//     record the partition murmur2 gives (producer.KeyPartition);
//   - in each partition, offsets 0, 1, 2... in Send order;
//   - every record with a compressible value in a batch compressed with
//     codec, and no record in a batch with another codec.
//
// It reports at most a few mismatches, then how many there were.
func checkDelivered(t *testing.T, sent []*producer.Record, mds []producer.RecordMetadata, got []*kgo.Record, partitions int32, codec compression.Type) {
	t.Helper()
	var problems int
	report := func(format string, args ...any) {
		problems++
		if problems <= 10 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		if problems > 10 {
			t.Errorf("... %d mismatches in all", problems)
		}
	}()

	require.Len(t, got, len(sent))
	seen := make([]bool, len(sent))
	byPartition := make(map[int32][]*kgo.Record)
	index := make(map[*kgo.Record]int, len(got))
	for _, r := range got {
		if len(r.Headers) == 0 || r.Headers[0].Key != seqHeader {
			report("record at %d/%d has no %s header first: %v", r.Partition, r.Offset, seqHeader, r.Headers)
			continue
		}
		i, err := strconv.Atoi(string(r.Headers[0].Value))
		if err != nil || i < 0 || i >= len(sent) {
			report("record at %d/%d has a bad %s header %q", r.Partition, r.Offset, seqHeader, r.Headers[0].Value)
			continue
		}
		if seen[i] {
			report("record %d read twice (again at %d/%d)", i, r.Partition, r.Offset)
			continue
		}
		seen[i] = true
		index[r] = i
		byPartition[r.Partition] = append(byPartition[r.Partition], r)

		want, md := sent[i], mds[i]
		if !sameBytes(want.Key, r.Key) {
			report("record %d: key %s, want %s", i, describeBytes(r.Key), describeBytes(want.Key))
		}
		if !sameBytes(want.Value, r.Value) {
			report("record %d: value %s, want %s", i, describeBytes(r.Value), describeBytes(want.Value))
		}
		if !sameHeaders(want.Headers, r.Headers) {
			report("record %d: headers %s, want %s", i, describeKgoHeaders(r.Headers), describeHeaders(want.Headers))
		}
		if got, want := r.Timestamp.UnixMilli(), want.Timestamp.UnixMilli(); got != want {
			report("record %d: timestamp %d ms, want %d ms", i, got, want)
		}
		if r.Partition != md.Partition || r.Offset != md.Offset {
			report("record %d: read at %d/%d, samsa reported %d/%d", i, r.Partition, r.Offset, md.Partition, md.Offset)
		}
		if want.Key != nil {
			if p := producer.KeyPartition(want.Key, partitions); r.Partition != p {
				report("record %d: key %s in partition %d, murmur2 gives %d", i, describeBytes(want.Key), r.Partition, p)
			}
		}
		switch c := compression.Type(r.Attrs.CompressionType()); {
		case c != codec && c != compression.None:
			report("record %d: batch codec %v, want %v", i, c, codec)
		case c != codec && len(want.Value) >= compressibleLen:
			report("record %d: batch sent uncompressed although its value compresses well, want %v", i, codec)
		}
	}
	for i, ok := range seen {
		if !ok {
			report("record %d (sent to %d/%d) never read", i, mds[i].Partition, mds[i].Offset)
		}
	}
	for p, recs := range byPartition {
		slices.SortFunc(recs, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
		for j, r := range recs {
			if r.Offset != int64(j) {
				report("partition %d: record %d at offset %d, want %d (a gap or a duplicate)", p, index[r], r.Offset, j)
				break
			}
			if j > 0 && index[recs[j-1]] > index[r] {
				report("partition %d: record %d stored before record %d, against Send order", p, index[recs[j-1]], index[r])
				break
			}
		}
	}
}

// sameHeaders reports whether kgo read the headers samsa was given, in
// order, with null values kept apart from empty ones.
func sameHeaders(want []producer.Header, got []kgo.RecordHeader) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i].Key != got[i].Key || !sameBytes(want[i].Value, got[i].Value) {
			return false
		}
	}
	return true
}

func describeHeaders(hs []producer.Header) string {
	var s []string
	for _, h := range hs {
		s = append(s, strconv.Quote(h.Key)+"="+describeBytes(h.Value))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func describeKgoHeaders(hs []kgo.RecordHeader) string {
	var s []string
	for _, h := range hs {
		s = append(s, strconv.Quote(h.Key)+"="+describeBytes(h.Value))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// codecs are the codecs the samsa interop tests produce with.
var codecs = []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd}

// topicName returns a topic name for a subtest, unique within its cluster.
func topicName(prefix string, c compression.Type) string {
	return fmt.Sprintf("%s-%v", prefix, c)
}
