package interop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	samsakerr "github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/producer"
)

// startKfakeTxn starts a three-broker kfake cluster (which implements
// transactions: coordinators, markers, the last stable offset) with topics
// of 3 partitions.
func startKfakeTxn(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topics...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// setKfakeTxnVersion finalizes kfake's transaction.version at level (its
// default is 2, as Kafka 4.4's), with UpdateFeatures, before a producer
// connects.
func setKfakeTxnVersion(t *testing.T, c *kfake.Cluster, level int16) {
	t.Helper()
	adm := kadm.NewClient(newKgoClient(t, c.ListenAddrs()))
	res, err := adm.UpdateFeatures(testContext(t), false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: 2})
	require.NoError(t, err)
	require.NoError(t, res.Error())
}

// forEachTxnVersion runs f as a subtest at transaction versions 1 and 2.
func forEachTxnVersion(t *testing.T, f func(t *testing.T, level int16)) {
	for _, level := range []int16{1, 2} {
		t.Run(fmt.Sprintf("transaction.version %d", level), func(t *testing.T) { f(t, level) })
	}
}

// txnCluster is a cluster the main transaction tests run against. start
// returns the bootstrap addresses of a cluster with the given topics, of 3
// partitions (closed by the test's cleanup, if the test started it); unique
// turns a topic or transactional id name into one no earlier run used (the
// identity for a cluster the test starts).
type txnCluster struct {
	name   string
	start  func(t *testing.T, topics ...string) []string
	unique func(string) string
	// dialer, if set, opens the samsa producers' connections (a test
	// counting the requests on the wire).
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// producer is newSamsaProducer with the cluster's dialer.
func (cl txnCluster) producer(t *testing.T, addrs []string, cfg producer.Config) *producer.Producer {
	t.Helper()
	cfg.Dialer = cl.dialer
	return newSamsaProducer(t, addrs, cfg)
}

// txnProducer is newTxnProducer with the cluster's dialer.
func (cl txnCluster) txnProducer(t *testing.T, addrs []string, id string) *producer.Producer {
	t.Helper()
	return cl.producer(t, addrs, producer.Config{TransactionalID: id, Linger: 2 * time.Millisecond})
}

// txnClusters: kfake and samsa's own test broker at transaction versions 2
// (its default, as Kafka 4.4) and 1, three brokers each (real Kafka:
// realkafka_txn_test.go).
var txnClusters = []txnCluster{
	{name: "kfake", start: func(t *testing.T, topics ...string) []string { return startKfakeTxn(t, topics...).ListenAddrs() }, unique: same},
	{name: "testbroker", start: func(t *testing.T, topics ...string) []string {
		c := startCluster(t, testbroker.Config{})
		for _, topic := range topics {
			require.NoError(t, c.CreateTopic(topic, 3))
		}
		return c.Addrs()
	}, unique: same},
	{name: "testbroker-v1", start: func(t *testing.T, topics ...string) []string {
		c := startCluster(t, testbroker.Config{TransactionVersion: 1})
		for _, topic := range topics {
			require.NoError(t, c.CreateTopic(topic, 3))
		}
		return c.Addrs()
	}, unique: same},
}

func same(name string) string { return name }

func newTxnProducer(t *testing.T, addrs []string, id string) *producer.Producer {
	t.Helper()
	return newSamsaProducer(t, addrs, producer.Config{TransactionalID: id, Linger: 2 * time.Millisecond})
}

// readValues reads topic from the start with the given isolation level
// until want records arrived, then for another moment, so that records past
// want show up too; it returns the values per partition in offset order.
func readValues(t *testing.T, addrs []string, topic string, want int, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	ctx := testContext(t)
	cl := newKgoClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(50*time.Millisecond))
	defer cl.Close()
	out := map[int32][]string{}
	n := 0
	var settle <-chan time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			n++
		})
		if n >= want && settle == nil {
			settle = time.After(500 * time.Millisecond)
		}
		select {
		case <-settle:
			return out
		case <-ctx.Done():
			t.Fatalf("read %d of %d records of %s", n, want, topic)
		default:
		}
	}
}

