// Observability wiring: where each goroutine calls Config.Hooks and feeds
// the recorder behind Producer.Metrics. Call sites in Send, the IO goroutine
// and the completion goroutine are one line each; the work is here.

package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
	"github.com/samsa-go/samsa/spool"
)

// Metrics returns a snapshot of the producer's metrics (see Metrics). It is
// safe from any goroutine, hooks and callbacks included; it takes no lock
// the producer's goroutines wait for, beyond a map copy. It allocates (the
// snapshot's slices and some histogram scratch), so call it per scrape, not
// per record.
func (p *Producer) Metrics() Metrics {
	live := liveGauges{
		bufferAvailable:      p.pool.Available(),
		bufferTotal:          p.pool.Size(),
		buffered:             p.pending[0].Load() + p.pending[1].Load(),
		batchAcks:            p.stats.batches.Load(),
		batchAckBytes:        p.stats.batchBytes.Load(),
		batchAckUncompressed: p.stats.uncompressed.Load(),
		batchRetries:         p.stats.retries.Load(),
		throttled:            time.Duration(p.stats.throttled.Load()),
	}
	m := p.rec.snapshot(time.Now(), live)
	if p.spool != nil {
		m.Spool = spoolMetricsOf(p.spool.Metrics())
		e := p.SpoolExactlyOnceMetrics()
		m.Spool.DuplicatesSkipped, m.Spool.TransactionTotal, m.Spool.TransactionAbortTotal = e.DuplicatesSkipped, e.Transactions, e.Aborted
	}
	return m
}

// recordObs is what a record keeps for the record-level hooks: the context
// the HookRecordBuffered hooks returned and when Send took it; for a
// record whose Send context can end, that context's group (cancel.go);
// and, with Config.Spool, its spool sequence. Only records sent while such
// a hook exists, or with a spool, have one of their own (completion.obs);
// records sent with such a context and no hook (and no spool) share their
// group's, and others have none.
type recordObs struct {
	hs   *hooks // nil: no HookRecordCompleted hooks (a group's own)
	ctx  context.Context
	sent time.Time
	g    *ctxGroup // nil: Send's context cannot end
	// spool is set for a record in Config.Spool's log at seq: its
	// completion acknowledges it there once its outcome is final
	// (spool.go). Never set in a group's shared recordObs.
	spool *spool.Spool
	seq   uint64
}

// observeSend runs the HookRecordBuffered hooks, if any, on a private copy
// of rec (with its own Headers slice, which they may change) and returns the
// copy, to be encoded instead of rec (rec itself without such hooks), and
// the record's recordObs (nil without HookRecordCompleted hooks). Send's
// goroutine, only when hs.records.
func (p *Producer) observeSend(ctx context.Context, rec *Record) (*Record, *recordObs) {
	if len(p.hooks.recordBuffered) > 0 {
		cp := new(Record)
		*cp = *rec
		cp.Headers = slices.Clip(slices.Clone(rec.Headers))
		ctx = p.hooks.onRecordBuffered(ctx, cp)
		rec = cp
	}
	if len(p.hooks.recordCompleted) == 0 {
		return rec, nil
	}
	return rec, &recordObs{hs: p.hooks, ctx: ctx, sent: time.Now()}
}

// recordObsCharge is the pool memory charged per record for its recordObs:
// its size with HookRecordCompleted hooks or a spool, else 0. What the hooks keep
// themselves (a span behind the context they return) is theirs, and not
// charged.
func (hs *hooks) recordObsCharge(spooled bool) int {
	if !spooled && (hs == nil || len(hs.recordCompleted) == 0) {
		return 0
	}
	return int(unsafe.Sizeof(recordObs{}))
}

// completed acknowledges a spooled record whose outcome is final
// (spoolFinal), then runs the HookRecordCompleted hooks for the record. The
// goroutine that completes it (completion.deliver), before its Future or
// callback.
func (o *recordObs) completed(md RecordMetadata, err error) {
	if o.g != nil {
		o.g.release()
	}
	if o.spool != nil && spoolFinal(err) {
		o.spool.Ack(o.seq)
	}
	if o.hs != nil {
		o.hs.onRecordCompleted(o.ctx, RecordCompletion{Metadata: md, Err: err, Elapsed: time.Since(o.sent)})
	}
}

