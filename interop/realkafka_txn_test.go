package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/producer"
)

// realKafkaTxn is the 1-node Apache Kafka cluster as a txnCluster: topics
// of 3 partitions created in it, and names made unique (the cluster
// outlives a test run). The samsa producers' connections go through
// wire's dialer, when given.
func realKafkaTxn(t *testing.T, c *realCluster, wire *wireCounter) txnCluster {
	cl := txnCluster{
		name: "kafka",
		start: func(t *testing.T, topics ...string) []string {
			for _, topic := range topics {
				c.createTopic(t, topic, 3, 1, nil)
			}
			return c.addrs
		},
		unique: uniqueTopic,
	}
	if wire != nil {
		cl.dialer = wire.dial
	}
	return cl
}

// TestRealKafkaTransactions runs the transaction tests of kfake and the
// test broker (samsa_txn_test.go) against Apache Kafka itself at both
// transaction versions (KIP-890): first at the cluster's finalized
// transaction.version (2, Kafka 4.4's default for a new cluster), then at
// the other after an UpdateFeatures downgrade (or upgrade; what
// FeatureCommand does), and finally it switches the level back while a
// producer runs. The tests: committed and aborted transactions (one
// aborted after some of its records reached the broker), read back by kgo
// at read_committed (exactly the committed records, once each, in Send
// order per partition) and read_uncommitted (every data record written);
// fencing by a second producer with the same transactional id; Close
// aborting an open transaction; and transactions with consumer offsets
// whose epoch the coordinator reports (DescribeTransactions). Every samsa
// connection goes through a dialer that counts the requests on the wire:
// at version 2 there is no AddPartitionsToTxn or AddOffsetsToTxn,
// Produce is v12, EndTxn v5 and TxnOffsetCommit v5, and each commit or
// abort bumps the epoch; at version 1 partitions are added explicitly,
// Produce is v11 and EndTxn v4, and the epoch stays.
func TestRealKafkaTransactions(t *testing.T) {
	c := realKafka(t)
	first := txnVersionOf(t, c)
	require.Contains(t, []int16{1, 2}, first, "the cluster's transaction.version")
	other := 3 - first
	t.Cleanup(func() { setTxnVersion(t, c, first) }) // the cluster is shared

	for _, level := range []int16{first, other} {
		if level != first {
			setTxnVersion(t, c, level)
		}
		t.Run(fmt.Sprintf("transaction.version %d", level), func(t *testing.T) {
			wire := newWireCounter()
			cl := realKafkaTxn(t, c, wire)
			t.Run("commit and abort", func(t *testing.T) { testSamsaTransactions(t, cl) })
			t.Run("fencing", func(t *testing.T) { testSamsaTransactionFencing(t, cl) })
			t.Run("close aborts", func(t *testing.T) { testSamsaCloseAbortsOpenTransaction(t, cl) })
			t.Run("epochs and offsets", func(t *testing.T) { testRealKafkaTxnEpochs(t, c, level) })
			n := wire.counts()
			t.Logf("requests on the wire at transaction.version %d: %v", level, n)
			if level >= 2 {
				require.Zero(t, n.keys(addPartitionsToTxnKey)+n.keys(addOffsetsToTxnKey), "no AddPartitionsToTxn or AddOffsetsToTxn at version 2: %v", n)
				// Kafka 4.4 offers Produce v13: by topic id, as Java 4.4
				// sends it at version 2 (invariant 16).
				require.Equal(t, n.keys(produceKey), n[apiVersion{produceKey, 13}], "every Produce at v13: %v", n)
				require.Equal(t, n.keys(endTxnKey), n[apiVersion{endTxnKey, 5}], "every EndTxn at v5: %v", n)
			} else {
				require.Positive(t, n.keys(addPartitionsToTxnKey), "%v", n)
				require.Equal(t, n.keys(produceKey), n[apiVersion{produceKey, 11}], "every Produce at v11: %v", n)
				require.Equal(t, n.keys(endTxnKey), n[apiVersion{endTxnKey, 4}], "every EndTxn at v4: %v", n)
			}
		})
	}
	t.Run("switch while running", func(t *testing.T) { testRealKafkaTxnVersionSwitch(t, c, other, first) })
}

