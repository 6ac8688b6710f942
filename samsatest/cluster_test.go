package samsatest_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

func TestMain(m *testing.M) {
	// Producers without a Logger log Warn and above to slog.Default():
	// the tests' deliberate failures stay out of the output.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

// newProducer returns a producer on c that retries quickly, closed when
// the test ends (before the cluster, which Start registered first).
func newProducer(t *testing.T, c *samsatest.Cluster, cfg producer.Config) *producer.Producer {
	t.Helper()
	cfg.Brokers = c.Addrs()
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 5 * time.Millisecond
	}
	p, err := producer.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

func TestNewClusterConfig(t *testing.T) {
	cases := []struct {
		name    string
		cfg     samsatest.Config
		brokers int
		wantErr string // "" for success
	}{
		{"zero value", samsatest.Config{}, 3, ""},
		{"one broker", samsatest.Config{Brokers: 1}, 1, ""},
		{"negative brokers", samsatest.Config{Brokers: -1}, 0, "Brokers -1"},
		{"too many brokers", samsatest.Config{Brokers: 1001}, 0, "Brokers 1001"},
		{"negative partitions", samsatest.Config{DefaultPartitions: -2}, 0, "DefaultPartitions -2"},
		{"negative max message bytes", samsatest.Config{MaxMessageBytes: -1}, 0, "MaxMessageBytes -1"},
		{"bad topic name", samsatest.Config{Topics: map[string]int32{"a/b": 1}}, 0, `Topics: topic name "a/b" has an illegal character`},
		{"too many partitions", samsatest.Config{Topics: map[string]int32{"big": 20000}}, 0, "Topics: 20000 partitions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := samsatest.NewCluster(tc.cfg)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, samsatest.ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "testbroker", "no internal names in errors")
				assert.Nil(t, c)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			assert.Len(t, c.Addrs(), tc.brokers)
		})
	}
}

// Config.Topics are created with their partition counts, 0 meaning
// DefaultPartitions.
func TestConfigTopics(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{DefaultPartitions: 4, Topics: map[string]int32{"a": 2, "b": 0}})
	for topic, n := range map[string]int32{"a": 2, "b": 4} {
		for part := range n {
			hw, err := c.HighWatermark(topic, part)
			require.NoError(t, err, "%s[%d]", topic, part)
			assert.Zero(t, hw)
		}
		_, err := c.PartitionRecords(topic, n)
		assert.ErrorIs(t, err, samsatest.ErrUnknownTopic, "%s has %d partitions", topic, n)
	}
}

func TestCreateTopic(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 0))
	_, err := c.HighWatermark("t", 0)
	require.NoError(t, err, "0 partitions: DefaultPartitions, 1")
	_, err = c.HighWatermark("t", 1)
	require.ErrorIs(t, err, samsatest.ErrUnknownTopic)

	err = c.CreateTopic("t", 3)
	require.ErrorIs(t, err, samsatest.ErrTopicExists)
	assert.Equal(t, `samsatest: topic already exists: "t"`, err.Error())

	for _, name := range []string{"", "..", "has space", strings.Repeat("x", 250)} {
		err := c.CreateTopic(name, 1)
		require.Error(t, err, "%q", name)
		assert.True(t, strings.HasPrefix(err.Error(), "samsatest: "), err.Error())
		assert.NotContains(t, err.Error(), "testbroker")
	}

	_, err = c.Records("missing")
	require.ErrorIs(t, err, samsatest.ErrUnknownTopic)
	assert.Equal(t, "samsatest: unknown topic or partition: missing[0]", err.Error())
}

