package interop

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// txnEndValue marks the last, committed, transaction of
// produceTransactions on every partition, so that a consumer knows it has
// read everything.
const txnEndValue = "end"

// produceTransactions runs n transactions of kgo's transactional producer
// against the test broker, records spread over partitions, committing
// those where commit(i) and aborting the others, then one committed
// transaction with txnEndValue on every partition. It returns the values
// committed and all data values, per partition in offset order.
func produceTransactions(t *testing.T, c *testbroker.Cluster, topic string, partitions int32, n int, commit func(int) bool, txnID string) (committed, all map[int32][]string) {
	return produceTransactionsWith(t, c, topic, partitions, n, commit, txnID, nil)
}

// produceTransactionsWith is produceTransactions with between(i) run
// before transaction i.
//
// A transaction that kgo fails with its "unknown broker" error is aborted
// and run again on a new client (at most kgoUnknownBrokerRetries times):
// that error is kgo's, not the broker's (see isKgoUnknownBroker). The
// records of the failed attempt that reached the log count among all (a
// read_uncommitted consumer sees them), never among committed.
func produceTransactionsWith(t *testing.T, c *testbroker.Cluster, topic string, partitions int32, n int, commit func(int) bool, txnID string, between func(i int)) (committed, all map[int32][]string) {
	t.Helper()
	ctx := testContext(t)
	connect := func() *kgo.Client {
		return newClient(t, c, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second))
	}
	cl := connect()
	committed, all = map[int32][]string{}, map[int32][]string{}
	try := func(ok bool, recs []*kgo.Record) error {
		require.NoError(t, cl.BeginTransaction())
		for _, r := range recs {
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
			all[r.Partition] = append(all[r.Partition], string(r.Value))
		}
		require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(ok)))
		return nil
	}
	run := func(ok bool, recs []*kgo.Record) {
		err := try(ok, recs)
		for retries := 0; isKgoUnknownBroker(err) && retries < kgoUnknownBrokerRetries; retries++ {
			// The client's producer ID stays failed with the error:
			// abort (a new client's InitProducerID aborts anyway if
			// this does not), and start over.
			t.Logf("kgo failed a transaction with %q; running it again on a new client", err)
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			cl.Close()
			cl = connect()
			err = try(ok, recs)
		}
		require.NoError(t, err)
		if ok {
			for _, r := range recs {
				committed[r.Partition] = append(committed[r.Partition], string(r.Value))
			}
		}
	}
	for i := 0; i < n; i++ {
		if between != nil {
			between(i)
		}
		var recs []*kgo.Record
		for j := 0; j < 3+i%5; j++ {
			recs = append(recs, &kgo.Record{Partition: int32(j) % partitions, Value: []byte(fmt.Sprintf("t%d-r%d", i, j))})
		}
		run(commit(i), recs)
	}
	var ends []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		ends = append(ends, &kgo.Record{Partition: p, Value: []byte(txnEndValue)})
	}
	run(true, ends)
	cl.Close()
	return committed, all
}

// kgoUnknownBrokerRetries bounds the transactions produceTransactionsWith
// runs again after kgo's "unknown broker".
const kgoUnknownBrokerRetries = 3

// isKgoUnknownBroker reports kgo's unexported errUnknownBroker ("unknown
// broker"), which a record gets from a race in kgo v1.22.3, not from an
// answer of the broker: at transaction version 1, when the transaction
// coordinator's broker stops, kgo keeps its cached coordinator until a
// Metadata answer drops that broker, and its AddPartitionsToTxn sharder
// picks the stale coordinator, then resolves the broker again after the
// Metadata that dropped it landed: errUnknownBroker, which neither the
// sharder nor sink.doTxnReq retries (doTxnReq's produce counterpart,
// handleReqClientErr, does), so the producer ID fails with it. Kafka's
// Metadata drops a stopped broker too, so a real cluster triggers it alike.
func isKgoUnknownBroker(err error) bool {
	return err != nil && err.Error() == "unknown broker"
}

// consumeUntilEnds reads topic from the start until every partition has
// given txnEndValue, and returns the values per partition in offset order.
func consumeUntilEnds(t *testing.T, c *testbroker.Cluster, topic string, partitions int32, opts ...kgo.Opt) map[int32][]string {
	t.Helper()
	ctx := testContext(t)
	cl := newClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
	defer cl.Close()
	got := map[int32][]string{}
	ends := 0
	for ends < int(partitions) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d ends: %v", ends, partitions, got)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch error on %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			if string(r.Value) == txnEndValue {
				ends++
			}
		})
	}
	return got
}