// testRealKafkaTxnEpochs runs three transactions with consumer offsets
// (commit, abort after its records were written, commit) and reads the
// coordinator's epoch after each: one bump per commit or abort at version
// 2, none at 1. The group's offset is the last committed one.
func testRealKafkaTxnEpochs(t *testing.T, c *realCluster, level int16) {
	topic, id, group := uniqueTopic("txn-epochs"), uniqueTopic("samsa-epochs"), uniqueTopic("samsa-epochs-group")
	c.createTopic(t, topic, 3, 1, nil)
	wire := newWireCounter()
	p := newSamsaProducer(t, c.addrs, producer.Config{TransactionalID: id, Linger: 2 * time.Millisecond, Dialer: wire.dial})
	ctx := realContext(t, 2*time.Minute)
	adm := kadm.NewClient(newKgoClient(t, c.addrs))
	epoch := func() int16 {
		d, err := adm.DescribeTransactions(ctx, id)
		require.NoError(t, err)
		txn, ok := d[id]
		require.True(t, ok, "%v", d)
		require.NoError(t, txn.Err)
		return txn.ProducerEpoch
	}
	var epochs []int16
	var committed []string
	for i, commit := range []bool{true, false, true} {
		require.NoError(t, p.BeginTransaction())
		var fs []*producer.Future
		for j := range 6 {
			v := fmt.Sprintf("t%d-%d", i, j)
			fs = append(fs, p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(j)), Value: []byte(v)}))
			if commit {
				committed = append(committed, v)
			}
		}
		for _, f := range fs {
			_, err := f.Wait(ctx) // written before the end: the abort has data to abort
			require.NoError(t, err)
		}
		offsets := map[string]map[int32]producer.TxnOffset{topic: {0: {Offset: int64(10 + i), LeaderEpoch: -1}}}
		require.NoError(t, p.SendOffsetsToTransaction(ctx, offsets, producer.GroupMetadata{GroupID: group}))
		if commit {
			require.NoError(t, p.CommitTransaction(ctx))
		} else {
			require.NoError(t, p.AbortTransaction(ctx))
		}
		epochs = append(epochs, epoch())
	}
	t.Logf("epochs after commit, abort, commit: %v", epochs)
	if level >= 2 {
		require.Equal(t, []int16{epochs[0], epochs[0] + 1, epochs[0] + 2}, epochs, "each commit or abort bumps the epoch")
	} else {
		require.Equal(t, []int16{epochs[0], epochs[0], epochs[0]}, epochs, "version 1 keeps the epoch")
	}
	requireCommitted(t, readValues(t, c.addrs, topic, len(committed), kgo.ReadCommitted()), committed)
	waitFor(t, 20*time.Second, "the last committed transaction's offset", func() bool {
		off, err := adm.FetchOffsets(ctx, group)
		o, ok := off.Lookup(topic, 0)
		return err == nil && ok && o.At == 12
	})
	// Three of each at least: a fresh group coordinator may ask for
	// retries.
	n := wire.counts()
	if level >= 2 {
		require.GreaterOrEqual(t, n[apiVersion{txnOffsetCommitKey, 5}], 3, "%v", n)
		require.Equal(t, n.keys(txnOffsetCommitKey), n[apiVersion{txnOffsetCommitKey, 5}], "every TxnOffsetCommit at v5: %v", n)
		require.Zero(t, n.keys(addOffsetsToTxnKey), "%v", n)
	} else {
		require.GreaterOrEqual(t, n[apiVersion{txnOffsetCommitKey, 4}], 3, "%v", n)
		require.Equal(t, n.keys(txnOffsetCommitKey), n[apiVersion{txnOffsetCommitKey, 4}], "every TxnOffsetCommit at v4: %v", n)
		require.GreaterOrEqual(t, n.keys(addOffsetsToTxnKey), 3, "%v", n)
	}
}

// testRealKafkaTxnVersionSwitch starts a producer at transaction version
// from, changes the cluster's level to to while it runs, and checks each
// transaction's requests: the transaction under way when the level
// changes finishes in its flow, the producer reads the level again at its
// end (MetadataMaxAge is 1 s here), and the next transaction runs the new
// flow, after an epoch bump when going from 1 to 2. Every transaction
// commits.
func testRealKafkaTxnVersionSwitch(t *testing.T, c *realCluster, from, to int16) {
	require.Equal(t, from, txnVersionOf(t, c))
	topic, id := uniqueTopic("txn-switch"), uniqueTopic("samsa-switch")
	c.createTopic(t, topic, 1, 1, nil)
	wire := newWireCounter()
	p := newSamsaProducer(t, c.addrs, producer.Config{TransactionalID: id, Linger: 2 * time.Millisecond,
		MetadataMaxAge: time.Second, Dialer: wire.dial})
	ctx := realContext(t, 2*time.Minute)
	flow := map[int16][]string{
		1: {"AddPartitionsToTxn v3", "Produce v11", "EndTxn v4"},
		2: {"Produce v13", "EndTxn v5"}, // v13, by topic id, on Kafka 4.4
	}
	commitOne(ctx, t, p, topic, "before")
	time.Sleep(1100 * time.Millisecond) // the producer read the level at the end of "before"
	setTxnVersion(t, c, to)
	commitOne(ctx, t, p, topic, "during") // begun before the change; its end reads it
	commitOne(ctx, t, p, topic, "after")
	commitOne(ctx, t, p, topic, "after again")
	// The requests of the transaction flows, in order; a retry (of
	// InitProducerId or EndTxn answered CONCURRENT_TRANSACTIONS while the
	// last markers are written, of a Produce answered NOT_ENOUGH_REPLICAS
	// meanwhile) counted once.
	got := slices.Compact(slices.DeleteFunc(wire.log(), func(r string) bool {
		return !slices.ContainsFunc([]string{"InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn"}, func(n string) bool { return strings.HasPrefix(r, n+" ") })
	}))
	var bump []string
	if to == 2 {
		bump = []string{"InitProducerId v5"} // before the first transaction of version 2
	}
	require.Equal(t, slices.Concat([]string{"InitProducerId v5"}, flow[from], flow[from], bump, flow[to], flow[to]), got)
	require.Equal(t, []string{"before", "during", "after", "after again"}, readValues(t, c.addrs, topic, 4, kgo.ReadCommitted())[0])
}