// TestSamsaTransactions commits some transactions and aborts others
// against kfake and against the test broker: a read_committed kgo
// consumer sees exactly the committed records, in Send order per
// partition, and a read_uncommitted one every data record that was
// written.
func TestSamsaTransactions(t *testing.T) {
	for _, cl := range txnClusters {
		t.Run(cl.name, func(t *testing.T) { testSamsaTransactions(t, cl) })
	}
}

func testSamsaTransactions(t *testing.T, cl txnCluster) {
	topic := cl.unique("txn")
	addrs := cl.start(t, topic)
	p := cl.txnProducer(t, addrs, cl.unique("samsa-txn-1"))
	ctx := testContext(t)

	// Outside a transaction a record fails, and takes nothing.
	_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("outside")}).Wait(ctx)
	require.ErrorIs(t, err, producer.ErrNoTransaction)
	require.ErrorIs(t, p.CommitTransaction(ctx), producer.ErrNoTransaction)

	var committed []string
	written := 0
	for i := range 7 {
		require.NoError(t, p.BeginTransaction())
		require.ErrorIs(t, p.BeginTransaction(), producer.ErrTransactionInProgress)
		var futs []*producer.Future
		var vals []string
		for j := range 30 {
			v := fmt.Sprintf("t%d-%d", i, j)
			vals = append(vals, v)
			futs = append(futs, p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(j % 5)), Value: []byte(v)}))
		}
		commit := i%2 == 0
		if commit {
			require.NoError(t, p.CommitTransaction(ctx), "transaction %d", i)
			committed = append(committed, vals...)
		} else {
			if i == 3 {
				// Let some of this one reach the broker before it aborts.
				_, _ = futs[len(futs)-1].Wait(ctx)
			}
			require.NoError(t, p.AbortTransaction(ctx), "transaction %d", i)
		}
		for j, f := range futs {
			_, err := f.Wait(ctx)
			if commit {
				require.NoError(t, err, "transaction %d record %d", i, j)
			} else if err != nil {
				require.ErrorIs(t, err, producer.ErrTransactionAborted, "transaction %d record %d", i, j)
			}
			if err == nil {
				written++
			}
		}
	}

	requireCommitted(t, readValues(t, addrs, topic, len(committed), kgo.ReadCommitted()), committed)

	unc := readValues(t, addrs, topic, written, kgo.ReadUncommitted())
	total := 0
	for _, vs := range unc {
		total += len(vs)
	}
	require.Equal(t, written, total, "read_uncommitted sees every data record written")
}

// order maps "t<i>-<j>" to a number growing in Send order.
func order(t *testing.T, v string) int {
	var i, j int
	_, err := fmt.Sscanf(v, "t%d-%d", &i, &j)
	require.NoError(t, err)
	return i*1000 + j
}

// TestSamsaTransactionFencing: a second samsa producer with the same
// transactional id fences the first, whose next transaction fails with
// ErrProducerFenced, a fatal error; its records fail too. At transaction
// version 1 its AddPartitionsToTxn is fenced, so the commit is; at
// version 2 its Produce is refused (INVALID_PRODUCER_EPOCH: abortable, as
// in Java) and the abort is fenced. Against kfake and against the test
// broker at both versions.
func TestSamsaTransactionFencing(t *testing.T) {
	for _, cl := range txnClusters {
		t.Run(cl.name, func(t *testing.T) { testSamsaTransactionFencing(t, cl) })
	}
}