// TestKgoTransactionsAgainstTestBroker: kgo's transactional producer
// commits some transactions and aborts others on the test broker; a
// read_committed kgo consumer sees exactly the committed records, in
// order, and a read_uncommitted one every data record (the markers are
// never records to either).
func TestKgoTransactionsAgainstTestBroker(t *testing.T) {
	const topic, partitions = "kgo-txn", 3
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic(topic, partitions))
	committed, all := produceTransactions(t, c, topic, partitions, 12, func(i int) bool { return i%3 != 1 }, "kgo-txn-1")
	require.NotEqual(t, committed, all, "some transactions aborted")
	assert.Equal(t, committed, consumeUntilEnds(t, c, topic, partitions, kgo.FetchIsolationLevel(kgo.ReadCommitted())), "read_committed")
	assert.Equal(t, all, consumeUntilEnds(t, c, topic, partitions), "read_uncommitted")

	// The broker wrote one marker per partition and transaction.
	for p := int32(0); p < partitions; p++ {
		recs, err := c.Records(topic, p)
		require.NoError(t, err)
		markers := 0
		for _, r := range recs {
			if r.Control {
				markers++
			}
		}
		assert.Equal(t, 13, markers, "partition %d: a marker per transaction (every one touches every partition)", p)
	}
}

// TestKgoTransactionsUnderCoordinatorFaults: kgo's transactions still
// commit exactly the committed records when the coordinator writes its
// markers late (CONCURRENT_TRANSACTIONS for the next transaction's
// AddPartitionsToTxn at transaction version 1, NOT_ENOUGH_REPLICAS for
// its first Produce at version 2), moves to another broker between
// transactions (NOT_COORDINATOR), or answers with a retriable error once;
// at both transaction versions (kgo reads transaction.version too).
func TestKgoTransactionsUnderCoordinatorFaults(t *testing.T) {
	const txnID = "kgo-txn-faults"
	cases := []struct {
		name    string
		cfg     testbroker.Config
		between func(c *testbroker.Cluster, i int)
	}{
		{"markers written late", testbroker.Config{TransactionMarkerDelay: 30 * time.Millisecond}, nil},
		{"coordinator moves", testbroker.Config{}, func(c *testbroker.Cluster, i int) {
			to := (c.Coordinator(testbroker.CoordinatorTransaction, txnID) + 1) % 3
			require.NoError(t, c.MoveCoordinator(testbroker.CoordinatorTransaction, txnID, to))
		}},
		{"coordinator stops", testbroker.Config{}, func(c *testbroker.Cluster, i int) {
			if i == 3 {
				require.NoError(t, c.StopBroker(c.Coordinator(testbroker.CoordinatorTransaction, txnID)))
			}
		}},
		{"errors once per API", testbroker.Config{}, func(c *testbroker.Cluster, i int) {
			// COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
			// CONCURRENT_TRANSACTIONS, on AddPartitionsToTxn (only
			// sent at transaction version 1) and EndTxn.
			keys := []int16{24, 26, 24, 26}
			codes := []int16{14, 16, 51, 51}
			if i < len(keys) {
				c.Intercept(testbroker.Interceptor{Keys: []int16{keys[i]}, Times: 1, ErrorCode: codes[i]})
			}
		}},
	}
	for _, level := range []int16{1, 2} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("transaction.version %d/%s", level, tc.name), func(t *testing.T) {
				cfg := tc.cfg
				cfg.TransactionVersion = level
				testKgoTransactionsUnderCoordinatorFaults(t, cfg, level, tc.name, tc.between)
			})
		}
	}
}

func testKgoTransactionsUnderCoordinatorFaults(t *testing.T, cfg testbroker.Config, level int16, name string, between0 func(c *testbroker.Cluster, i int)) {
	const partitions = 2
	const txnID = "kgo-txn-faults"
	c := startCluster(t, cfg)
	topic := "kgo-txn-" + strings.ReplaceAll(name, " ", "-")
	require.NoError(t, c.CreateTopic(topic, partitions))
	// The answers that say the last transaction is still being
	// completed: AddPartitionsToTxn's CONCURRENT_TRANSACTIONS at
	// version 1, a Produce's at version 2 (the broker could not add
	// the partition yet).
	var concurrent atomic.Int64
	c.Intercept(testbroker.Interceptor{Keys: []int16{0, 24}, After: true, Rewrite: func(resp kmsg.Response) {
		switch r := resp.(type) {
		case *kmsg.AddPartitionsToTxnResponse:
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode == 51 {
						concurrent.Add(1)
					}
				}
			}
		case *kmsg.ProduceResponse:
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode == 51 {
						concurrent.Add(1)
					}
				}
			}
		}
	}})
	var between func(int)
	if between0 != nil {
		between = func(i int) { between0(c, i) }
	}
	committed, all := produceTransactionsWith(t, c, topic, partitions, 8, func(i int) bool { return i%2 == 0 }, txnID, between)
	assert.Equal(t, committed, consumeUntilEnds(t, c, topic, partitions, kgo.FetchIsolationLevel(kgo.ReadCommitted())), "read_committed")
	assert.Equal(t, all, consumeUntilEnds(t, c, topic, partitions), "read_uncommitted")
	if cfg.TransactionMarkerDelay > 0 {
		assert.Positive(t, concurrent.Load(), "kgo met the last transaction's completion and retried (level %d)", level)
	}
}

