package interop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaRollingUpgrade upgrades a 3-node KRaft cluster node by node
// (kafka/node.sh stop N, then node.sh -version TO start N: the same storage
// and configuration, the new release's jars), then finalizes
// metadata.version to the highest level every node supports and
// transaction.version to 2, while two samsa producers run:
//
//   - an idempotent one with the default settings (acks=all) writing
//     SAMSA_KAFKA_UPGRADE_RECORDS records (default 1,000,000, 100-byte
//     values carrying their index) to a topic of 6 partitions,
//     replication factor 3 and min.insync.replicas 2, paced so that the
//     writes span the upgrade and go on after the finalization;
//   - a transactional one committing a transaction of 5 records every
//     100 ms to another such topic, reading the finalized features again
//     every 5 s (MetadataMaxAge), so that it switches from transaction
//     version 1 to 2 during the run.
//
// Each node is upgraded only once the previous one is back in the ISR of
// every partition of the cluster, internal topics included (what an
// operator checks: no under-replicated partition). The test then asserts
// what a user would: every acknowledged record read back by kgo exactly
// once, in Send order per partition, at the offset samsa reported (0 lost,
// 0 duplicated, 0 reordered), no record failed; every committed
// transaction's records read once at read_committed and no aborted one's;
// no transaction left open (DescribeTransactions, ListTransactions,
// DescribeProducers, and the last stable offsets equal to the high
// watermarks); no fatal transactional error; and the transactional
// producer ran transaction version 2 (EndTxn v5 on the wire) after the
// finalization. It logs, per event, the longest gap between consecutive
// acknowledgements, the batch retries, the outcome-unknown records and the
// transactions committed and aborted.
//
// It takes minutes, so it runs only with SAMSA_KAFKA_UPGRADE=1, on the
// 3-node cluster of SAMSA_KAFKA3_BROKERS / SAMSA_KAFKA3_DIR started with
// the old release and -txn-version 1 (interop/kafka/upgrade.sh does all of
// it). SAMSA_KAFKA_UPGRADE_TO (default 4.4.0) is the release the nodes are
// upgraded to.
func TestRealKafkaRollingUpgrade(t *testing.T) {
	if os.Getenv("SAMSA_KAFKA_UPGRADE") == "" {
		t.Skip("SAMSA_KAFKA_UPGRADE is not set: the rolling upgrade takes minutes (interop/kafka/upgrade.sh runs it)")
	}
	c := realKafka3(t)
	require.NotEmpty(t, c.dir, "%s must name the cluster's directory: the test restarts its nodes", c.dirVar)
	to := os.Getenv("SAMSA_KAFKA_UPGRADE_TO")
	if to == "" {
		to = "4.4.0"
	}
	n := 1_000_000
	if v := os.Getenv("SAMSA_KAFKA_UPGRADE_RECORDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "SAMSA_KAFKA_UPGRADE_RECORDS")
	}
	from, err := os.ReadFile(filepath.Join(c.dir, "kafka.version"))
	require.NoError(t, err)
	u := &upgradeRun{t: t, c: c, n: n, from: strings.TrimSpace(string(from)), to: to, start: time.Now()}
	u.run()
}

// upgradeKeys is how many keys the idempotent producer's records spread
// over (record i has key i%upgradeKeys), upgradeValueLen their value size.
const (
	upgradeKeys       = 32
	upgradeValueLen   = 100
	upgradePartitions = 6
	upgradeTxnRecords = 5
	// upgradeSendSpan is how long the idempotent records are spread over
	// when nothing holds them up: the upgrade of 3 nodes takes about a
	// minute here, two on a busy machine (then the last 5% wait for it).
	upgradeSendSpan = 90 * time.Second
)