func testSamsaTransactionFencing(t *testing.T, cl txnCluster) {
	topic, id := cl.unique("fence"), cl.unique("samsa-fence")
	addrs := cl.start(t, topic)
	ctx := testContext(t)

	p1 := cl.txnProducer(t, addrs, id)
	commitOne(ctx, t, p1, topic, "first")
	commitOne(ctx, t, cl.txnProducer(t, addrs, id), topic, "second")

	require.NoError(t, p1.BeginTransaction())
	f3 := p1.Send(ctx, &producer.Record{Topic: topic, Value: []byte("zombie")})
	err := p1.CommitTransaction(ctx)
	_, ferr := f3.Wait(ctx)
	require.Error(t, ferr)
	if !errors.Is(err, producer.ErrProducerFenced) {
		// Transaction version 2: no AddPartitionsToTxn asks the
		// coordinator first; the partition refuses the old epoch
		// (INVALID_PRODUCER_EPOCH, abortable, as in Java), and the
		// coordinator fences the abort.
		require.True(t, producer.IsAbortable(err), "the zombie's commit: %v", err)
		require.True(t, producer.IsAbortable(ferr), "the zombie's record: %v", ferr)
		err = p1.AbortTransaction(ctx)
		require.ErrorIs(t, err, producer.ErrProducerFenced)
	} else {
		require.True(t, producer.IsFatal(ferr), "the zombie's record fails with the fatal error: %v", ferr)
	}
	require.True(t, producer.IsFatal(err), "fenced is fatal: %v", err)
	require.False(t, producer.IsAbortable(err))
	require.ErrorIs(t, p1.BeginTransaction(), producer.ErrProducerFenced)
	require.ErrorIs(t, p1.AbortTransaction(ctx), producer.ErrProducerFenced)

	vals := allValues(readValues(t, addrs, topic, 2, kgo.ReadCommitted()))
	slices.Sort(vals)
	require.Equal(t, []string{"first", "second"}, vals)
}

// TestSamsaSendOffsetsToTransactionKfake is consume-transform-produce: a
// kgo group consumer reads, samsa writes the transformed records and the
// consumer's offsets in one transaction; the offsets are visible to
// OffsetFetch only after the commit.
func TestSamsaSendOffsetsToTransactionKfake(t *testing.T) {
	const in, out, group = "ctp-in", "ctp-out", "ctp-group"
	c := startKfakeTxn(t, in, out)
	addrs := c.ListenAddrs()
	ctx := testContext(t)

	seed := newKgoClient(t, addrs)
	for i := range 12 {
		require.NoError(t, seed.ProduceSync(ctx, &kgo.Record{Topic: in, Value: []byte(fmt.Sprint(i))}).FirstErr())
	}

	cons := newKgoClient(t, addrs, kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	p := newTxnProducer(t, addrs, "samsa-ctp")

	require.NoError(t, p.BeginTransaction())
	seen := 0
	for seen < 12 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			p.Send(ctx, &producer.Record{Topic: out, Value: append([]byte("x"), r.Value...)})
		})
	}
	offsets := map[string]map[int32]producer.TxnOffset{}
	for topic, parts := range cons.UncommittedOffsets() {
		offsets[topic] = map[int32]producer.TxnOffset{}
		for part, eo := range parts {
			offsets[topic][part] = producer.TxnOffset{Offset: eo.Offset, LeaderEpoch: eo.Epoch}
		}
	}
	member, gen := cons.GroupMetadata()
	require.NoError(t, p.SendOffsetsToTransaction(ctx, offsets, producer.GroupMetadata{GroupID: group, GenerationID: gen, MemberID: member}))

	adm := kadm.NewClient(newKgoClient(t, addrs))
	before, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	for part := range offsets[in] {
		if o, ok := before.Lookup(in, part); ok && o.Err == nil {
			require.Less(t, o.At, offsets[in][part].Offset, "offset of %s[%d] visible before the commit", in, part)
		}
	}

	require.NoError(t, p.CommitTransaction(ctx))
	after, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	for part, want := range offsets[in] {
		o, ok := after.Lookup(in, part)
		require.True(t, ok, "no committed offset for %s[%d]", in, part)
		require.NoError(t, o.Err)
		require.Equal(t, want.Offset, o.At, "committed offset of %s[%d]", in, part)
	}
	require.Len(t, allValues(readValues(t, addrs, out, 12, kgo.ReadCommitted())), 12)

	// A stale generation is an abortable error.
	require.NoError(t, p.BeginTransaction())
	err = p.SendOffsetsToTransaction(ctx, offsets, producer.GroupMetadata{GroupID: group, GenerationID: gen + 100, MemberID: member})
	if err != nil {
		require.True(t, producer.IsAbortable(err), "stale generation: %v", err)
		require.False(t, errors.Is(err, producer.ErrProducerFenced))
	}
	require.NoError(t, p.AbortTransaction(ctx))
}