// What a producer sent comes back field by field: null and empty keys and
// values, headers (a null header value too), timestamps, partitions and
// offsets, and the batch's codec.
func TestRecordsRoundTrip(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"rt": 3}})
	p := newProducer(t, c, producer.Config{Compression: compression.LZ4, Partitioner: producer.ManualPartitioner()})
	ts := time.UnixMilli(1_700_000_000_123)
	big := []byte(strings.Repeat("compressible ", 20))
	sent := []*producer.Record{
		{Topic: "rt", Partition: 0, Key: []byte("k"), Value: big, Timestamp: ts},
		{Topic: "rt", Partition: 0, Key: nil, Value: nil, Timestamp: ts},
		{Topic: "rt", Partition: 2, Key: []byte{}, Value: []byte{}, Timestamp: ts,
			Headers: []producer.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: nil}}},
	}
	ctx := t.Context()
	for _, r := range sent {
		_, err := p.Send(ctx, r).Wait(ctx)
		require.NoError(t, err)
	}
	want := []samsatest.Record{
		{Partition: 0, Offset: 0, Timestamp: ts, Key: []byte("k"), Value: big, Compression: compression.LZ4},
		// Batches that lz4 would not make smaller are sent uncompressed.
		{Partition: 0, Offset: 1, Timestamp: ts, Compression: compression.None},
		{Partition: 2, Offset: 0, Timestamp: ts, Key: []byte{}, Value: []byte{}, Compression: compression.None,
			Headers: []producer.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: nil}}},
	}
	got, err := c.Records("rt")
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.True(t, want[i].Timestamp.Equal(got[i].Timestamp), "record %d: timestamp %v", i, got[i].Timestamp)
		got[i].Timestamp = want[i].Timestamp
		assert.Equal(t, want[i], got[i], "record %d", i)
	}
	assert.Nil(t, got[1].Key, "a null key stays nil")
	assert.NotNil(t, got[2].Key, "an empty key stays non-nil")

	p1, err := c.PartitionRecords("rt", 1)
	require.NoError(t, err)
	assert.Empty(t, p1)
	hw, err := c.HighWatermark("rt", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), hw)
}

func TestAutoCreateTopics(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		c := samsatest.Start(t, samsatest.Config{DefaultPartitions: 5}) // the default, as Kafka's
		p := newProducer(t, c, producer.Config{})
		_, err := p.Send(t.Context(), &producer.Record{Topic: "fresh", Value: []byte("v")}).Wait(t.Context())
		require.NoError(t, err)
		recs, err := c.Records("fresh")
		require.NoError(t, err)
		assert.Len(t, recs, 1)
		_, err = c.HighWatermark("fresh", 4)
		assert.NoError(t, err, "created with DefaultPartitions")
	})
	t.Run("off", func(t *testing.T) {
		c := samsatest.Start(t, samsatest.Config{DisableAutoTopicCreation: true})
		p := newProducer(t, c, producer.Config{MaxBlock: 300 * time.Millisecond})
		_, err := p.Send(t.Context(), &producer.Record{Topic: "forgotten", Value: []byte("v")}).Wait(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not present in metadata")
		_, err = c.Records("forgotten")
		assert.ErrorIs(t, err, samsatest.ErrUnknownTopic)
	})
}

// Start closes the cluster when the test ends: its ports stop listening.
func TestStartClosesOnCleanup(t *testing.T) {
	var addrs []string
	t.Run("inner", func(t *testing.T) {
		addrs = samsatest.Start(t, samsatest.Config{Brokers: 1}).Addrs()
		conn, err := net.Dial("tcp", addrs[0])
		require.NoError(t, err)
		conn.Close()
	})
	_, err := net.DialTimeout("tcp", addrs[0], time.Second)
	assert.Error(t, err, "closed after the subtest")
}

// fatalTB records Fatal instead of ending the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Fatal(args ...any) { f.fatal = args[0].(error).Error() }

func TestStartFailsTheTest(t *testing.T) {
	tb := &fatalTB{TB: t}
	c := samsatest.Start(tb, samsatest.Config{Brokers: -1})
	assert.Nil(t, c)
	assert.Contains(t, tb.fatal, "samsatest: invalid config")
}

func TestBrokerLifecycle(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
	p := newProducer(t, c, producer.Config{})
	ctx := t.Context()
	send := func() {
		t.Helper()
		_, err := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
		require.NoError(t, err)
	}
	send()

	leader, err := c.Leader("t", 0)
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(leader))
	moved, err := c.Leader("t", 0)
	require.NoError(t, err)
	assert.NotEqual(t, leader, moved, "the stopped broker's partitions move")
	send()

	err = c.MoveLeader("t", 0, leader)
	assert.ErrorIs(t, err, samsatest.ErrBrokerStopped)
	require.NoError(t, c.RestartBroker(leader))
	require.NoError(t, c.MoveLeader("t", 0, leader))
	send()
	now, _ := c.Leader("t", 0)
	assert.Equal(t, leader, now)

	recs, err := c.Records("t")
	require.NoError(t, err)
	assert.Len(t, recs, 3, "records survive leader changes")

	for _, err := range []error{c.StopBroker(7), c.RestartBroker(-1), c.MoveLeader("t", 0, 3)} {
		assert.ErrorIs(t, err, samsatest.ErrUnknownBroker)
	}
	_, err = c.Leader("t", 1)
	assert.ErrorIs(t, err, samsatest.ErrUnknownTopic)
	assert.ErrorIs(t, c.MoveLeader("nope", 0, 0), samsatest.ErrUnknownTopic)

	c.Close()
	c.Close() // idempotent
	assert.ErrorIs(t, c.RestartBroker(0), samsatest.ErrClosed)
}