// upgradeRun is one run of TestRealKafkaRollingUpgrade.
type upgradeRun struct {
	t        *testing.T
	c        *realCluster
	n        int
	from, to string
	start    time.Time

	// The idempotent producer's records, by index: what its callback got
	// (written on the completion goroutine, read after Close).
	ackAt     []int64 // nanoseconds since start when the callback ran; 0 if it has not
	partition []int32
	offset    []int64
	errs      []error
	acked     atomic.Int64
	sent      atomic.Int64

	// The transactional producer's transactions.
	txnMu     sync.Mutex
	txns      []txnOutcome
	txnFatal  error
	txnProbls []string

	// holdFrom and holdTo bound the sender's wait for the finalization
	// before its last 5% (equal if it did not wait).
	holdFrom, holdTo time.Duration

	events   []*upgradeEvent
	logBuf   testutil.SyncBuffer
	figures  upgradeFigures
	txnState string // the transactional id's state after Close
}

// txnOutcome is how one transaction of the transactional producer ended.
type txnOutcome struct {
	committed bool
	at        time.Duration // since start, when CommitTransaction or AbortTransaction returned
	err       error         // the commit's error, for an aborted one
}

// upgradeEvent is one step of the upgrade and what the producers saw
// during it.
type upgradeEvent struct {
	name       string
	begin, end time.Duration // since start
	steps      []string      // "stop 12.3s", ...
	retries    int64         // the idempotent producer's batch retries during it
}

func (u *upgradeRun) since() time.Duration { return time.Since(u.start) }