// TestSamsaTransactionCoordinatorErrorsKfake: the coordinator answers
// COORDINATOR_LOAD_IN_PROGRESS to InitProducerId, CONCURRENT_TRANSACTIONS
// to AddPartitionsToTxn (transaction version 1; at 2 none is sent), and
// NOT_COORDINATOR then CONCURRENT_TRANSACTIONS to EndTxn, once each: the
// producer retries (finding the coordinator again), and the transaction
// commits.
func TestSamsaTransactionCoordinatorErrorsKfake(t *testing.T) {
	forEachTxnVersion(t, testSamsaTransactionCoordinatorErrorsKfake)
}

func testSamsaTransactionCoordinatorErrorsKfake(t *testing.T, level int16) {
	const topic = "txn-coord"
	c := startKfakeTxn(t, topic)
	setKfakeTxnVersion(t, c, level)
	addrs := c.ListenAddrs()
	ctx := testContext(t)
	seen := map[string]int{}
	var mu sync.Mutex
	count := func(k string) {
		mu.Lock()
		seen[k]++
		mu.Unlock()
	}
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		count("init")
		resp := kr.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		count("add")
		req := kr.(*kmsg.AddPartitionsToTxnRequest)
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.ConcurrentTransactions.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	endErrs := []int16{kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code}
	for range endErrs {
		c.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			mu.Lock()
			code := endErrs[0]
			endErrs = endErrs[1:]
			seen["end"]++
			mu.Unlock()
			resp := kr.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = code
			return resp, nil, true
		})
	}

	p := newTxnProducer(t, addrs, "samsa-coord")
	require.NoError(t, p.BeginTransaction())
	var futs []*producer.Future
	for i := range 20 {
		futs = append(futs, p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}))
	}
	require.NoError(t, p.CommitTransaction(ctx))
	for _, f := range futs {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	want := map[string]int{"init": 1, "add": 1, "end": 2}
	if level >= 2 {
		delete(want, "add") // the Produce requests add the partitions
	}
	mu.Lock()
	require.Equal(t, want, seen, "each injected error was answered once")
	mu.Unlock()
	require.Len(t, allValues(readValues(t, addrs, topic, 20, kgo.ReadCommitted())), 20)
}

// TestSamsaTransactionTimeoutKfake: a transaction left open past its
// TransactionTimeout is aborted by the coordinator (which bumps the
// epoch); the producer's commit then fails with an abortable or fatal
// error, and none of the transaction's records becomes visible to
// read_committed consumers.
func TestSamsaTransactionTimeoutKfake(t *testing.T) {
	const topic = "txn-timeout"
	c := startKfakeTxn(t, topic)
	addrs := c.ListenAddrs()
	ctx := testContext(t)
	p := newSamsaProducer(t, addrs, producer.Config{TransactionalID: "samsa-timeout", Linger: time.Millisecond,
		TransactionTimeout: 300 * time.Millisecond})
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("early")}).Wait(ctx)
	require.NoError(t, err)
	time.Sleep(3 * time.Second) // ten timeouts: kfake's timer has aborted it, even on a loaded machine
	f := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("late")})
	err = p.CommitTransaction(ctx)
	require.Error(t, err, "the coordinator aborted the transaction")
	require.True(t, producer.IsAbortable(err) || producer.IsFatal(err), "%v", err)
	t.Logf("commit after the coordinator's timeout: %v (abortable %v, fatal %v)", err, producer.IsAbortable(err), producer.IsFatal(err))
	_, ferr := f.Wait(ctx)
	t.Logf("late record: %v", ferr)
	if producer.IsAbortable(err) {
		aerr := p.AbortTransaction(ctx)
		t.Logf("abort: %v", aerr)
	}

	// A later committed transaction (another producer) is all that is
	// visible.
	commitOne(ctx, t, newTxnProducer(t, addrs, "samsa-timeout-2"), topic, "after")
	vals := allValues(readValues(t, addrs, topic, 1, kgo.ReadCommitted()))
	require.Equal(t, []string{"after"}, vals)
}