// TestKgoTransactionFencing: a second kgo producer with the same
// transactional id fences the first, whose next transaction fails; its
// records never reach a read_committed consumer.
func TestKgoTransactionFencing(t *testing.T) {
	const topic = "kgo-txn-fence"
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic(topic, 1))
	ctx := testContext(t)
	opts := []kgo.Opt{kgo.TransactionalID("fence"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(20 * time.Second)}
	old := newClient(t, c, opts...)
	require.NoError(t, old.BeginTransaction())
	require.NoError(t, old.ProduceSync(ctx, &kgo.Record{Value: []byte("old-1")}).FirstErr())
	require.NoError(t, old.EndTransaction(ctx, kgo.TryCommit))

	cur := newClient(t, c, opts...)
	require.NoError(t, cur.BeginTransaction())
	require.NoError(t, cur.ProduceSync(ctx, &kgo.Record{Value: []byte("new-1")}).FirstErr())

	require.NoError(t, old.BeginTransaction())
	perr := old.ProduceSync(ctx, &kgo.Record{Value: []byte("old-2")}).FirstErr()
	eerr := old.EndTransaction(ctx, kgo.TryCommit)
	fenced := func(err error) bool {
		return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
	}
	assert.True(t, fenced(perr) || fenced(eerr), "the old producer is fenced: produce %v, end %v", perr, eerr)
	require.NoError(t, cur.EndTransaction(ctx, kgo.TryCommit))

	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	got := pollN(ctx, t, cl, topic, 2)
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	assert.Equal(t, []string{"old-1", "new-1"}, values)
}

// TestKcatReadCommittedFromKgoTransactions: librdkafka (kcat) consumes
// kgo's transactions on the test broker with isolation.level
// read_committed and sees exactly the committed records.
func TestKcatReadCommittedFromKgoTransactions(t *testing.T) {
	kcatPath(t)
	const topic, partitions = "kcat-txn", 2
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic(topic, partitions))
	committed, all := produceTransactions(t, c, topic, partitions, 8, func(i int) bool { return i%2 == 0 }, "kcat-txn-1")
	brokers := strings.Join(c.Addrs(), ",")
	read := func(isolation string) []string {
		out := runKcat(t, "", "-C", "-b", brokers, "-t", topic, "-o", "beginning", "-e", "-q",
			"-X", "isolation.level="+isolation, "-f", "%p %s\\n")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		return lines
	}
	want := func(m map[int32][]string) []string {
		var lines []string
		for p, vs := range m {
			for _, v := range vs {
				lines = append(lines, fmt.Sprintf("%d %s", p, v))
			}
		}
		sort.Strings(lines)
		return lines
	}
	assert.Equal(t, want(committed), read("read_committed"))
	assert.Equal(t, want(all), read("read_uncommitted"))
}

// TestKgoGroupTransactSession runs kgo's consume-transform-produce loop
// (GroupTransactSession: a consumer group, AddOffsetsToTxn and
// TxnOffsetCommit with KIP-447's group metadata) against the test broker:
// every input record reaches the output exactly once at read_committed,
// and the group's committed offsets end at the input's end.
func TestKgoGroupTransactSession(t *testing.T) {
	const in, out, group, n = "etl-in", "etl-out", "etl", 300
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic(in, 2))
	require.NoError(t, c.CreateTopic(out, 2))
	ctx := testContext(t)
	prod := newClient(t, c, kgo.DefaultProduceTopic(in))
	for i := 0; i < n; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}).FirstErr())
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.Addrs()...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.TransactionalID("etl-1"), kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.DefaultProduceTopic(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.SessionTimeout(6*time.Second),
	)
	require.NoError(t, err)
	defer sess.Close()
	done, aborted := 0, false
	for done < n {
		fs := sess.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "transformed %d of %d", done, n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch error on %s/%d: %v", topic, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		// Abort the first transaction: its output never shows, and the
		// session rewinds to the committed offsets.
		try := kgo.TryCommit
		if !aborted {
			try, aborted = kgo.TryAbort, true
		}
		require.NoError(t, sess.Begin())
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("t-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if try == kgo.TryCommit {
					assert.NoError(t, err)
				}
			})
		}
		committed, err := sess.End(ctx, try)
		require.NoError(t, err)
		if committed {
			done += len(recs)
		}
	}
	sess.Close()

	got := map[string]int{}
	for _, r := range consumeN(t, c, out, n, kgo.FetchIsolationLevel(kgo.ReadCommitted())) {
		got[string(r.Value)]++
	}
	for i := 0; i < n; i++ {
		assert.Equal(t, 1, got["t-v"+strconv.Itoa(i)], "record %d exactly once", i)
	}
	total := int64(0)
	for p := int32(0); p < 2; p++ {
		off, ok := c.CommittedOffset(group, in, p)
		require.True(t, ok, "partition %d committed", p)
		total += off
	}
	assert.Equal(t, int64(n), total, "committed offsets end at the input's end")
}
