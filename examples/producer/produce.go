package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// sendSampleMask picks the records whose Send call is timed: one in 64,
// so that reading the clock twice does not slow the loop down.
const sendSampleMask = 63

// closeTimeout bounds Close after the run: Flush has already waited for
// every record, so this only matters when Flush failed.
const closeTimeout = 10 * time.Second

// interruptGrace bounds Close after an interrupt: records still buffered
// then fail with ErrClosed and the partial summary is printed at once.
const interruptGrace = 500 * time.Millisecond

// produce runs the workload described by o and returns its summary. The
// error is for setup failures (the cluster or the producer could not
// start); failed records and verification problems are in the summary.
func produce(ctx context.Context, o options, progressOut io.Writer) (*summary, error) {
	s := &summary{
		Topic:       o.topic,
		Compression: o.compression.String(),
		Acks:        o.acks.String(),
		Idempotent:  o.idempotent,
		Keys:        o.keys,
		RecordSize:  o.recordSize,
		Sent:        o.records,
		Linger:      o.linger,
		BatchSize:   o.effectiveBatchSize(),
		Settings:    o.settings,
	}
	if o.file != nil {
		s.PropertiesFile = o.file.name
		s.PropertiesUsed = o.file.otherKeys()
		s.IgnoredProperties = o.file.cfg.IgnoredProperties()
	}
	brokers := o.brokers
	var cluster *samsatest.Cluster
	if len(brokers) == 0 {
		var err error
		cluster, err = samsatest.NewCluster(samsatest.Config{Brokers: 3, Topics: map[string]int32{o.topic: int32(o.partitions)}})
		if err != nil {
			return nil, fmt.Errorf("starting the embedded cluster: %w", err)
		}
		defer cluster.Close()
		brokers = cluster.Addrs()
		s.Cluster = fmt.Sprintf("embedded, %d brokers", len(brokers))
		s.Partitions = o.partitions // read again after the run
	} else {
		s.Cluster = fmt.Sprint(brokers)
	}

	p, err := producer.New(o.config(brokers))
	if errors.Is(err, producer.ErrInvalidConfig) {
		// parseOptions checks the flag combinations New refuses; this is
		// a safety net that still exits 2.
		return nil, usageError{msg: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if o.metricsAddr != "" {
		ms, err := serveMetrics(o.metricsAddr, p)
		if err != nil {
			_ = p.Close(context.Background())
			return nil, err
		}
		defer ms.stop()
	}
	keys := makeKeys(o.keys)
	t := newTracker(o.records, len(keys))

	var bar *progressBar
	if progressOut != nil {
		bar = startProgress(progressOut, p.Metrics, &t.acked, &t.failed, o.records, int64(o.recordSize)+avgKeyLen(keys))
	}

	start := time.Now()
	var interrupted bool
	var txnErr error
	if o.txnID != "" {
		s.Transactional = true
		s.TxnRecords = o.txnRecords
		interrupted, s.Transactions, txnErr = sendTransactions(ctx, p, o, keys, t)
	} else {
		interrupted = sendAll(ctx, p, o, keys, t, 0, o.records)
	}
	flushErr := p.Flush(ctx)
	elapsed := time.Since(start)
	metrics := p.Metrics()
	if bar != nil {
		bar.stop()
	}

	grace := closeTimeout
	if ctx.Err() != nil {
		grace = interruptGrace
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), grace)
	closeErr := p.Close(closeCtx)
	cancel()

	s.PartitionsAsked = o.partitions
	if ctx.Err() == nil {
		checkPartitions(ctx, s, o, brokers)
	}
	s.fill(t, elapsed)
	s.fillMetrics(&metrics.Producer)
	switch {
	case interrupted || ctx.Err() != nil:
		s.Interrupted = true
		s.problem(fmt.Sprintf("interrupted after %d of %d records were sent", t.sent.Load(), o.records))
	case txnErr != nil:
		s.problem(fmt.Sprintf("%v; %d of %d records not sent", txnErr, o.records-t.sent.Load(), o.records))
	case flushErr != nil:
		s.problem("Flush: " + flushErr.Error())
	case closeErr != nil:
		s.problem("Close: " + closeErr.Error())
	}
	t.check(s, o)
	if cluster != nil && !s.Interrupted {
		if progressOut != nil {
			fmt.Fprintf(progressOut, "verifying: reading %d records back from the embedded cluster...\n", s.Records)
		}
		if o.acks == producer.AcksNone {
			// Records completed once written to the connection: give the
			// brokers a moment to append them.
			waitForRecords(ctx, cluster, o.topic, o.partitions, s.Records)
		}
		// A read_committed read-back: with transactions, records of an
		// aborted or unfinished transaction count as missing.
		rb := readBack(ctx, cluster, o.topic, o.partitions, o.records, keys, o.recordSize)
		if ctx.Err() != nil {
			s.Interrupted = true
			s.problem("interrupted while verifying")
		}
		s.ReadBack = true
		s.ReadBackRecords = rb.records
		if msg := rb.problem(); msg != "" {
			s.problem("read back: " + msg)
		}
		s.PerKeyOrderVerified = s.PerKeyOrderVerified && rb.orderOK()
	}
	s.Verified = len(s.Problems) == 0
	return s, nil
}

// sendAll sends records from to end-1 through SendCallback, one
// goroutine, no allocation per record. Record i carries i (big-endian) in
// its first 8 value bytes and, with keys, key i mod len(keys). It reports
// whether ctx ended first.
func sendAll(ctx context.Context, p *producer.Producer, o options, keys [][]byte, t *tracker, from, end int64) bool {
	value := makeValue(o.recordSize)
	rec := &producer.Record{Topic: o.topic, Value: value}
	for seq := from; seq < end; seq++ {
		if seq&1023 == 0 && ctx.Err() != nil {
			return true
		}
		binary.BigEndian.PutUint64(value, uint64(seq))
		if len(keys) > 0 {
			rec.Key = keys[seq%int64(len(keys))]
		}
		pd := t.slot()
		sent := t.now()
		pd.seq, pd.sent = seq, sent
		p.SendCallback(ctx, rec, pd.fn) // pd may be recycled from here on
		if seq&sendSampleMask == 0 {
			t.sendLat.record(time.Duration(t.now() - sent))
		}
		t.sent.Store(seq + 1)
	}
	return false
}

// sendTransactions sends o.records records as sendAll does, in
// transactions of o.txnRecords records each, and commits each one. It
// returns whether ctx ended first, the number of transactions committed,
// and the error that stopped it: a transaction that could not begin or
// commit (it aborts the transaction then, so that its records fail with
// it). An interrupted transaction is aborted.
func sendTransactions(ctx context.Context, p *producer.Producer, o options, keys [][]byte, t *tracker) (interrupted bool, committed int64, err error) {
	for from := int64(0); from < o.records; from += o.txnRecords {
		if err := p.BeginTransaction(); err != nil {
			return false, committed, fmt.Errorf("transaction %d: BeginTransaction: %w", committed+1, err)
		}
		end := min(from+o.txnRecords, o.records)
		if sendAll(ctx, p, o, keys, t, from, end) || ctx.Err() != nil {
			abortTransaction(p)
			return true, committed, nil
		}
		if err := p.CommitTransaction(ctx); err != nil {
			if ctx.Err() != nil {
				abortTransaction(p)
				return true, committed, nil
			}
			if producer.IsAbortable(err) {
				abortTransaction(p)
			}
			return false, committed, fmt.Errorf("transaction %d (records %d to %d): CommitTransaction: %w", committed+1, from, end-1, err)
		}
		committed++
	}
	return false, committed, nil
}

// abortTransaction aborts the open transaction, within closeTimeout; its
// records not yet sent fail, which the summary counts. Its error is
// dropped: the run has failed already.
func abortTransaction(p *producer.Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = p.AbortTransaction(ctx)
}

// makeKeys returns n distinct keys "key-0" ... "key-<n-1>".
func makeKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = strconv.AppendInt([]byte("key-"), int64(i), 10)
	}
	return keys
}