// TestSamsaTransactionAbortableGroupErrorKfake: the request adding the
// group (AddOffsetsToTxn at transaction version 1, TxnOffsetCommit at 2)
// answered GROUP_AUTHORIZATION_FAILED is abortable; the coordinator never
// heard of the transaction, and the next transaction commits.
func TestSamsaTransactionAbortableGroupErrorKfake(t *testing.T) {
	forEachTxnVersion(t, testSamsaTransactionAbortableGroupErrorKfake)
}

func testSamsaTransactionAbortableGroupErrorKfake(t *testing.T, level int16) {
	const topic = "txn-group-auth"
	c := startKfakeTxn(t, topic)
	setKfakeTxnVersion(t, c, level)
	addrs := c.ListenAddrs()
	ctx := testContext(t)
	if level >= 2 {
		c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			req := kr.(*kmsg.TxnOffsetCommitRequest)
			resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewTxnOffsetCommitResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, kerr.GroupAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
	} else {
		c.ControlKey(int16(kmsg.AddOffsetsToTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			resp := kr.(*kmsg.AddOffsetsToTxnRequest).ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil, true
		})
	}
	p := newTxnProducer(t, addrs, "samsa-group-auth")
	require.NoError(t, p.BeginTransaction())
	err := p.SendOffsetsToTransaction(ctx, map[string]map[int32]producer.TxnOffset{topic: {0: {Offset: 1, LeaderEpoch: -1}}},
		producer.GroupMetadata{GroupID: "g", GenerationID: -1})
	require.True(t, producer.IsAbortable(err), "%v", err)
	f := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("refused")})
	_, ferr := f.Wait(ctx)
	require.True(t, producer.IsAbortable(ferr), "a Send in an abortable transaction fails with its error: %v", ferr)
	require.ErrorIs(t, p.CommitTransaction(ctx), samsakerr.ForCode(kerr.GroupAuthorizationFailed.Code))
	require.NoError(t, p.AbortTransaction(ctx))

	commitOne(ctx, t, p, topic, "ok")
	vals := allValues(readValues(t, addrs, topic, 1, kgo.ReadCommitted()))
	require.Equal(t, []string{"ok"}, vals)
}