func (u *upgradeRun) run() {
	t, c := u.t, u.c
	mv0, tv0 := u.finalized("metadata.version"), u.finalized("transaction.version")
	require.Equal(t, int16(1), tv0, "the cluster must start at transaction.version 1 (start.sh -txn-version 1), so that the switch to 2 happens during the run")
	t.Logf("Kafka %s, %d nodes, metadata.version %d, transaction.version %d; upgrading to %s with %d idempotent records",
		u.from, len(c.addrs), mv0, tv0, u.to, u.n)

	topic, txnTopic := uniqueTopic("samsa-upgrade"), uniqueTopic("samsa-upgrade-txn")
	minISR := map[string]string{"min.insync.replicas": "2"}
	c.createTopic(t, topic, upgradePartitions, 3, minISR)
	c.createTopic(t, txnTopic, 3, 3, minISR)

	logger := slog.New(slog.NewTextHandler(&u.logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	idem, err := producer.New(producer.Config{Brokers: c.addrs, ClientID: "samsa-upgrade-idempotent", Logger: logger.With("producer", "idempotent")})
	require.NoError(t, err)
	t.Cleanup(func() { closeQuickly(idem) })
	wire := newWireCounter()
	txnID := uniqueTopic("samsa-upgrade")
	txp, err := producer.New(producer.Config{Brokers: c.addrs, ClientID: "samsa-upgrade-txn", TransactionalID: txnID,
		MetadataMaxAge: 5 * time.Second, Dialer: wire.dial, Logger: logger.With("producer", "transactional")})
	require.NoError(t, err)
	t.Cleanup(func() { closeQuickly(txp) })

	u.ackAt = make([]int64, u.n)
	u.partition = make([]int32, u.n)
	u.offset = make([]int64, u.n)
	u.errs = make([]error, u.n)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	finalized := make(chan struct{}) // closed once the features are finalized and the txn producer switched
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		u.sendIdempotent(ctx, idem, topic, finalized)
	}()
	stopTxn := make(chan struct{})
	txnDone := make(chan struct{})
	go func() {
		defer close(txnDone)
		u.runTransactions(ctx, txp, txnTopic, stopTxn)
	}()
	var once sync.Once
	release := func() { once.Do(func() { close(finalized) }) }
	t.Cleanup(func() { release(); cancel(); <-senderDone; close(stopTxn); <-txnDone })

	// The first transaction waits for Kafka to create __transaction_state
	// (50 partitions): the upgrade starts once both producers run.
	waitFor(t, time.Minute, "the first 5% of the records were not sent", func() bool { return u.sent.Load() >= int64(u.n/20) })
	waitFor(t, time.Minute, "no transaction committed", func() bool { return u.committedCount() >= 5 })
	u.events = append(u.events, &upgradeEvent{name: "before the upgrade", end: u.since(), retries: idem.Metrics().Producer.BatchRetryTotal})

	for node := int32(0); node < int32(len(c.addrs)); node++ {
		u.event(fmt.Sprintf("node %d: %s → %s", node, u.from, u.to), u.since(), idem, func(e *upgradeEvent) {
			t0 := time.Now()
			c.stopNode(t, "stop", node)
			e.steps = append(e.steps, "stopped in "+roundS(time.Since(t0)))
			t0 = time.Now()
			u.startNodeVersion(node, u.to)
			e.steps = append(e.steps, "started in "+roundS(time.Since(t0)))
			t0 = time.Now()
			u.waitFullyReplicated(3 * time.Minute)
			e.steps = append(e.steps, "back in every ISR in "+roundS(time.Since(t0)))
		})
	}

	mvTarget := u.supportedMax("metadata.version")
	u.event(fmt.Sprintf("finalize metadata.version %d → %d", mv0, mvTarget), u.since(), idem, func(e *upgradeEvent) {
		u.updateFeature("metadata.version", mvTarget)
	})
	v5Before := wire.counts()[apiVersion{endTxnKey, 5}]
	require.Zero(t, v5Before, "EndTxn v5 before transaction.version 2 was finalized")
	u.event("finalize transaction.version 1 → 2", u.since(), idem, func(e *upgradeEvent) {
		t0 := time.Now()
		u.updateFeature("transaction.version", 2)
		e.steps = append(e.steps, "finalized in "+roundS(time.Since(t0)))
		t0 = time.Now()
		waitFor(t, time.Minute, "the transactional producer never sent EndTxn v5 (transaction version 2) after the finalization", func() bool {
			return wire.counts()[apiVersion{endTxnKey, 5}] > 0
		})
		e.steps = append(e.steps, "first EndTxn v5 "+roundS(time.Since(t0))+" later")
	})
	release()
	end := u.since()

	select {
	case <-senderDone:
	case <-ctx.Done():
		t.Fatalf("the idempotent records were not all sent: %d of %d", u.sent.Load(), u.n)
	}
	require.NoError(t, idem.Flush(ctx))
	afterEnd := u.since()
	time.Sleep(2 * time.Second) // a few more transactions at version 2
	close(stopTxn)
	<-txnDone
	stopTxn = make(chan struct{}) // for the cleanup's close
	stats, txnStats := idem.Metrics().Producer, txp.Metrics().Producer
	require.NoError(t, idem.Close(ctx))
	require.NoError(t, txp.Close(ctx))
	u.events = append(u.events, &upgradeEvent{name: "after the upgrade", begin: end, end: afterEnd})

	u.checkIdempotent(topic)
	committed, aborted := u.checkTransactions(txnTopic, txnID)
	u.report(stats, txnStats, committed, aborted, wire)
}

// event runs step as the event name beginning at begin, and records the
// idempotent producer's batch retries during it.
func (u *upgradeRun) event(name string, begin time.Duration, p *producer.Producer, step func(e *upgradeEvent)) {
	e := &upgradeEvent{name: name, begin: begin}
	r0 := p.Metrics().Producer.BatchRetryTotal
	step(e)
	e.end = u.since()
	e.retries = p.Metrics().Producer.BatchRetryTotal - r0
	u.events = append(u.events, e)
	u.t.Logf("%v: %s done %s", roundS(e.end), name, strings.Join(e.steps, ", "))
}

func roundS(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// sendIdempotent sends the n records in index order, paced to spread over
// upgradeSendSpan; the last 5% wait until finalized is closed, so that
// some are always written after the upgrade.
func (u *upgradeRun) sendIdempotent(ctx context.Context, p *producer.Producer, topic string, finalized <-chan struct{}) {
	hold := u.n - u.n/20
	const tick = 10 * time.Millisecond
	perTick := max(1, int(int64(u.n)*int64(tick)/int64(upgradeSendSpan)))
	next := time.Now()
	for i := 0; i < u.n; {
		if i == hold && u.holdTo == 0 {
			u.holdFrom = u.since()
			select {
			case <-finalized:
			case <-ctx.Done():
				return
			}
			u.holdTo = u.since()
			next = time.Now()
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(tick)
		end := min(i+perTick, u.n)
		if i < hold {
			end = min(end, hold)
		}
		for ; i < end; i++ {
			value := make([]byte, upgradeValueLen)
			binary.BigEndian.PutUint64(value, uint64(i))
			copy(value[8:], "samsa rolling upgrade ")
			rec := &producer.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i%upgradeKeys)), Value: value}
			idx := i // i moves on before the callback runs
			p.SendCallback(ctx, rec, func(md producer.RecordMetadata, err error) {
				u.ackAt[idx] = int64(u.since())
				u.partition[idx], u.offset[idx], u.errs[idx] = md.Partition, md.Offset, err
				u.acked.Add(1)
			})
			u.sent.Store(int64(i + 1))
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// runTransactions commits a transaction of upgradeTxnRecords records every
// 100 ms until stop is closed. A transaction whose commit fails with an
// abortable error is aborted; a fatal error ends the loop.
func (u *upgradeRun) runTransactions(ctx context.Context, p *producer.Producer, topic string, stop <-chan struct{}) {
	next := time.Now()
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = next.Add(100 * time.Millisecond)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		if err := p.BeginTransaction(); err != nil {
			u.txnFailed(fmt.Errorf("transaction %d: BeginTransaction: %w", k, err))
			return
		}
		futs := make([]*producer.Future, upgradeTxnRecords)
		for j := range futs {
			futs[j] = p.Send(ctx, &producer.Record{Topic: topic, Key: []byte("txn-key-" + strconv.Itoa(j)),
				Value: []byte(strconv.Itoa(k) + "/" + strconv.Itoa(j))})
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		err := p.CommitTransaction(cctx)
		ccancel()
		switch {
		case err == nil:
			for j, f := range futs {
				if _, done, ferr := f.Result(); !done || ferr != nil {
					u.txnProblem(fmt.Sprintf("transaction %d committed, but its record %d: done %v, %v", k, j, done, ferr))
				}
			}
			u.txnEnded(txnOutcome{committed: true, at: u.since()})
		case producer.IsAbortable(err):
			actx, acancel := context.WithTimeout(ctx, time.Minute)
			aerr := p.AbortTransaction(actx)
			acancel()
			if aerr != nil {
				u.txnFailed(fmt.Errorf("transaction %d: CommitTransaction: %v; AbortTransaction: %w", k, err, aerr))
				return
			}
			u.txnEnded(txnOutcome{at: u.since(), err: err})
		default:
			u.txnFailed(fmt.Errorf("transaction %d: CommitTransaction: %w", k, err))
			return
		}
	}
}

func (u *upgradeRun) txnEnded(o txnOutcome) {
	u.txnMu.Lock()
	defer u.txnMu.Unlock()
	u.txns = append(u.txns, o)
}

func (u *upgradeRun) committedCount() int {
	u.txnMu.Lock()
	defer u.txnMu.Unlock()
	n := 0
	for _, o := range u.txns {
		if o.committed {
			n++
		}
	}
	return n
}

func (u *upgradeRun) txnFailed(err error) {
	u.txnMu.Lock()
	defer u.txnMu.Unlock()
	u.txnFatal = err
}

func (u *upgradeRun) txnProblem(s string) {
	u.txnMu.Lock()
	defer u.txnMu.Unlock()
	u.txnProbls = append(u.txnProbls, s)
}

// startNodeVersion starts node n with Kafka version's jars (node.sh
// -version), which waits until the node serves.
func (u *upgradeRun) startNodeVersion(n int32, version string) {
	t := u.t
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join("kafka", "node.sh"), "-dir", u.c.dir, "-version", version, "start", strconv.Itoa(int(n)))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kafka/node.sh -version %s start %d:\n%s", version, n, out)
	u.c.stopped[n] = false
}

// waitFullyReplicated waits until every broker's Metadata shows every
// partition of the cluster, internal topics included, with all its
// replicas in sync: the node restarted last caught up everywhere.
func (u *upgradeRun) waitFullyReplicated(d time.Duration) {
	t := u.t
	cl := newKgoClient(t, u.c.addrs)
	defer cl.Close()
	var why string
	deadline := time.Now().Add(d)
	for !u.fullyReplicated(cl, &why) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v, partitions still under-replicated: %s", d, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fullyReplicated reports whether every broker's Metadata shows every
// partition with its replicas all in sync, setting why if not.
func (u *upgradeRun) fullyReplicated(cl *kgo.Client, why *string) bool {
	for i, b := range cl.SeedBrokers() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, b) // nil Topics: every topic
		cancel()
		if err != nil {
			*why = fmt.Sprintf("Metadata from node %d: %v", i, err)
			return false
		}
		if len(resp.Brokers) != len(u.c.addrs) {
			*why = fmt.Sprintf("node %d lists %d brokers", i, len(resp.Brokers))
			return false
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if len(rp.ISR) < len(rp.Replicas) || rp.Leader < 0 {
					*why = fmt.Sprintf("node %d: %s-%d ISR %v of %v, leader %d", i, deref(rt.Topic), rp.Partition, rp.ISR, rp.Replicas, rp.Leader)
					return false
				}
			}
		}
	}
	return true
}