func avgKeyLen(keys [][]byte) int64 {
	if len(keys) == 0 {
		return 0
	}
	var n int64
	for _, k := range keys {
		n += int64(len(k))
	}
	return n / int64(len(keys))
}

// makeValue returns a value of size bytes: room for the sequence number,
// then random capital letters, the same for every record, like Kafka's
// kafka-producer-perf-test payload.
func makeValue(size int) []byte {
	r := rand.New(rand.NewPCG(6, 29))
	v := make([]byte, size)
	for i := minRecordSize; i < size; i++ {
		v[i] = 'A' + byte(r.IntN(26))
	}
	return v
}

// tracker collects the outcome of every record. Its callbacks run on the
// producer's completion goroutine, one at a time, except those for records
// that Send itself rejected, which run on the sending goroutine: so the
// success path (latency histogram, order state) is touched by one
// goroutine only, and the failure path uses atomics and a mutex.
type tracker struct {
	base  time.Time
	slots sync.Pool // *pending

	sent, acked, failed atomic.Int64

	errMu    sync.Mutex
	firstErr error

	sendLat histogram // the sending goroutine's

	// Completion goroutine only (read after Flush).
	ackLat     histogram
	keyPart    []int32 // per key: its partition, -1 before its first ack
	keyLastSeq []int64 // per key: sequence number of its last ack
	partLast   []partLast
	disorder   int64
	firstOrder string
}

// partLast is the last acknowledged record of a partition.
type partLast struct {
	seen        bool
	seq, offset int64
}