// TestSamsaTransactionChaosKfake runs many transactions of random size,
// each committed or aborted at random, while kfake's partition leaders and
// coordinators move and Produce and EndTxn fail now and then (NOT_LEADER,
// dropped connections, REQUEST_TIMED_OUT after the append,
// CONCURRENT_TRANSACTIONS): a
// read_committed consumer then sees every committed record exactly once,
// in Send order per partition, and no aborted one; every future
// completes, and the producer's memory is all returned.
func TestSamsaTransactionChaosKfake(t *testing.T) {
	const topic = "txn-chaos"
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	ctx := testContext(t)

	var produces, ends atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch n := produces.Add(1); {
		case n%7 == 0:
			return produceError(kr.(*kmsg.ProduceRequest), kerr.NotLeaderForPartition.Code), nil, true
		case n%11 == 0:
			return nil, errDropConnection, true // the connection drops instead of an answer
		}
		return nil, nil, false
	})
	// Every 13th Produce kfake handles is appended and then answered
	// REQUEST_TIMED_OUT: the retry is a duplicate the broker must know.
	var seen atomic.Int64
	timedOut := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1,
		When: func(kmsg.Request) bool { return seen.Add(1)%13 == 0 }})
	defer timedOut.Remove()
	c.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if ends.Add(1)%3 != 0 {
			return nil, nil, false
		}
		resp := kr.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp, nil, true
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			if i%2 == 0 {
				c.ShufflePartitionLeaders()
			} else {
				c.RehashCoordinators()
			}
		}
	}()

	p := newTxnProducer(t, addrs, "samsa-chaos")
	rng := rand.New(rand.NewPCG(1, 2))
	var committed []string
	for i := range 60 {
		require.NoError(t, p.BeginTransaction(), "transaction %d", i)
		n := 1 + rng.IntN(40)
		var futs []*producer.Future
		var vals []string
		for j := range n {
			v := fmt.Sprintf("t%d-%d", i, j)
			vals = append(vals, v)
			futs = append(futs, p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(rng.IntN(12))), Value: []byte(v)}))
		}
		commit := rng.IntN(3) != 0
		if commit {
			err := p.CommitTransaction(ctx)
			if err != nil {
				require.True(t, producer.IsAbortable(err), "transaction %d: %v", i, err)
				t.Logf("transaction %d: commit failed, aborting: %v", i, err)
				commit = false
			} else {
				committed = append(committed, vals...)
			}
		}
		if !commit {
			require.NoError(t, p.AbortTransaction(ctx), "transaction %d", i)
		}
		for j, f := range futs {
			_, err := f.Wait(ctx)
			if commit {
				require.NoError(t, err, "transaction %d record %d", i, j)
			}
		}
	}
	close(stop)
	wg.Wait()
	st := p.Metrics().Producer
	require.Zero(t, st.BufferedRecords, "every record completed")
	require.Zero(t, st.BufferTotalBytes-st.BufferAvailableBytes, "all memory returned")
	t.Logf("%d committed records; %d Produce (%d timed out after the append) and %d EndTxn requests; %d retries", len(committed), produces.Load(), timedOut.Hits(), ends.Load(), st.BatchRetryTotal)

	requireCommitted(t, readValues(t, addrs, topic, len(committed), kgo.ReadCommitted()), committed)
}

// TestSamsaTransactionEpochBumpKfake: Produce answered
// INVALID_PRODUCER_EPOCH once is abortable; the abort ends the transaction
// and then, at transaction version 1, bumps the epoch with InitProducerId
// carrying the current id and epoch (KIP-360); at version 2 the abort's
// EndTxn bumps it. The next transaction commits under the new epoch.
func TestSamsaTransactionEpochBumpKfake(t *testing.T) {
	forEachTxnVersion(t, testSamsaTransactionEpochBumpKfake)
}

func testSamsaTransactionEpochBumpKfake(t *testing.T, level int16) {
	const topic = "txn-bump"
	c := startKfakeTxn(t, topic)
	setKfakeTxnVersion(t, c, level)
	addrs := c.ListenAddrs()
	ctx := testContext(t)
	var inits []*kmsg.InitProducerIDRequest
	var mu sync.Mutex
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		inits = append(inits, kr.(*kmsg.InitProducerIDRequest))
		mu.Unlock()
		return nil, nil, false
	})
	p := newTxnProducer(t, addrs, "samsa-bump")
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("one")}).Wait(ctx)
	require.NoError(t, err)

	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		return produceError(kr.(*kmsg.ProduceRequest), kerr.InvalidProducerEpoch.Code), nil, true
	})
	_, err = p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("two")}).Wait(ctx)
	require.True(t, producer.IsAbortable(err), "%v", err)
	require.True(t, producer.IsAbortable(p.CommitTransaction(ctx)))
	require.NoError(t, p.AbortTransaction(ctx))

	commitOne(ctx, t, p, topic, "three")

	mu.Lock()
	if level >= 2 {
		require.Len(t, inits, 1, "the first id; EndTxn bumps the epoch")
	} else {
		require.Len(t, inits, 2, "the first id, then one bump")
		require.GreaterOrEqual(t, inits[1].ProducerID, int64(0), "the bump names the current id (KIP-360)")
	}
	require.Equal(t, int64(-1), inits[0].ProducerID)
	mu.Unlock()
	vals := allValues(readValues(t, addrs, topic, 1, kgo.ReadCommitted()))
	require.Equal(t, []string{"three"}, vals)
}