// features returns what each broker's ApiVersions answer says of feature:
// its finalized level and the highest level it supports.
func (u *upgradeRun) features(name string) (finalized, supportedMax []int16) {
	t := u.t
	cl := newKgoClient(t, u.c.addrs)
	defer cl.Close()
	for i, b := range cl.SeedBrokers() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa-upgrade-test", "1"
		resp, err := req.RequestWith(ctx, b)
		cancel()
		require.NoError(t, err, "ApiVersions from node %d", i)
		require.NoError(t, kerr.ErrorForCode(resp.ErrorCode), "ApiVersions from node %d", i)
		f, s := int16(0), int16(0)
		for _, ff := range resp.FinalizedFeatures {
			if ff.Name == name {
				f = ff.MaxVersionLevel
			}
		}
		for _, sf := range resp.SupportedFeatures {
			if sf.Name == name {
				s = sf.MaxVersion
			}
		}
		finalized, supportedMax = append(finalized, f), append(supportedMax, s)
	}
	return finalized, supportedMax
}

// finalized returns the cluster's finalized level of feature, the same on
// every broker.
func (u *upgradeRun) finalized(name string) int16 {
	f, _ := u.features(name)
	for _, l := range f[1:] {
		require.Equal(u.t, f[0], l, "finalized %s on each broker: %v", name, f)
	}
	return f[0]
}