// pending is a record between SendCallback and its callback. It carries
// the record's sequence number and send time to the callback; fn is its
// done method, bound once, so that a recycled pending costs no allocation.
type pending struct {
	t    *tracker
	seq  int64
	sent int64 // t.now() at Send
	fn   func(producer.RecordMetadata, error)
}

func newTracker(records int64, keys int) *tracker {
	t := &tracker{base: time.Now(), keyPart: make([]int32, keys), keyLastSeq: make([]int64, keys)}
	for i := range t.keyPart {
		t.keyPart[i] = -1
		t.keyLastSeq[i] = -1
	}
	t.slots.New = func() any {
		pd := &pending{t: t}
		pd.fn = pd.done
		return pd
	}
	return t
}

// now is the monotonic time since the tracker started, in nanoseconds.
func (t *tracker) now() int64 { return int64(time.Since(t.base)) }

func (t *tracker) slot() *pending { return t.slots.Get().(*pending) }

func (pd *pending) done(md producer.RecordMetadata, err error) {
	t, seq, sent := pd.t, pd.seq, pd.sent
	t.slots.Put(pd)
	if err != nil {
		t.fail(err)
		return
	}
	t.ackLat.record(time.Duration(t.now() - sent))
	t.observe(seq, md)
	t.acked.Add(1)
}

func (t *tracker) fail(err error) {
	t.failed.Add(1)
	t.errMu.Lock()
	if t.firstErr == nil {
		t.firstErr = err
	}
	t.errMu.Unlock()
}

// observe checks an acknowledgement against the ones before it: within a
// partition, callbacks come in Send order with increasing offsets, and all
// records of a key go to one partition.
func (t *tracker) observe(seq int64, md producer.RecordMetadata) {
	if md.Partition < 0 {
		t.disordered(fmt.Sprintf("record %d completed with partition %d", seq, md.Partition))
		return
	}
	if int(md.Partition) >= len(t.partLast) {
		t.partLast = append(t.partLast, make([]partLast, int(md.Partition)+1-len(t.partLast))...)
	}
	pl := &t.partLast[md.Partition]
	if pl.seen {
		switch {
		case seq < pl.seq:
			t.disordered(fmt.Sprintf("partition %d: record %d completed after record %d", md.Partition, seq, pl.seq))
		case md.Offset >= 0 && md.Offset <= pl.offset:
			t.disordered(fmt.Sprintf("partition %d: record %d got offset %d, not above record %d's %d",
				md.Partition, seq, md.Offset, pl.seq, pl.offset))
		}
	}
	*pl = partLast{seen: true, seq: seq, offset: md.Offset}
	if n := int64(len(t.keyPart)); n > 0 {
		k := seq % n
		switch {
		case t.keyPart[k] >= 0 && t.keyPart[k] != md.Partition:
			t.disordered(fmt.Sprintf("key %d: record %d went to partition %d, earlier ones to %d", k, seq, md.Partition, t.keyPart[k]))
		case seq < t.keyLastSeq[k]:
			t.disordered(fmt.Sprintf("key %d: record %d completed after record %d", k, seq, t.keyLastSeq[k]))
		}
		t.keyPart[k], t.keyLastSeq[k] = md.Partition, seq
	}
}

func (t *tracker) disordered(msg string) {
	if t.disorder == 0 {
		t.firstOrder = msg
	}
	t.disorder++
}

// check adds to s what the producer saw: every record acknowledged, in
// order. It runs after Flush, so the completion goroutine's writes are
// visible.
func (t *tracker) check(s *summary, o options) {
	if n := t.failed.Load(); n > 0 {
		t.errMu.Lock()
		s.FirstError = t.firstErr.Error()
		t.errMu.Unlock()
		s.problem(fmt.Sprintf("%d records failed, the first with: %s", n, s.FirstError))
	}
	if acked, failed, sent := t.acked.Load(), t.failed.Load(), t.sent.Load(); !s.Interrupted && acked+failed != sent {
		s.problem(fmt.Sprintf("%d records succeeded and %d failed, of %d sent", acked, failed, sent))
	}
	s.PerKeyOrderVerified = t.disorder == 0 && !s.Interrupted
	if t.disorder > 0 {
		s.problem(fmt.Sprintf("%d completions out of order, the first: %s", t.disorder, t.firstOrder))
	}
}

// waitForRecords waits, for at most readBackWait, until the partitions of
// topic hold n records.
func waitForRecords(ctx context.Context, c *samsatest.Cluster, topic string, partitions int, n int64) {
	deadline := time.Now().Add(readBackWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var total int64
		for part := range int32(partitions) {
			hw, _ := c.HighWatermark(topic, part)
			total += hw
		}
		if total >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readBackWait bounds waitForRecords.
const readBackWait = 5 * time.Second