// produceError answers every partition of req with code.
func produceError(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID // v13 answers by id
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// allValues joins readValues' partitions, in no set order: sort them to
// compare.
func allValues(got map[int32][]string) []string {
	var vals []string
	for _, vs := range got {
		vals = append(vals, vs...)
	}
	return vals
}

// commitOne commits a transaction of one record with value v, which must
// succeed.
func commitOne(ctx context.Context, t *testing.T, p *producer.Producer, topic, v string) {
	t.Helper()
	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte(v)})
	require.NoError(t, p.CommitTransaction(ctx))
	_, err := f.Wait(ctx)
	require.NoError(t, err)
}

// requireCommitted checks what a read_committed consumer read (got, per
// partition) against the values of the committed transactions: each
// exactly once, in Send order per partition ("t<i>-<j>", see order).
func requireCommitted(t *testing.T, got map[int32][]string, committed []string) {
	t.Helper()
	for part, vs := range got {
		for k := 1; k < len(vs); k++ {
			require.Less(t, order(t, vs[k-1]), order(t, vs[k]), "partition %d out of order or duplicated", part)
		}
	}
	all := allValues(got)
	slices.Sort(all)
	want := slices.Sorted(slices.Values(committed))
	require.Equal(t, want, all, "read_committed sees exactly the committed records, once each")
}

// TestSamsaCloseAbortsOpenTransaction closes a producer whose transaction
// is open, its records written: Close aborts it (as Java's producer does),
// so a read_committed kgo consumer sees the next producer's committed
// record on the same partition at once, instead of stalling behind the
// open transaction until it times out (TransactionTimeout, 60 s here).
func TestSamsaCloseAbortsOpenTransaction(t *testing.T) {
	for _, cl := range txnClusters {
		t.Run(cl.name, func(t *testing.T) { testSamsaCloseAbortsOpenTransaction(t, cl) })
	}
}

func testSamsaCloseAbortsOpenTransaction(t *testing.T, cl txnCluster) {
	topic := cl.unique("txn-close")
	addrs := cl.start(t, topic)
	ctx := testContext(t)
	key := []byte("same-partition")
	a := cl.producer(t, addrs, producer.Config{TransactionalID: cl.unique("close-a"), Linger: 2 * time.Millisecond, TransactionTimeout: time.Minute})
	require.NoError(t, a.BeginTransaction())
	for i := range 10 {
		_, err := a.Send(ctx, &producer.Record{Topic: topic, Key: key, Value: []byte(fmt.Sprint("open-", i))}).Wait(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, a.Close(ctx))

	b := cl.txnProducer(t, addrs, cl.unique("close-b"))
	require.NoError(t, b.BeginTransaction())
	f := b.Send(ctx, &producer.Record{Topic: topic, Key: key, Value: []byte("after")})
	require.NoError(t, b.CommitTransaction(ctx))
	_, err := f.Wait(ctx)
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c := newKgoClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	defer c.Close()
	var got []string
	for len(got) == 0 {
		fs := c.PollFetches(rctx)
		require.NoError(t, rctx.Err(), "read_committed stalled behind the closed producer's transaction")
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, []string{"after"}, got, "the closed producer's records are aborted")
}