// supportedMax returns the highest level of feature every broker
// supports: after the upgrade, the new release's latest production level.
func (u *upgradeRun) supportedMax(name string) int16 {
	_, s := u.features(name)
	return slices.Min(s)
}

// updateFeature finalizes feature at level with UpdateFeatures (what
// kafka-features.sh upgrade does) and waits until every broker reports
// it.
func (u *upgradeRun) updateFeature(name string, level int16) {
	t := u.t
	adm := kadm.NewClient(newKgoClient(t, u.c.addrs))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: name, MaxVersionLevel: level, UpgradeType: 1})
	require.NoError(t, err, "UpdateFeatures %s=%d", name, level)
	require.NoError(t, res.Error(), "UpdateFeatures %s=%d", name, level)
	waitFor(t, 30*time.Second, fmt.Sprintf("%s %d on every broker", name, level), func() bool {
		f, _ := u.features(name)
		return slices.Min(f) == level
	})
}

// upgradeFigures are the idempotent topic's read-back counts.
type upgradeFigures struct {
	read, lost, duplicated, reordered, misplaced int
	failed, unknown, failedButWritten            int
}

// checkIdempotent reads the idempotent topic back with kgo and checks it
// against what the callbacks reported.
func (u *upgradeRun) checkIdempotent(topic string) upgradeFigures {
	t := u.t
	var f upgradeFigures
	for i, err := range u.errs {
		switch {
		case u.ackAt[i] == 0:
			t.Fatalf("record %d: its callback never ran", i)
		case err == nil:
		case errors.Is(err, producer.ErrOutcomeUnknown):
			f.unknown++
		default:
			f.failed++
		}
		if err != nil && f.failed+f.unknown <= 5 {
			t.Errorf("record %d failed: %v", i, err)
		}
	}

	ctx := realContext(t, 3*time.Minute)
	adm := kadm.NewClient(newKgoClient(t, u.c.addrs))
	defer adm.Close()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })

	cl := newKgoClient(t, u.c.addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	seen := make([]bool, u.n)
	last := map[int32]int{}
	report := func(format string, args ...any) {
		if f.lost+f.duplicated+f.reordered+f.misplaced+f.failedButWritten <= 10 {
			t.Errorf(format, args...)
		}
	}
	for int64(f.read) < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", f.read, total, topic)
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetching %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			f.read++
			if len(r.Value) != upgradeValueLen {
				f.misplaced++
				report("%s-%d@%d: a value of %d bytes", r.Topic, r.Partition, r.Offset, len(r.Value))
				return
			}
			i := int(binary.BigEndian.Uint64(r.Value))
			switch {
			case i >= u.n:
				f.misplaced++
				report("%s-%d@%d: record index %d, only %d were sent", r.Topic, r.Partition, r.Offset, i, u.n)
				return
			case seen[i]:
				f.duplicated++
				report("record %d read again at %d@%d", i, r.Partition, r.Offset)
				return
			}
			seen[i] = true
			if l, ok := last[r.Partition]; ok && i < l {
				f.reordered++
				report("partition %d: record %d at offset %d after record %d, against Send order", r.Partition, i, r.Offset, l)
			}
			last[r.Partition] = max(last[r.Partition], i)
			switch err := u.errs[i]; {
			case err != nil && !errors.Is(err, producer.ErrOutcomeUnknown):
				f.failedButWritten++
				report("record %d failed (%v) but was written at %d@%d", i, err, r.Partition, r.Offset)
			case err == nil && (r.Partition != u.partition[i] || r.Offset != u.offset[i]):
				f.misplaced++
				report("record %d read at %d@%d, samsa reported %d@%d", i, r.Partition, r.Offset, u.partition[i], u.offset[i])
			}
		})
	}
	for i, ok := range seen {
		if !ok && u.errs[i] == nil {
			f.lost++
			report("record %d acknowledged at %d@%d but never read", i, u.partition[i], u.offset[i])
		}
	}
	assert.Zero(t, f.lost, "records lost")
	assert.Zero(t, f.duplicated, "records duplicated")
	assert.Zero(t, f.reordered, "records reordered")
	assert.Zero(t, f.misplaced, "records not where samsa said")
	assert.Zero(t, f.failedButWritten, "records failed but written")
	assert.Zero(t, f.failed+f.unknown, "records failed (outcome unknown: %d)", f.unknown)
	u.figures = f
	return f
}