// observeExhausted reports a record of size bytes that Send failed with
// err, if that is ErrBufferExhausted. Send's goroutine; a cold path.
func (p *Producer) observeExhausted(topic string, size int, err error) {
	if !errors.Is(err, ErrBufferExhausted) {
		return
	}
	p.rec.bufferWaited(0, true)
	if len(p.hooks.bufferExhausted) > 0 {
		p.hooks.onBufferExhausted(topic, size)
	}
}

// failedOf counts n failed records of topic (none valid: only the
// producer's totals). Send's goroutine for records it fails itself, the
// completion goroutine for parked records, failLate.
func (p *Producer) failedOf(topic string, n int) {
	var ts *topicStats
	if t, ok := p.topics.Load(topic); ok {
		ts = t.(*topicState).stats
	}
	p.rec.recordsFailed(ts, n)
}

// batchFailed counts the records of a failed batch; its topic's stats are
// found by pointer. The completion goroutine.
func (p *Producer) batchFailed(b *batch) {
	p.rec.recordsFailed(b.Partition.IO.topic.ts.stats, b.Records.Len())
}

// onBufferWaited is accumulator.Config.OnWaited: Send's goroutine, after a
// wait for pool memory.
func (p *Producer) onBufferWaited(topic string, waited time.Duration, err error) {
	p.rec.bufferWaited(waited, false) // exhaustion is counted by observeExhausted
	if len(p.hooks.bufferWaited) > 0 {
		if errors.Is(err, accumulator.ErrClosing) {
			err = fmt.Errorf("%w: %w", ErrClosed, err) // as Send reports it
		}
		p.hooks.onBufferWaited(topic, waited, err)
	}
}

// onMetadataRefresh is metadata.Config.OnRefresh: the refresh goroutine.
func (p *Producer) onMetadataRefresh(r metadata.Refresh) {
	if r.Err == nil {
		p.rec.metadataRefreshed(time.Now())
		p.metaOnce.Do(func() { close(p.metaReady) })
	}
	if len(p.hooks.metadataRefreshed) > 0 {
		p.hooks.onMetadataRefreshed(MetadataRefresh{
			Broker: BrokerInfo{NodeID: -1, Addr: r.Addr}, Topics: r.Topics, Brokers: r.Brokers, Latency: r.Latency, Err: r.Err,
		})
	}
}

// newTopicStats links a new topic's stats to its parked records.
func (p *Producer) newTopicStats(t *topicState) *topicStats {
	ts := p.rec.topic(t.acc.Name)
	parked := t.acc.Parked
	ts.parkedOf.CompareAndSwap(nil, &parked)
	return ts
}

func (br *ioBroker) info() BrokerInfo { return BrokerInfo{NodeID: br.id, Addr: br.addr} }

// brokerConn returns the connection config of a dial to br: s.connCfg with
// callbacks that count br's bytes and run the request hooks, on the
// connection's writer and reader goroutines.
func (s *sink) brokerConn(br *ioBroker) conn.Config {
	cfg := s.connCfg
	bs, hs, rec, info := br.stats, s.p.hooks, s.p.rec, br.info()
	var writer, reader goroutineCache // each used by its goroutine only
	cfg.OnWrite = func(w conn.WriteInfo) {
		if w.Err == nil {
			rec.wrote(bs, w.Bytes)
		}
		if len(hs.brokerRequestWritten) > 0 {
			hs.onBrokerRequestWritten(&writer, info, RequestWritten{Key: w.Key, Version: w.Version, Bytes: w.Bytes, Queued: w.Queued, Write: w.Write, Err: w.Err})
		}
	}
	cfg.OnRead = func(r conn.ReadInfo) {
		rec.read(bs, r.Bytes)
		if len(hs.brokerResponseRead) > 0 {
			hs.onBrokerResponseRead(&reader, info, ResponseRead{Key: r.Key, Version: r.Version, Bytes: r.Bytes, Latency: r.Latency, Err: r.Err})
		}
	}
	return cfg
}

// observeDial notes a dial's result. IO goroutine.
func (s *sink) observeDial(br *ioBroker, took time.Duration, err error) {
	if err == nil {
		s.p.rec.connected(br.stats)
	}
	if len(s.p.hooks.brokerConnected) > 0 {
		s.p.hooks.onBrokerConnected(br.info(), took, err)
	}
}