func TestErrorCode(t *testing.T) {
	cases := []struct {
		code      samsatest.ErrorCode
		name      string
		retriable bool
	}{
		{0, "NONE", false},
		{samsatest.CorruptMessage, "CORRUPT_MESSAGE", true},
		{samsatest.UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true},
		{samsatest.LeaderNotAvailable, "LEADER_NOT_AVAILABLE", true},
		{samsatest.NotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true},
		{samsatest.RequestTimedOut, "REQUEST_TIMED_OUT", true},
		{samsatest.MessageTooLarge, "MESSAGE_TOO_LARGE", false},
		{samsatest.NotEnoughReplicas, "NOT_ENOUGH_REPLICAS", true},
		{samsatest.NotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true},
		{samsatest.TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", false},
		{samsatest.InvalidRecord, "INVALID_RECORD", false},
		{samsatest.ThrottlingQuotaExceeded, "THROTTLING_QUOTA_EXCEEDED", true},
		{30000, "UNKNOWN_ERROR_CODE_30000", false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.name, tc.code.String())
		assert.Equal(t, tc.retriable, tc.code.Retriable(), tc.name)
	}
}

// TestCommittedRecords: CommittedRecords sees what a read_committed
// consumer would: plain records and committed transactions, neither
// markers nor aborted records, and nothing from the first record of an
// open transaction on; Records sees everything, markers marked Control.
func TestCommittedRecords(t *testing.T) {
	const topic = "txn"
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{topic: 1, "other": 2}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain := newProducer(t, c, producer.Config{})
	txn := newProducer(t, c, producer.Config{TransactionalID: "samsatest-txn"})
	send := func(p *producer.Producer, v string) {
		t.Helper()
		_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte(v)}).Wait(ctx)
		require.NoError(t, err)
	}
	values := func(recs []samsatest.Record, err error) []string {
		t.Helper()
		require.NoError(t, err)
		var vs []string
		for _, r := range recs {
			if !r.Control {
				vs = append(vs, string(r.Value))
			}
		}
		return vs
	}

	send(plain, "p1")
	require.NoError(t, txn.BeginTransaction())
	send(txn, "c1")
	send(txn, "c2")
	require.NoError(t, txn.CommitTransaction(ctx))
	require.NoError(t, txn.BeginTransaction())
	send(txn, "a1")
	require.NoError(t, txn.AbortTransaction(ctx))
	send(plain, "p2")
	require.NoError(t, txn.BeginTransaction())
	send(txn, "o1")
	send(plain, "p3") // past the last stable offset while o1's transaction is open

	assert.Equal(t, []string{"p1", "c1", "c2", "p2"}, values(c.CommittedRecords(topic)), "o1's transaction is open")
	require.NoError(t, txn.CommitTransaction(ctx))
	assert.Equal(t, []string{"p1", "c1", "c2", "p2", "o1", "p3"}, values(c.CommittedRecords(topic)))

	all, err := c.Records(topic)
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "c1", "c2", "a1", "p2", "o1", "p3"}, values(all, nil), "Records: aborted records too")
	var markers, transactional int
	for _, r := range all {
		if r.Control {
			markers++
		} else if r.Transactional {
			transactional++
		}
	}
	assert.Equal(t, 3, markers, "a marker per transaction")
	assert.Equal(t, 4, transactional)

	p0, err := c.PartitionCommittedRecords(topic, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "c1", "c2", "p2", "o1", "p3"}, values(p0, nil))
	_, err = c.PartitionCommittedRecords(topic, 1)
	require.ErrorIs(t, err, samsatest.ErrUnknownTopic)

	recs, err := c.CommittedRecords("other")
	require.NoError(t, err)
	assert.Empty(t, recs)
	_, err = c.CommittedRecords("missing")
	require.ErrorIs(t, err, samsatest.ErrUnknownTopic)
}