// checkTransactions reads the transactional topic at read_committed and
// checks that it holds exactly the committed transactions' records, once
// each, in commit order per partition, and that no transaction is left
// open. It returns how many transactions committed and aborted.
func (u *upgradeRun) checkTransactions(topic, txnID string) (committed, aborted int) {
	t := u.t
	require.NoError(t, u.txnFatal, "the transactional producer stopped on an error that is not abortable")
	for _, s := range u.txnProbls {
		t.Error(s)
	}
	var want int
	isCommitted := map[int]bool{}
	for k, o := range u.txns {
		if o.committed {
			committed++
			isCommitted[k] = true
			want += upgradeTxnRecords
		} else {
			aborted++
			t.Logf("transaction %d aborted at %v: %v", k, roundS(o.at), o.err)
		}
	}
	require.Positive(t, committed)

	ctx := realContext(t, 2*time.Minute)
	adm := kadm.NewClient(newKgoClient(t, u.c.addrs))
	defer adm.Close()
	// No transaction open: the coordinator's state, any transaction in
	// the cluster, the partition leaders' producer state, and the last
	// stable offsets (read_committed's end) equal to the high watermarks.
	dt, err := adm.DescribeTransactions(ctx, txnID)
	require.NoError(t, err)
	d, ok := dt[txnID]
	require.True(t, ok, "DescribeTransactions %s: %v", txnID, dt)
	require.NoError(t, d.Err)
	assert.Contains(t, []string{"Empty", "CompleteCommit", "CompleteAbort"}, d.State, "the transactional id's state after Close")
	open, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	require.NoError(t, err)
	assert.Empty(t, open, "transactions left open in the cluster")
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	require.NoError(t, err)
	dp.EachProducer(func(p kadm.DescribedProducer) {
		assert.Equal(t, int64(-1), p.CurrentTxnStartOffset, "producer %d still has a transaction open in %s-%d", p.ProducerID, p.Topic, p.Partition)
	})
	hwm, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	require.NoError(t, err)
	hwm.Each(func(o kadm.ListedOffset) {
		l, _ := lso.Lookup(o.Topic, o.Partition)
		assert.Equal(t, o.Offset, l.Offset, "%s-%d: last stable offset below the high watermark: a transaction is open", o.Topic, o.Partition)
	})
	u.txnState = d.State

	cl := newKgoClient(t, u.c.addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	got := 0
	seen := map[string]bool{}
	last := map[int32]int{}
	var quietSince time.Time
	for got < want || time.Since(quietSince) < 2*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		require.NoError(t, ctx.Err(), "read %d of the %d committed records", got, want)
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetching %s-%d: %v", tp, p, err)
			}
		})
		if got >= want && quietSince.IsZero() {
			quietSince = time.Now()
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			v := string(r.Value)
			k, _, _ := strings.Cut(v, "/")
			ki, err := strconv.Atoi(k)
			switch {
			case err != nil:
				t.Errorf("%s-%d@%d: value %q", r.Topic, r.Partition, r.Offset, v)
			case seen[v]:
				t.Errorf("transactional record %s read twice", v)
			case !isCommitted[ki]:
				t.Errorf("transactional record %s of an aborted or unknown transaction read at read_committed", v)
			case ki < last[r.Partition]:
				t.Errorf("partition %d: transaction %d's record after transaction %d's", r.Partition, ki, last[r.Partition])
			}
			seen[v] = true
			last[r.Partition] = max(last[r.Partition], ki)
		})
	}
	assert.Equal(t, want, got, "committed transactional records read at read_committed")
	return committed, aborted
}