// dropConn closes br's connection and notes it; err is what broke it, nil
// when the producer drops it. IO goroutine. The close runs on a goroutine
// of s.background, which shutdown waits for: conn.Close waits for the
// connection's goroutines, and they run hooks (HookBrokerRequestWritten,
// HookBrokerResponseRead) that must not stall the IO goroutine.
func (s *sink) dropConn(br *ioBroker, err error) {
	c := br.conn
	s.background.Go(func() { c.Close() })
	br.conn = nil
	s.p.rec.disconnected(br.stats)
	if len(s.p.hooks.brokerDisconnected) > 0 {
		s.p.hooks.onBrokerDisconnected(br.info(), err)
	}
}

// observeSent notes a batch put in a Produce request to br: a first send
// or a resend. IO goroutine.
func (s *sink) observeSent(b *batch) {
	s.p.rec.batchSent(b.Partition.IO.topic.ts.stats, batchSample{
		records:      b.Records.Len(),
		recordBytes:  max(b.IO.uncompressed-recordbatch.HeaderSize, 0),
		uncompressed: b.IO.uncompressed,
		wire:         len(b.IO.raw),
		queued:       s.now.Sub(b.Created),
		retry:        b.IO.attempts > 1,
	})
}

// observeAnswer notes the end of a Produce request to br (answered or not)
// and a throttle its answer asks for, and returns the request's latency.
// IO goroutine.
func (s *sink) observeAnswer(r *produceResponse) time.Duration {
	br := r.broker
	var lat time.Duration
	if r.req != nil {
		lat = s.now.Sub(r.req.sentAt)
	}
	resp, _ := r.resp.(*kmsg.ProduceResponse)
	s.p.rec.responseRead(br.stats, lat, r.err == nil && resp != nil)
	if resp != nil && resp.ThrottleMillis > 0 {
		d := time.Duration(resp.ThrottleMillis) * time.Millisecond
		s.p.rec.throttled(br.stats, d)
		if len(s.p.hooks.brokerThrottled) > 0 {
			s.p.hooks.onBrokerThrottled(br.info(), d)
		}
	}
	return lat
}

// observeBatch runs the HookBatchWritten hooks for one batch of an answered
// (or failed) request; rp is the batch's part of the answer (nil when the
// request failed, with err, or the answer left it out). IO goroutine.
func (s *sink) observeBatch(br *ioBroker, b *batch, lat time.Duration, rp *kmsg.ProduceResponseTopicPartition, answered bool, err error) {
	if len(s.p.hooks.batchWritten) == 0 {
		return
	}
	ip := b.Partition.IO
	switch {
	case err != nil:
	case rp != nil:
		err = kerr.ForCode(rp.ErrorCode)
	case answered:
		err = errors.New("the broker's answer left the partition out")
	}
	s.p.hooks.onBatchWritten(BatchWritten{
		Topic: ip.topic.name, Partition: ip.acc.ID, Records: b.Records.Len(),
		UncompressedBytes: b.IO.uncompressed, WireBytes: len(b.IO.raw), Codec: batchCodec(b.IO.raw),
		Latency: lat, Attempt: b.IO.attempts, Broker: br.info(), Err: err,
	})
}

// batchCodec reads the codec from a finished batch's attributes (a batch
// that compression did not shrink goes out uncompressed).
func batchCodec(raw []byte) compression.Type {
	const attributesLow = 22 // the attributes' low byte in a v2 batch header
	if len(raw) <= attributesLow {
		return compression.None
	}
	return compression.Type(raw[attributesLow] & 7)
}

// observeParked notes that t started parking. IO goroutine.
func (s *sink) observeParked(t *ioTopic) {
	if !t.parkedAt.IsZero() {
		return
	}
	t.parkedAt = s.now
	if len(s.p.hooks.topicParked) > 0 {
		s.p.hooks.onTopicParked(t.name)
	}
}

// unpark ends t's parking: its parked records moved (err nil) or failed
// with err; records and bytes were parked when that step began. IO
// goroutine.
func (s *sink) unpark(t *ioTopic, records, bytes int64, err error) {
	delete(s.parked, t)
	if t.parkedAt.IsZero() {
		return
	}
	since := s.now.Sub(t.parkedAt)
	t.parkedAt = time.Time{}
	if len(s.p.hooks.topicUnparked) > 0 {
		s.p.hooks.onTopicUnparked(t.name, TopicUnparked{Records: int(records), Bytes: int(bytes), Parked: since, Err: err})
	}
}