// txnVersionOf returns the cluster's finalized transaction.version, from
// the ApiVersions answer of a new connection.
func txnVersionOf(t *testing.T, c *realCluster) int16 {
	t.Helper()
	ctx := realContext(t, 30*time.Second)
	cn, err := conn.Dial(ctx, c.addrs[0], conn.Config{})
	require.NoError(t, err)
	defer cn.Close()
	return cn.Features().Level("transaction.version")
}

// setTxnVersion finalizes transaction.version level with UpdateFeatures (as
// kafka-features.sh / FeatureCommand upgrade or downgrade does: a
// downgrade to 1 is a safe one) and waits until a new connection's
// ApiVersions reports it.
func setTxnVersion(t *testing.T, c *realCluster, level int16) {
	t.Helper()
	ctx := realContext(t, 30*time.Second)
	adm := kadm.NewClient(newKgoClient(t, c.addrs))
	typ := int8(1) // upgrade
	if level < txnVersionOf(t, c) {
		typ = 2 // safe downgrade
	}
	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: typ})
	require.NoError(t, err)
	require.NoError(t, res.Error())
	waitFor(t, 20*time.Second, fmt.Sprintf("transaction.version %d", level), func() bool { return txnVersionOf(t, c) == level })
}

// API keys the wire counter names.
const (
	produceKey            int16 = 0
	initProducerIDKey     int16 = 22
	addPartitionsToTxnKey int16 = 24
	addOffsetsToTxnKey    int16 = 25
	endTxnKey             int16 = 26
	txnOffsetCommitKey    int16 = 28
)

var keyNames = map[int16]string{produceKey: "Produce", initProducerIDKey: "InitProducerId", addPartitionsToTxnKey: "AddPartitionsToTxn",
	addOffsetsToTxnKey: "AddOffsetsToTxn", endTxnKey: "EndTxn", txnOffsetCommitKey: "TxnOffsetCommit"}

type apiVersion struct{ key, version int16 }

// apiCounts counts requests by key and version.
type apiCounts map[apiVersion]int

// keys counts the requests of key, any version.
func (n apiCounts) keys(key int16) int {
	sum := 0
	for kv, c := range n {
		if kv.key == key {
			sum += c
		}
	}
	return sum
}

// wireCounter is a producer Dialer that reads the requests written on
// every connection it opens (request frames: a size, then the API key
// and version): what reaches the broker, whatever the producer's own
// bookkeeping says.
type wireCounter struct {
	mu   sync.Mutex
	reqs []apiVersion
}

func newWireCounter() *wireCounter { return &wireCounter{} }

func (w *wireCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: nc, w: w}, nil
}

func (w *wireCounter) counts() apiCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := apiCounts{}
	for _, r := range w.reqs {
		n[r]++
	}
	return n
}

// log returns the requests so far, named ("Produce v12"), in write order.
func (w *wireCounter) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.reqs))
	for _, r := range w.reqs {
		name := keyNames[r.key]
		if name == "" {
			name = fmt.Sprintf("key%d", r.key)
		}
		out = append(out, fmt.Sprintf("%s v%d", name, r.version))
	}
	return out
}

// countingConn parses the request frames written to it: the 4-byte size,
// the API key and version (the first 4 bytes of the frame), the rest
// skipped.
type countingConn struct {
	net.Conn
	w    *wireCounter
	head []byte // the size and key/version bytes of the frame begun
	skip int    // bytes of the current frame left past its head
}

func (c *countingConn) Write(b []byte) (int, error) {
	// Counted before the write: its answer may come back, and the test
	// read the counts, before Write returns.
	c.scan(b)
	return c.Conn.Write(b)
}

func (c *countingConn) scan(b []byte) {
	for p := b; len(p) > 0; {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip -= k
			p = p[k:]
			continue
		}
		k := min(8-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
		if len(c.head) < 8 {
			continue
		}
		size := int(binary.BigEndian.Uint32(c.head))
		r := apiVersion{int16(binary.BigEndian.Uint16(c.head[4:])), int16(binary.BigEndian.Uint16(c.head[6:]))}
		c.head, c.skip = c.head[:0], size-4
		c.w.mu.Lock()
		c.w.reqs = append(c.w.reqs, r)
		c.w.mu.Unlock()
	}
}