// report logs the figures of the run, per event.
func (u *upgradeRun) report(stats, txnStats producer.ProducerMetrics, committed, aborted int, wire *wireCounter) {
	t := u.t
	acks := make([]int64, 0, len(u.ackAt))
	for _, a := range u.ackAt {
		if a > 0 {
			acks = append(acks, a)
		}
	}
	slices.Sort(acks)
	// While the sender waited for the finalization, no ack was due.
	idle := [2]int64{int64(u.holdFrom), int64(u.holdTo)}
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %9s %9s %21s %8s %8s %8s %9s %23s\n", "event", "from", "took", "max ack gap (at)", "retries", "unknown", "commits", "aborts", "max commit gap (at)")
	for _, e := range u.events {
		// Around the event: from its beginning to 2 s past its end, when
		// the producers were back at their pace.
		lo, hi := int64(e.begin), int64(e.end+2*time.Second)
		gap, gapAt := maxGap(acks, lo, hi, idle)
		unknown := 0
		for i, err := range u.errs {
			if err != nil && errors.Is(err, producer.ErrOutcomeUnknown) && u.ackAt[i] >= lo && u.ackAt[i] < hi {
				unknown++
			}
		}
		var commits []int64
		aborts := 0
		for _, o := range u.txns {
			if int64(o.at) < lo || int64(o.at) >= hi {
				continue
			}
			if o.committed {
				commits = append(commits, int64(o.at))
			} else {
				aborts++
			}
		}
		cgap, cgapAt := maxGap(commits, lo, hi, [2]int64{})
		fmt.Fprintf(&b, "%-40s %9s %9s %21s %8d %8d %8d %9d %23s\n", e.name, roundS(e.begin), roundS(e.end-e.begin),
			fmt.Sprintf("%v (%v)", time.Duration(gap).Round(time.Millisecond), roundS(time.Duration(gapAt))), e.retries, unknown, len(commits), aborts,
			fmt.Sprintf("%v (%v)", time.Duration(cgap).Round(time.Millisecond), roundS(time.Duration(cgapAt))))
		if len(e.steps) > 0 {
			fmt.Fprintf(&b, "%-40s   %s\n", "", strings.Join(e.steps, ", "))
		}
	}
	f := u.figures
	longest, _ := maxGap(acks, 0, int64(u.since()), idle)
	t.Logf("rolling upgrade %s → %s under load:\n%s"+
		"idempotent: %d records sent, %d read back, %d lost, %d duplicated, %d reordered, %d failed, %d outcome unknown; %d batches, %d batch retries, longest ack gap %v\n"+
		"idempotent sender held before its last 5%% from %v to %v (waiting for the finalization)\n"+
		"transactional: %d committed, %d aborted, %d batch retries, state after Close %s; requests on the wire: %v",
		u.from, u.to, b.String(), u.n, f.read, f.lost, f.duplicated, f.reordered, f.failed, f.unknown, stats.BatchAckTotal, stats.BatchRetryTotal,
		time.Duration(longest).Round(time.Millisecond), roundS(u.holdFrom), roundS(u.holdTo),
		committed, aborted, txnStats.BatchRetryTotal, u.txnState, wire.counts())
	var lines []string
	for l := range strings.Lines(u.logBuf.String()) {
		lines = append(lines, strings.TrimRight(l, "\n"))
	}
	if len(lines) > 60 {
		lines = append(lines[:30], append([]string{fmt.Sprintf("... %d lines ...", len(lines)-60)}, lines[len(lines)-30:]...)...)
	}
	t.Logf("the producers' log (Info and above):\n%s", strings.Join(lines, "\n"))
}

// maxGap returns the longest interval between consecutive values of the
// sorted times around the window [lo, hi): between those in it, and from
// the last one before it and to the first one after it; 0 without any.
// The part of an interval inside idle (from, to: when nothing was sent,
// so no value was due) does not count. at is when it began.
func maxGap(sorted []int64, lo, hi int64, idle [2]int64) (gap, at int64) {
	i, _ := slices.BinarySearch(sorted, lo)
	j, _ := slices.BinarySearch(sorted, hi)
	for k := max(i, 1); k < min(j+1, len(sorted)); k++ {
		a, b := sorted[k-1], sorted[k]
		d := b - a
		if overlap := min(b, idle[1]) - max(a, idle[0]); overlap > 0 {
			d -= overlap
		}
		if d > gap {
			gap, at = d, a
		}
	}
	return gap, at
}

// TestUpgradeMaxGap checks the rolling upgrade's gap measure: the gaps
// across the window's edges count, values far outside it do not.
func TestUpgradeMaxGap(t *testing.T) {
	times := []int64{0, 10, 20, 50, 55, 100, 200}
	cases := []struct {
		name    string
		lo, hi  int64
		idle    [2]int64
		gap, at int64
	}{
		{"everything", 0, 1000, [2]int64{}, 100, 100},
		{"inside", 12, 52, [2]int64{}, 30, 20},          // 10→20, 20→50, 50→55 around [12, 52)
		{"edge after", 56, 60, [2]int64{}, 45, 55},      // no value inside: 55→100 spans it
		{"edge before", 101, 150, [2]int64{}, 100, 100}, // 100→200
		{"before all", -10, -5, [2]int64{}, 0, 0},
		{"after all", 300, 400, [2]int64{}, 0, 0},
		{"idle inside a gap", 0, 1000, [2]int64{110, 190}, 45, 55},     // 100→200 counts 20, 55→100 is the longest
		{"idle over a gap's end", 0, 1000, [2]int64{80, 150}, 50, 100}, // 55→100 counts 25, 100→200 counts 50
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gap, at := maxGap(times, tc.lo, tc.hi, tc.idle)
			require.Equal(t, tc.gap, gap, "gap")
			require.Equal(t, tc.at, at, "at")
		})
	}
}
