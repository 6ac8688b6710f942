package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"

	"github.com/samsa-go/samsa/internal/freelist"
)

type batch = accumulator.Batch[completion]

// sink is the producer's IO goroutine: the only owner of everything below.
// It reacts to accumulator events (batches opened, sealed, records parked),
// metadata updates, broker responses and timers; it seals lingering batches,
// moves parked records, compresses, groups batches per leader into Produce
// requests, and hands finished batches to the completer. It never blocks on
// I/O: dials, metadata and InitProducerId run in short-lived goroutines (one
// per dial or request, never per record or batch) that post their results
// back, and connections call back into channels.
type sink struct {
	p       *Producer
	cfg     *Config
	connCfg conn.Config

	brokers map[int32]*ioBroker
	topics  map[string]*ioTopic

	events     []accumulator.Event[completion]
	lingerQ    fifo[opened] // batches by open time, for linger
	expireQ    fifo[opened] // batches by open time, for delivery timeout
	expireLive int          // expireQ's length after its last filtering
	parked     map[*ioTopic]struct{}

	creatingTopics bool // a CreateTopics request is in flight (admin.go)
	holding        bool // the pool holds released memory for moveParked (bufferpool.Holder)

	// Produce answers, queued by the connections' goroutines in arrival
	// order: a queue under a lock never blocks them and keeps the order.
	respMu   sync.Mutex
	respQ    []produceResponse
	respKick chan struct{}
	respWork []produceResponse
	dials    chan dialResult
	admin    chan func() // results of InitProducerId and CreateTopics, run on the IO goroutine

	timer   *time.Timer
	scratch []byte
	now     time.Time

	dialing sync.WaitGroup // dial goroutines; Close waits for them
	debug   bool           // the logger takes Debug records: per-batch logs are built only then

	// Idempotence (nil state when disabled).
	idem *idempotence

	inflight int // Produce requests in flight, all brokers

	reqFree freelist.List[*produceRequest] // see newRequest

	compress *compressors // nil: the IO goroutine compresses alone
	round    []*batch     // precompress's batches
}

type opened struct {
	part *accumulator.Partition[completion]
	b    *batch
	gen  uint64
	at   time.Time
}

type ioTopic struct {
	name     string
	ts       *topicState
	id       [16]byte
	parts    []*ioPart
	err      error     // last metadata error
	creating bool      // CreateTopics in progress
	createAt time.Time // next CreateTopics attempt
	failing  failKind  // why Sends fail fast (accumulator.Topic.SetFailing), if they do
}

// failKind says why a topic fails its records fast.
type failKind uint8

const (
	notFailing  failKind = iota
	failFatal            // a non-retriable topic error (TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION)
	failMissing          // not present in metadata for MaxBlock
)

type ioPart struct {
	topic  *ioTopic
	acc    *accumulator.Partition[completion]
	leader int32 // -1 unknown
	epoch  int32

	retry      []*batch // batches to resend, oldest first
	inflight   []*batch // in flight, in send order
	resent     int      // batches in inflight on their second or later attempt
	failures   int      // consecutive retriable failures, for backoff
	backoff    time.Time
	lastErr    error
	readyOn    int32 // the broker whose ready list holds it, or -1
	nextSeq    int32
	lastAcked  int64   // highest acknowledged offset, -1 before the first
	gapped     bool    // its sequence has a gap: the next epoch bump is for it
	confirmed  bool    // a batch succeeded under the current producer id and epoch
	listed     []int32 // brokers whose ready lists hold it (readyOn's is the live one)
	hasSealed  bool    // the accumulator announced sealed batches
	pendingOut []*batch
}

type ioBroker struct {
	id       int32
	addr     string
	conn     *conn.Conn
	dialing  bool
	failures int
	lastErr  error // why the last dial failed; nil once connected
	backoff  time.Time
	inflight int
	ready    []*ioPart
	lingered []lingering // open batches past Linger, waiting for an answer (see sealLingered)
	answers  uint64      // Produce requests answered (or failed)
}

type produceResponse struct {
	broker  *ioBroker
	conn    *conn.Conn
	req     *produceRequest // freed once the answer is handled
	batches []*batch
	resp    kmsg.Response
	err     error
}

type dialResult struct {
	broker *ioBroker
	conn   *conn.Conn
	err    error
}

func newSink(p *Producer, connCfg conn.Config) *sink {
	s := &sink{
		p:        p,
		cfg:      &p.cfg,
		connCfg:  connCfg,
		brokers:  make(map[int32]*ioBroker),
		topics:   make(map[string]*ioTopic),
		parked:   make(map[*ioTopic]struct{}),
		respKick: make(chan struct{}, 1),
		dials:    make(chan dialResult, 8),
		admin:    make(chan func(), 8),
		timer:    time.NewTimer(time.Hour),
		reqFree:  freelist.List[*produceRequest]{Max: maxFreeRequests},
	}
	if !p.cfg.DisableIdempotence {
		s.idem = &idempotence{producerID: -1, epoch: -1}
	}
	s.debug = p.log != nil && p.log.Enabled(context.Background(), slog.LevelDebug)
	// More compressing goroutines than GOMAXPROCS only take turns (and
	// the compressor keeps idle encoders for GOMAXPROCS callers).
	if n := min(p.cfg.CompressionConcurrency, runtime.GOMAXPROCS(0)); n > 1 && p.cfg.Compression != compression.None {
		s.compress = newCompressors(s, n)
	}
	return s
}

func (s *sink) run() {
	defer s.shutdown()
	for {
		select {
		case <-s.p.quit:
			return
		case <-s.p.acc.Wake():
		case <-s.respKick:
			s.now = time.Now()
			for _, r := range s.takeResponses() {
				s.handleResponse(r)
				s.freeRequest(r.req)
			}
		case d := <-s.dials:
			s.handleDial(d)
		case f := <-s.admin:
			s.now = time.Now()
			f()
		case <-s.p.meta.Updates():
			s.now = time.Now()
			s.applyMetadata()
		case <-s.timer.C:
		}
		s.step()
	}
}

// step does everything that may have become possible.
func (s *sink) step() {
	s.now = time.Now()
	s.drainEvents()
	s.sealLingered()
	s.moveParked()
	s.expire()
	s.ensureProducerID()
	s.sendAll()
	s.resetTimer()
}

func (s *sink) drainEvents() {
	s.events = s.p.acc.Events(s.events)
	for _, e := range s.events {
		switch e.Kind {
		case accumulator.Opened:
			o := opened{part: e.Partition, b: e.Batch, gen: e.Gen, at: e.At}
			s.lingerQ.push(o)
			s.trackExpiry(o)
		case accumulator.Sealed:
			ip := e.Partition.IO.(*ioPart)
			ip.hasSealed = true
			s.markReady(ip)
		case accumulator.Parked:
			t := s.topicFor(e.Topic.Name)
			s.parked[t] = struct{}{}
			s.p.meta.Want(t.name)
			// The snapshot may already hold the topic: Send asked for it
			// before this event was drained, and its update came first.
			s.applyMetadata()
		}
	}
}

// trackExpiry adds o to the expiry queue, which stays sorted by time: a
// batch of parked records or a split half can be older than the batches
// opened just before it.
func (s *sink) trackExpiry(o opened) {
	s.expireQ.insertSorted(o, func(a, b opened) bool { return a.at.After(b.at) })
}

// topicFor returns the IO goroutine's state of a topic the producer knows.
func (s *sink) topicFor(name string) *ioTopic {
	if t := s.topics[name]; t != nil {
		return t
	}
	ts, _ := s.p.topic(name) // known valid: a Send created it
	t := &ioTopic{name: name, ts: ts}
	s.topics[name] = t
	return t
}

// sealLingered seals batches that have waited Linger (all of them while a
// Flush is in progress or the producer is closing).
//
// A lingered batch whose leader has a Produce request in flight is not
// sealed yet: it stays open, taking more records, until that broker answers
// a request (or has none in flight), and then goes with the others that
// waited. Under load (many partitions, or a slow broker) batches then hold
// what arrived during a round trip instead of a linger's worth each, so a
// record costs less with 10 000 partitions; an idle producer still sends
// after Linger, and a batch waits at most one answer, which comes within
// RequestTimeout. Full batches never wait for this: up to MaxInFlight
// requests carry them.
func (s *sink) sealLingered() {
	all := s.p.flushing.Load() > 0
	for _, br := range s.brokers {
		n := 0
		for n < len(br.lingered) && (all || !br.busy() || br.lingered[n].answers < br.answers) {
			s.seal(br.lingered[n].opened)
			n++
		}
		if n > 0 {
			br.lingered = popFront(br.lingered, n)
		}
	}
	i := 0
	for ; i < s.lingerQ.len(); i++ {
		o := *s.lingerQ.at(i)
		if !all && s.now.Sub(o.at) < s.cfg.Linger {
			break
		}
		if ip := o.part.IO.(*ioPart); !all && ip.leader >= 0 {
			if br := s.brokers[ip.leader]; br != nil && br.busy() {
				if o.b.Gen() == o.gen { // not completed already
					br.lingered = append(br.lingered, lingering{opened: o, answers: br.answers})
				}
				continue
			}
		}
		s.seal(o)
	}
	s.lingerQ.pop(i)
}

// lingering is a batch past Linger waiting for an answer from its broker:
// answers is the broker's count when it started waiting.
type lingering struct {
	opened
	answers uint64
}

// seal seals o's batch, if it is still open, and lists its partition.
func (s *sink) seal(o opened) {
	if o.part.Seal(o.b, o.gen) {
		ip := o.part.IO.(*ioPart)
		ip.hasSealed = true
		s.markReady(ip)
	}
}

// busy reports whether br has Produce requests in flight on a live
// connection: lingered batches for it wait (see sealLingered).
func (br *ioBroker) busy() bool { return br.inflight > 0 && br.conn != nil }

// fifo is a queue that reuses its memory: popping from the front only moves
// an index, and the live part is moved back to the start once the dead part
// is as large as it, so the IO goroutine's queues never regrow under load.
type fifo[T any] struct {
	buf  []T
	head int
}

func (q *fifo[T]) len() int    { return len(q.buf) - q.head }
func (q *fifo[T]) at(i int) *T { return &q.buf[q.head+i] }
func (q *fifo[T]) push(v T)    { q.compact(); q.buf = append(q.buf, v) }
func (q *fifo[T]) compact() {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}

// pop drops the first n elements.
func (q *fifo[T]) pop(n int) {
	clear(q.buf[q.head : q.head+n])
	q.head += n
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// filter keeps the elements for which keep returns true, in order.
func (q *fifo[T]) filter(keep func(T) bool) {
	live := q.buf[:0]
	for _, v := range q.buf[q.head:] {
		if keep(v) {
			live = append(live, v)
		}
	}
	clear(q.buf[len(live):])
	q.buf, q.head = live, 0
}

// insertSorted inserts v after every element not after it (after reports
// whether a comes after b); usually that is the end.
func (q *fifo[T]) insertSorted(v T, after func(a, b T) bool) {
	q.compact()
	i := len(q.buf)
	for i > q.head && after(q.buf[i-1], v) {
		i--
	}
	q.buf = append(q.buf, v)
	if i < len(q.buf)-1 {
		copy(q.buf[i+1:], q.buf[i:len(q.buf)-1])
		q.buf[i] = v
	}
}

func popFront[T any](q []T, n int) []T {
	if n == 0 {
		return q
	}
	clear(q[:n])
	q = q[n:]
	if len(q) == 0 {
		return q[:0:0]
	}
	return q
}

// markReady lists ip on its leader's ready list.
func (s *sink) markReady(ip *ioPart) {
	if ip.leader < 0 || ip.readyOn == ip.leader {
		return
	}
	br := s.brokers[ip.leader]
	if br == nil {
		return
	}
	ip.readyOn = br.id
	if !slices.Contains(ip.listed, br.id) { // a stale entry there comes alive again
		ip.listed = append(ip.listed, br.id)
		br.ready = append(br.ready, ip)
	}
}

// applyMetadata updates brokers, partitions and leaders from the newest
// snapshot.
func (s *sink) applyMetadata() {
	snap := s.p.meta.Snapshot()
	for id, b := range snap.Brokers {
		br := s.brokers[id]
		addr := b.Addr()
		if br == nil {
			br = &ioBroker{id: id, addr: addr}
			s.brokers[id] = br
		} else if br.addr != addr {
			br.addr = addr
			if br.conn != nil {
				go br.conn.Close()
				br.conn = nil
			}
		}
	}
	for _, t := range s.topics {
		s.applyTopic(t, snap)
	}
	s.checkAuth()
}

// applyTopic updates t from snap, if snap has it.
func (s *sink) applyTopic(t *ioTopic, snap *metadata.Snapshot) {
	mt := snap.Topics[t.name]
	if mt == nil {
		return
	}
	if mt.Err != nil || len(mt.Partitions) == 0 {
		t.err = mt.Err
		if t.err == nil {
			t.err = kerr.LeaderNotAvailable
		}
		switch {
		case !kerr.IsRetriable(t.err):
			// Not authorized, or an invalid name: waiting does not
			// help. Fail what is parked and what comes, at once, until
			// the metadata says otherwise.
			s.failTopic(t, failFatal, fmt.Errorf("topic %q: %w", t.name, t.err))
		case t.failing == failFatal,
			t.failing == failMissing && !errors.Is(t.err, kerr.UnknownTopicOrPartition):
			s.setFailing(t, notFailing, nil) // the condition changed: records wait again
		}
		s.maybeCreateTopic(t)
		return
	}
	t.err = nil
	t.id = mt.ID
	if t.failing != notFailing && t.failing != failAuth {
		// An authentication failure is checkAuth's to clear: a failed
		// fetch applies the old snapshot, which still has the topic.
		s.setFailing(t, notFailing, nil)
	}
	s.updatePartitions(t, mt)
}

// setFailing records why t's records fail fast (err nil: they do not).
func (s *sink) setFailing(t *ioTopic, kind failKind, err error) {
	if kind == t.failing && kind == notFailing {
		return
	}
	if kind != t.failing {
		if kind == notFailing {
			s.p.log.Info("topic usable again: records wait for it again", "topic", t.name)
		} else {
			s.p.log.Warn("failing records of topic at once", "topic", t.name, "err", err)
		}
	}
	t.failing = kind
	t.ts.acc.SetFailing(err)
}

// failTopic makes t fail fast with err and fails its parked records.
func (s *sink) failTopic(t *ioTopic, kind failKind, err error) {
	s.setFailing(t, kind, err)
	t.ts.acc.FailParked(func(c completion) {
		s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
	})
	delete(s.parked, t)
}

func (s *sink) updatePartitions(t *ioTopic, mt *metadata.Topic) {
	n := len(mt.Partitions)
	if n > len(t.parts) {
		accParts := make([]*accumulator.Partition[completion], n)
		copy(accParts, t.ts.acc.KnownPartitions())
		for i := len(t.parts); i < n; i++ {
			ap := s.p.acc.NewPartition(t.ts.acc, int32(i))
			ip := &ioPart{topic: t, acc: ap, leader: -1, epoch: -1, readyOn: -1, lastAcked: -1}
			ap.IO = ip
			ap.SetLeaderless(true)
			accParts[i] = ap
			t.parts = append(t.parts, ip)
		}
		t.ts.acc.SetPartitions(accParts)
	}
	for i := range mt.Partitions {
		mp := &mt.Partitions[i]
		ip := t.parts[mp.ID]
		if mp.LeaderEpoch >= 0 && ip.epoch >= 0 && mp.LeaderEpoch < ip.epoch {
			continue // stale
		}
		leader := mp.Leader
		if mp.Err != nil || s.brokers[leader] == nil {
			leader = -1
		}
		ip.epoch = mp.LeaderEpoch
		if leader != ip.leader {
			ip.leader = leader
			ip.backoff = time.Time{}
		}
		ip.acc.SetLeaderless(leader < 0)
		if ip.hasSealed || len(ip.retry) > 0 {
			s.markReady(ip)
		}
	}
	// Ready lists may still hold partitions that moved; sendAll skips them.
}

// moveParked moves parked records of topics whose partitions are known.
func (s *sink) moveParked() {
	starved := false
	for t := range s.parked {
		if len(t.parts) == 0 {
			s.maybeCreateTopic(t)
			continue
		}
		parts := t.ts.acc.KnownPartitions()
		n := int32(len(parts))
		load := func(i int32) int { return parts[i].Load() }
		s.p.memWanted.Store(true) // before trying: a release racing with a failed move still wakes us
		done := t.ts.acc.MoveParked(func(r accumulator.ParkedRecord) (*accumulator.Partition[completion], error) {
			rec := Record{Topic: t.name, Partition: r.Partition, ExplicitPartition: r.Partition >= 0, Timestamp: timeFromMillis(r.Timestamp)}
			rec.Key, rec.Value, rec.Headers = parseBody(r.Body)
			part, err := callPartitioner(s.cfg.Partitioner, &rec, n) // no lock held; a panic fails only this record
			if err != nil {
				return nil, err
			}
			if part == UnknownPartition {
				part = t.ts.sticky.partition(n, load)
				t.ts.sticky.appended(part, len(r.Body), n, load)
			}
			if err := checkPartition(t.name, part, n); err != nil {
				return nil, err
			}
			return parts[part], nil
		}, func(c completion, err error) {
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
		})
		if done {
			delete(s.parked, t)
		} else {
			starved = true
		}
	}
	s.hold(starved)
}

// hold asks the pool, when it can (bufferpool.Holder), to keep released
// memory for moveParked while parked records cannot move for the lack of
// it, instead of handing it to Sends waiting for memory: those Sends would
// park more records of the same topic, or fill other topics' batches, and
// the parked records, which free their memory only by moving, would expire.
// Off again once nothing parked is starved (and at shutdown).
func (s *sink) hold(on bool) {
	if on == s.holding {
		return
	}
	if h, ok := s.p.pool.(bufferpool.Holder); ok {
		h.Hold(on)
		s.holding = on
	}
}

// parseBody reads back the key, value and headers of an encoded record body
// (recordbatch.AppendBody), for partitioning a parked record. They alias
// body; header keys are copied.
func parseBody(body []byte) (key, value []byte, headers []Header) {
	key, body = readVarBytes(body)
	value, body = readVarBytes(body)
	n, w := binary.Varint(body)
	if w <= 0 || n <= 0 || n > int64(len(body)) {
		return key, value, nil
	}
	body = body[w:]
	headers = make([]Header, 0, n)
	for range n {
		var k, v []byte
		k, body = readVarBytes(body)
		v, body = readVarBytes(body)
		headers = append(headers, Header{Key: string(k), Value: v})
	}
	return key, value, headers
}

func readVarBytes(b []byte) (v, rest []byte) {
	n, w := binary.Varint(b)
	if w <= 0 {
		return nil, nil
	}
	b = b[w:]
	if n < 0 || int(n) > len(b) {
		return nil, b
	}
	return b[:n:n], b[n:]
}

func timeFromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

// expire fails what has waited too long without being in flight: records
// parked for a topic not present in metadata after MaxBlock (as the Java
// producer's send fails after max.block.ms), other parked records and
// batches that never got (back) to a broker after DeliveryTimeout.
func (s *sink) expire() {
	dt := s.cfg.DeliveryTimeout
	deadline := s.now.Add(-dt)
	for t := range s.parked {
		limit, cause := s.parkLimit(t)
		parkDeadline := s.now.Add(-limit)
		if oldest := t.ts.acc.OldestParked(); oldest.IsZero() || oldest.After(parkDeadline) {
			continue
		}
		var err error
		if len(t.parts) == 0 {
			if cause == nil {
				cause = errors.New("no metadata answer arrived")
			}
			err = fmt.Errorf("%w: topic %q not present in metadata after %v: %w", ErrDeliveryTimeout, t.name, limit, cause)
		} else {
			err = fmt.Errorf("%w: topic %q: record still parked after %v (no buffer memory to move it into a batch)", ErrDeliveryTimeout, t.name, limit)
		}
		t.ts.acc.ExpireParked(parkDeadline, func(c completion, at time.Time) {
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
		})
		if len(t.parts) == 0 && t.failing == notFailing {
			// New Sends fail at once while the topic stays missing,
			// instead of taking pool memory for MaxBlock each.
			s.setFailing(t, failMissing, err)
		}
		if t.ts.acc.OldestParked().IsZero() {
			delete(s.parked, t)
		}
	}
	i := 0
	for ; i < s.expireQ.len(); i++ {
		o := *s.expireQ.at(i)
		alive := o.b.Gen() == o.gen
		if alive && o.at.After(deadline) {
			break // the oldest batch still pending is not due yet
		}
		if alive {
			ip := o.part.IO.(*ioPart)
			if o.part.Seal(o.b, o.gen) {
				// Still open past its deadline (its broker kept it
				// waiting, see sealLingered): seal it so that it
				// fails with the others.
				ip.hasSealed = true
			}
			s.expirePart(ip, deadline)
		}
	}
	s.expireQ.pop(i)
	// Entries of completed batches behind a pending one wait for it; drop
	// them once they outnumber the live ones, so that the queue holds about
	// as many entries as there are batches in the producer.
	if n := s.expireQ.len(); n > 2*s.expireLive+1024 {
		s.expireQ.filter(func(o opened) bool { return o.b.Gen() == o.gen })
		s.expireLive = s.expireQ.len()
	}
}

// expirePart fails ip's batches created before deadline that are not in
// flight: they are the oldest, at the front of the retry list and then of the
// accumulator's sealed queue.
func (s *sink) expirePart(ip *ioPart, deadline time.Time) {
	for _, b := range ip.inflight {
		if !b.Expired && !b.Created.After(deadline) {
			s.expireInflight(ip, b)
		}
	}
	for len(ip.retry) > 0 && !ip.retry[0].Created.After(deadline) {
		b := ip.retry[0]
		ip.retry = popFront(ip.retry, 1)
		s.fail(ip, b, s.timeoutErr(ip, b))
	}
	if len(ip.retry) > 0 {
		return
	}
	for {
		b := ip.acc.PeekSealed()
		if b == nil || b.Created.After(deadline) {
			return
		}
		ip.acc.NextSealed()
		s.fail(ip, b, s.timeoutErr(ip, b))
	}
}

// parkLimit returns how long t's records may stay parked, and the cause to
// report when they cannot: while t has no partitions, MaxBlock (at most
// DeliveryTimeout) once something is known of why (a metadata answer
// without the topic, or a failed fetch: the cause), else DeliveryTimeout.
func (s *sink) parkLimit(t *ioTopic) (time.Duration, error) {
	if len(t.parts) > 0 {
		return s.cfg.DeliveryTimeout, nil
	}
	cause := t.err
	if cause == nil {
		cause = s.p.meta.Err() // unreachable cluster, failed handshake, ...
	}
	if cause == nil {
		return s.cfg.DeliveryTimeout, nil
	}
	return min(s.cfg.MaxBlock, s.cfg.DeliveryTimeout), cause
}

// expireInflight fails b, which a request still carries, at its delivery
// timeout instead of up to RequestTimeout later, as the Java client does
// since 2.1 (KIP-91). The broker may have written it, so the error wraps
// ErrOutcomeUnknown. The batch stays in flight, holding its memory, until
// the request's answer is in; lateAnswer then only releases it, so its
// records complete once.
func (s *sink) expireInflight(ip *ioPart, b *batch) {
	b.Expired = true
	err := fmt.Errorf("%w: %d records for %s[%d] not acknowledged after %v, with a request carrying them still in flight (%w)",
		ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, ErrOutcomeUnknown)
	if ip.lastErr != nil {
		err = fmt.Errorf("%w (last error: %w)", err, ip.lastErr)
	}
	s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err, hold: true})
}

// lateAnswer handles the answer to a batch already failed by
// expireInflight: written tells whether the broker took it. Under
// idempotence a batch the broker did not take (or may not have) leaves a gap
// in its partition's sequence, which the epoch bump closes (KIP-360);
// one it took keeps the sequence whole. The batch is then released.
func (s *sink) lateAnswer(ip *ioPart, b *batch, written bool) {
	if !written && s.idem != nil && b.BaseSequence >= 0 {
		s.idem.needBump = true
		ip.gapped = true
	}
	s.p.completer.push(outcome{batch: b, release: true})
}

func (s *sink) timeoutErr(ip *ioPart, b *batch) error {
	what := "no leader available"
	var cause error
	if ip.leader >= 0 {
		what = fmt.Sprintf("not acknowledged by broker %d", ip.leader)
		if br := s.brokers[ip.leader]; br != nil && br.conn == nil && br.lastErr != nil {
			cause = br.lastErr // it names the broker's address
		}
	} else {
		cause = s.p.meta.Err()
	}
	if ip.lastErr != nil {
		cause = ip.lastErr
	}
	if s.idem != nil && !s.idem.canSend() && s.idem.lastErr != nil {
		cause = s.idem.lastErr // nothing goes out without a producer id; it names InitProducerId
	}
	err := fmt.Errorf("%w: %d records for %s[%d] expired after %v: %s",
		ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, what)
	if cause != nil {
		err = fmt.Errorf("%w (last error: %w)", err, cause)
	}
	return err
}

// fail completes b with err. A batch that carried an idempotent sequence
// and may not have been written leaves a gap in the partition's sequence;
// the producer then bumps its epoch (KIP-360) before sending more.
func (s *sink) fail(ip *ioPart, b *batch, err error) {
	if s.idem != nil && b.BaseSequence >= 0 {
		s.idem.needBump = true
		ip.gapped = true
	}
	if b.Ambiguous && !errors.Is(err, ErrOutcomeUnknown) {
		err = fmt.Errorf("%w (%w)", err, ErrOutcomeUnknown)
	}
	s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err})
}

func (s *sink) succeed(b *batch, baseOffset, appendTime int64) {
	s.p.stats.batches.Add(1)
	s.p.stats.batchBytes.Add(int64(len(b.Raw)))
	s.p.stats.uncompressed.Add(int64(b.Uncompressed))
	s.p.completer.push(outcome{batch: b, baseOffset: baseOffset, appendTime: appendTime})
}

// sendAll writes as many Produce requests as the in-flight limits allow.
func (s *sink) sendAll() {
	if s.idem != nil && !s.idem.canSend() {
		return
	}
	for _, br := range s.brokers {
		if len(br.ready) == 0 {
			continue
		}
		if br.conn == nil {
			s.dial(br)
			continue
		}
		for br.inflight < s.cfg.MaxInFlight && len(br.ready) > 0 {
			s.precompress(br)
			if !s.sendOne(br) {
				break
			}
		}
	}
}

func (s *sink) dial(br *ioBroker) {
	if br.dialing || s.now.Before(br.backoff) {
		return
	}
	br.dialing = true
	addr, cfg := br.addr, s.connCfg
	s.dialing.Go(func() {
		// Close ends the dial at once (closing is canceled before quit).
		ctx, cancel := context.WithTimeout(s.p.closing, cfg.DialTimeout+time.Second)
		defer cancel()
		c, err := conn.Dial(ctx, addr, cfg)
		select {
		case s.dials <- dialResult{broker: br, conn: c, err: err}:
		case <-s.p.quit:
			if c != nil {
				c.Close()
			}
		}
	})
}

func (s *sink) handleDial(d dialResult) {
	br := d.broker
	br.dialing = false
	select {
	case <-s.p.quit:
		if d.conn != nil {
			d.conn.Close()
		}
		return
	default:
	}
	if d.err != nil {
		br.failures++
		br.lastErr = d.err
		br.backoff = time.Now().Add(s.backoff(br.failures))
		// Once at Warn per outage; records that time out carry the error.
		level := slog.LevelDebug
		if br.failures == 1 {
			level = slog.LevelWarn
		}
		s.p.log.Log(context.Background(), level, "cannot connect to broker", "broker", br.id, "addr", br.addr, "err", d.err, "failures", br.failures)
		s.p.meta.Trigger()
		s.authFailed(br, d.err)
		return
	}
	if v := d.conn.MaxVersion(kmsg.Produce.Int16()); v < 3 {
		d.conn.Close()
		br.failures++
		br.backoff = time.Now().Add(s.backoff(br.failures))
		s.p.log.Error("broker does not support Produce v3+ (Kafka 0.11+ is required)", "broker", br.id, "addr", br.addr)
		return
	}
	br.failures, br.lastErr = 0, nil
	br.conn = d.conn
}

// backoff returns the wait before attempt n (1-based): RetryBackoff doubled
// per attempt, capped at RetryBackoffMax, with ±20% jitter (KIP-580).
func (s *sink) backoff(n int) time.Duration {
	return conn.Backoff(n, s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
}

// sendOne builds and writes one Produce request for br from its ready
// partitions. It reports false when nothing could be sent.
func (s *sink) sendOne(br *ioBroker) bool {
	pr := s.newRequest()
	req := &pr.req
	size := 0
	keep := br.ready[:0]
	unlist := func(ip *ioPart) {
		ip.listed = slices.DeleteFunc(ip.listed, func(id int32) bool { return id == br.id })
		if ip.readyOn == br.id {
			ip.readyOn = -1
		}
	}
	for i, ip := range br.ready {
		if ip.readyOn != br.id || ip.leader != br.id {
			unlist(ip) // its leader moved: it is (or will be) listed there
			continue
		}
		b, more := s.nextBatch(ip, s.cfg.MaxRequestSize-size, len(pr.batches) == 0)
		if b != nil {
			rt := pr.topic(ip.topic)
			if len(rt.Partitions) == 0 {
				s.p.meta.Touch(ip.topic.name) // in use: keep it in metadata refreshes
			}
			rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: ip.acc.ID, Records: b.Raw})
			pr.batches = append(pr.batches, b)
			size += len(b.Raw)
			if s.debug {
				s.p.log.Debug("sending batch", "topic", ip.topic.name, "partition", ip.acc.ID, "seq", b.BaseSequence, "records", b.Records.Len(), "attempt", b.Attempts, "broker", br.id)
			}
			ip.inflight = append(ip.inflight, b)
			if b.Attempts > 1 {
				ip.resent++
			}
		}
		if more {
			keep = append(keep, ip)
		} else {
			unlist(ip)
		}
		if size >= s.cfg.MaxRequestSize {
			keep = append(keep, br.ready[i+1:]...)
			break
		}
	}
	clear(br.ready[len(keep):])
	br.ready = keep
	if len(pr.batches) == 0 {
		s.freeRequest(pr)
		return false
	}
	// Rotate so that the next request starts with other partitions.
	if len(br.ready) > 1 {
		br.ready = append(br.ready[1:], br.ready[0])
	}
	br.inflight++
	s.inflight++
	s.p.stats.inflight.Add(1)
	c, batches := br.conn, pr.batches
	c.Send(req, func(resp kmsg.Response, err error) {
		s.respMu.Lock()
		s.respQ = append(s.respQ, produceResponse{broker: br, conn: c, req: pr, batches: batches, resp: resp, err: err})
		s.respMu.Unlock()
		select {
		case s.respKick <- struct{}{}:
		default:
		}
	})
	return true
}

// produceRequest is a Produce request being built or in flight, with its
// batches in request order. The IO goroutine reuses them (see newRequest),
// so that a request of thousands of partitions does not regrow its slices
// every time.
type produceRequest struct {
	req     kmsg.ProduceRequest
	batches []*batch
	topics  map[*ioTopic]int // index in req.Topics
}

// maxFreeRequests bounds the idle requests kept: enough for every request
// in flight to three brokers at MaxInFlight 5; beyond that requests are
// made afresh (and a large one regrows its slices).
const maxFreeRequests = 16

// newRequest returns an empty Produce request with the producer's acks and
// timeout.
func (s *sink) newRequest() *produceRequest {
	pr, ok := s.reqFree.Get()
	if !ok {
		pr = &produceRequest{topics: make(map[*ioTopic]int)}
	}
	topics := pr.req.Topics
	pr.req.Default()
	pr.req.Topics = topics[:0]
	pr.req.Acks = s.cfg.Acks.Wire()
	pr.req.TimeoutMillis = int32(s.cfg.RequestTimeout / time.Millisecond)
	return pr
}

// topic returns the request's entry for t, adding it first if needed.
func (pr *produceRequest) topic(t *ioTopic) *kmsg.ProduceRequestTopic {
	if i, ok := pr.topics[t]; ok {
		return &pr.req.Topics[i]
	}
	i := len(pr.req.Topics)
	pr.topics[t] = i
	var parts []kmsg.ProduceRequestTopicPartition
	if i < cap(pr.req.Topics) {
		parts = pr.req.Topics[:i+1][i].Partitions[:0] // reuse the old entry's partitions
	}
	pr.req.Topics = append(pr.req.Topics, kmsg.NewProduceRequestTopic())
	rt := &pr.req.Topics[i]
	rt.Topic, rt.TopicID, rt.Partitions = t.name, t.id, parts
	return rt
}

// freeRequest keeps pr for reuse once its answer has been handled (the
// connection has long encoded it), dropping its references to batches.
func (s *sink) freeRequest(pr *produceRequest) {
	if pr == nil || s.reqFree.Len() == s.reqFree.Max {
		return
	}
	for i := range pr.req.Topics {
		clear(pr.req.Topics[i].Partitions)
	}
	clear(pr.batches)
	pr.batches = pr.batches[:0]
	clear(pr.topics)
	s.reqFree.Put(pr)
}

// nextBatch returns ip's next batch to send if it may send one now and it
// fits in room bytes (any size if first), and whether ip may have more.
func (s *sink) nextBatch(ip *ioPart, room int, first bool) (b *batch, more bool) {
	if s.now.Before(ip.backoff) {
		return nil, true
	}
	if s.idem != nil && s.idem.needBump {
		// Before the epoch moves on, only batches whose earlier attempt
		// may have been written go out again, under the old epoch, so
		// that the broker settles them (written, or not) instead of the
		// new epoch writing them twice.
		if ip.gapped || !ip.unsettled() || ip.retry[0].BaseSequence < 0 {
			return nil, false
		}
	}
	if len(ip.retry) > 0 {
		// Resend in order, one at a time, once nothing else is in flight.
		if len(ip.inflight) > 0 {
			return nil, false
		}
		b = ip.retry[0]
		if len(b.Raw) > room && !first {
			return nil, true
		}
		ip.retry = popFront(ip.retry, 1)
		if s.idem != nil && b.BaseSequence < 0 {
			s.sequence(ip, b)
		}
		b.Attempts++
		s.p.stats.retries.Add(1)
		return b, len(ip.retry) > 0 || ip.hasSealed
	}
	if s.idem != nil && (len(ip.inflight) >= idempotenceMaxInFlight || (!ip.confirmed && len(ip.inflight) > 0)) {
		// A broker with no state for this producer accepts any first
		// sequence: until one batch is acknowledged, a second in flight
		// could be written while the first fails, out of order.
		return nil, false
	}
	if ip.resent > 0 {
		// A resent batch is unsettled until it is answered; new batches
		// written meanwhile could push it out of the five the broker
		// remembers, and its answer would then be
		// OUT_OF_ORDER_SEQUENCE_NUMBER instead of a duplicate.
		return nil, false
	}
	nb := ip.acc.PeekSealed()
	if nb == nil {
		ip.hasSealed = false
		return nil, false
	}
	if err := s.finish(nb); err != nil {
		ip.acc.NextSealed()
		s.fail(ip, nb, err)
		return nil, true
	}
	if len(nb.Raw) > room && !first {
		return nil, true
	}
	ip.acc.NextSealed()
	if s.idem != nil {
		s.sequence(ip, nb)
	} else {
		recordbatch.Stamp(nb.Raw, -1, -1, -1)
	}
	nb.Attempts++
	return nb, true
}

// finish compresses a sealed batch once.
func (s *sink) finish(b *batch) error {
	var err error
	s.scratch, err = s.finishInto(b, s.scratch)
	return err
}

// finishInto is finish with the caller's scratch memory, which it returns
// (possibly grown). On error b is left unfinished.
func (s *sink) finishInto(b *batch, scratch []byte) ([]byte, error) {
	if b.Raw != nil {
		return scratch, nil
	}
	b.Uncompressed = b.Builder.Len()
	raw, scratch, err := b.Builder.Finish(s.p.compressor, scratch)
	if err != nil {
		return scratch, err
	}
	b.Raw = raw
	return scratch, nil
}

// sequence gives b the partition's next idempotent sequence.
func (s *sink) sequence(ip *ioPart, b *batch) {
	b.BaseSequence = ip.nextSeq
	ip.nextSeq += int32(b.Records.Len())
	if ip.nextSeq < 0 {
		ip.nextSeq &= 0x7fffffff // sequences wrap to 0 after MaxInt32
	}
	recordbatch.Stamp(b.Raw, s.idem.producerID, s.idem.epoch, b.BaseSequence)
}

func (s *sink) handleResponse(r produceResponse) {
	br := r.broker
	br.inflight--
	br.answers++
	s.inflight--
	s.p.stats.inflight.Add(-1)
	for _, b := range r.batches {
		b.Partition.IO.(*ioPart).landed(b)
	}
	if r.err != nil {
		// The connection failed: every batch of the request may or may
		// not have been written. Retry them all (idempotence makes that
		// safe), reconnect, and refresh metadata.
		if br.conn == r.conn && br.conn != nil {
			go br.conn.Close()
			br.conn = nil
			br.failures++
			br.backoff = s.now.Add(s.backoff(br.failures))
		}
		s.p.meta.Trigger()
		for _, b := range r.batches {
			if b.Expired {
				s.lateAnswer(b.Partition.IO.(*ioPart), b, false)
				continue
			}
			b.Ambiguous = true // it may have reached the broker
			s.retryOrFail(b.Partition.IO.(*ioPart), b, r.err)
		}
		return
	}
	if r.resp == nil { // acks=0: no answer comes
		for _, b := range r.batches {
			if b.Expired {
				s.lateAnswer(b.Partition.IO.(*ioPart), b, true)
				continue
			}
			s.succeed(b, -1, -1)
		}
		return
	}
	resp := r.resp.(*kmsg.ProduceResponse)
	var cur answerCursor
	for _, b := range r.batches {
		ip := b.Partition.IO.(*ioPart)
		switch rp := cur.find(resp, ip); {
		case b.Expired:
			err := errors.New("no answer")
			if rp != nil {
				err = kerr.ForCode(rp.ErrorCode)
				if err == nil && rp.BaseOffset >= 0 {
					ip.lastAcked = max(ip.lastAcked, rp.BaseOffset+int64(b.Records.Len())-1)
				}
			}
			s.lateAnswer(ip, b, err == nil || errors.Is(err, kerr.DuplicateSequenceNumber))
		case rp == nil:
			// The broker may have written it all the same: retried
			// (under idempotence a duplicate is recognized), and
			// failing for good it fails with ErrOutcomeUnknown.
			b.Ambiguous = true
			s.retryOrFail(ip, b, fmt.Errorf("broker %d did not answer for %s[%d]", br.id, ip.topic.name, ip.acc.ID))
		default:
			s.handlePartition(br, ip, b, rp)
		}
		// A partition waiting for its in-flight batches (to resend in
		// order, or at the idempotent limit) may send again.
		if len(ip.retry) > 0 || ip.hasSealed {
			s.markReady(ip)
		}
	}
}

// takeResponses returns the queued Produce answers, oldest first, valid
// until the next call.
func (s *sink) takeResponses() []produceResponse {
	clear(s.respWork)
	s.respMu.Lock()
	s.respWork, s.respQ = s.respQ, s.respWork[:0]
	s.respMu.Unlock()
	return s.respWork
}

// answerCursor finds a batch's partition in a Produce response. Brokers
// answer in request order, so it first looks where the previous match
// ended: a request of thousands of partitions is matched in linear time.
type answerCursor struct{ t, p int }

func (c *answerCursor) find(resp *kmsg.ProduceResponse, ip *ioPart) *kmsg.ProduceResponseTopicPartition {
	for t := c.t; t < len(resp.Topics) && t <= c.t+1; t++ {
		rt := &resp.Topics[t]
		if rt.Topic != ip.topic.name && (resp.Version < 13 || rt.TopicID != ip.topic.id) {
			continue
		}
		p := 0
		if t == c.t {
			p = c.p
		}
		if p < len(rt.Partitions) && rt.Partitions[p].Partition == ip.acc.ID {
			c.t, c.p = t, p+1
			return &rt.Partitions[p]
		}
	}
	return findPartition(resp, ip)
}

func findPartition(resp *kmsg.ProduceResponse, ip *ioPart) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.Topic != ip.topic.name && (resp.Version < 13 || rt.TopicID != ip.topic.id) {
			continue
		}
		for j := range rt.Partitions {
			if rt.Partitions[j].Partition == ip.acc.ID {
				return &rt.Partitions[j]
			}
		}
	}
	return nil
}

func (s *sink) handlePartition(br *ioBroker, ip *ioPart, b *batch, rp *kmsg.ProduceResponseTopicPartition) {
	err := kerr.ForCode(rp.ErrorCode)
	s.checkLogStart(ip, rp.LogStartOffset)
	switch {
	case err == nil, errors.Is(err, kerr.DuplicateSequenceNumber):
		ip.failures = 0
		ip.lastErr = nil
		ip.confirmed = true
		if s.debug {
			s.p.log.Debug("acked batch", "topic", ip.topic.name, "partition", ip.acc.ID, "seq", b.BaseSequence, "records", b.Records.Len(), "offset", rp.BaseOffset, "dup", err != nil)
		}
		if n := int64(b.Records.Len()); rp.BaseOffset >= 0 && rp.BaseOffset+n-1 > ip.lastAcked {
			ip.lastAcked = rp.BaseOffset + n - 1
		}
		s.succeed(b, rp.BaseOffset, rp.LogAppendTime)
		return
	case errors.Is(err, kerr.RequestTimedOut), errors.Is(err, kerr.NotEnoughReplicasAfterAppend):
		b.Ambiguous = true // the broker may have appended it
	case s.idem != nil && (errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced)):
		// Fatal for this producer id: the batch was not written. Get a new
		// id, then resend (KIP-360).
		s.idem.needNewID = true
		s.idem.needBump = true
		s.p.log.Warn("producer id fenced; getting a new one", "topic", ip.topic.name, "partition", ip.acc.ID, "err", err)
		s.retryOrFail(ip, b, fmt.Errorf("%s[%d] on broker %d: %w", ip.topic.name, ip.acc.ID, br.id, err))
		return
	case errors.Is(err, kerr.MessageTooLarge) && b.Records.Len() > 1:
		// Kafka accepts smaller batches: split this one and resend its
		// halves in order.
		if halves, serr := s.split(b); serr == nil {
			ip.retry = append(halves, ip.retry...)
			s.markReady(ip)
			return
		}
	}
	msg := ""
	if rp.ErrorMessage != nil {
		msg = ": " + *rp.ErrorMessage
	}
	err = fmt.Errorf("%s[%d] on broker %d: %w%s", ip.topic.name, ip.acc.ID, br.id, err, msg)
	if kerr.IsRetriable(err) || isSequenceError(err) {
		if needsMetadata(err) {
			ip.leader = -1 // wait for the new leader
			if cl := rp.CurrentLeader; cl.LeaderID >= 0 && cl.LeaderEpoch > ip.epoch && s.brokers[cl.LeaderID] != nil {
				ip.leader, ip.epoch = cl.LeaderID, cl.LeaderEpoch // KIP-951
			}
			ip.acc.SetLeaderless(ip.leader < 0)
			s.p.meta.Trigger()
		}
		if isSequenceError(err) && s.idem != nil && !ip.hasEarlier(b) {
			// A real gap or lost producer state, not the echo of an
			// earlier batch being retried: bump the epoch (KIP-360).
			s.idem.needBump = true
			ip.gapped = true
			s.p.log.Info("sequence error; bumping the producer epoch", "topic", ip.topic.name, "partition", ip.acc.ID, "err", err)
		}
		s.retryOrFail(ip, b, err)
		return
	}
	s.fail(ip, b, err)
}

// checkLogStart reports acknowledged records that left the log: the
// broker's log start offset moved past the last offset it acknowledged.
func (s *sink) checkLogStart(ip *ioPart, logStart int64) {
	if ip.lastAcked < 0 || logStart <= ip.lastAcked {
		return
	}
	e := &DataLossError{Topic: ip.topic.name, Partition: ip.acc.ID, LastAcked: ip.lastAcked, LogStart: logStart}
	ip.lastAcked = logStart - 1 // report each move once
	s.p.log.Warn("acknowledged records are no longer in the log", "topic", e.Topic, "partition", e.Partition,
		"last_acked", e.LastAcked, "log_start", e.LogStart)
	if s.cfg.OnDataLoss != nil {
		s.cfg.OnDataLoss(e)
	}
}

// landed removes b from ip's in-flight list once its answer (or failure)
// is in.
func (ip *ioPart) landed(b *batch) {
	for i, x := range ip.inflight {
		if x == b {
			ip.inflight = slices.Delete(ip.inflight, i, i+1)
			if b.Attempts > 1 {
				ip.resent--
			}
			return
		}
	}
}

// unsettled reports whether a batch waiting to be resent may have been
// written by an earlier attempt.
func (ip *ioPart) unsettled() bool {
	for _, b := range ip.retry {
		if b.Ambiguous && b.BaseSequence >= 0 {
			return true
		}
	}
	return false
}

// hasEarlier reports whether a batch sent before b is still unacknowledged:
// in flight or waiting to be resent.
func (ip *ioPart) hasEarlier(b *batch) bool {
	for _, x := range ip.inflight {
		if before(x, b) {
			return true
		}
	}
	for _, x := range ip.retry {
		if before(x, b) {
			return true
		}
	}
	return false
}

func needsMetadata(err error) bool {
	for _, e := range []error{kerr.NotLeaderOrFollower, kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable,
		kerr.NetworkException, kerr.KafkaStorageError, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isSequenceError(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID)
}

// retryOrFail queues b to be sent again, in sequence order, unless its
// delivery timeout has passed.
func (s *sink) retryOrFail(ip *ioPart, b *batch, err error) {
	ip.lastErr = err
	if s.debug {
		s.p.log.Debug("retrying batch", "topic", ip.topic.name, "partition", ip.acc.ID, "records", b.Records.Len(), "seq", b.BaseSequence, "attempts", b.Attempts, "ambiguous", b.Ambiguous, "err", err)
	}
	if s.now.Sub(b.Created) >= s.cfg.DeliveryTimeout {
		s.fail(ip, b, fmt.Errorf("%w: %d records for %s[%d] not acknowledged after %v; the last error was: %w",
			ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, err))
		return
	}
	ip.failures++
	ip.backoff = s.now.Add(s.backoff(ip.failures))
	// Keep retries ordered by sequence (or creation) so that they go out in
	// their original order.
	i := len(ip.retry)
	for i > 0 && before(b, ip.retry[i-1]) {
		i--
	}
	ip.retry = append(ip.retry, nil)
	copy(ip.retry[i+1:], ip.retry[i:])
	ip.retry[i] = b
	s.markReady(ip)
}

func before(a, b *batch) bool {
	if a.BaseSequence >= 0 && b.BaseSequence >= 0 {
		return a.BaseSequence < b.BaseSequence
	}
	return a.Created.Before(b.Created)
}

// maxRecordOverhead bounds what a record adds to its body in a batch: its
// length (5-byte varint), attributes (1), timestamp delta (10) and offset
// delta (5).
const maxRecordOverhead = 21

// split decodes b and rebuilds its records into two batches of half the
// records each, with memory from the pool (non-blocking).
func (s *sink) split(b *batch) ([]*batch, error) {
	// The batch's own uncompressed size bounds what decoding may produce:
	// a batch of any size splits.
	dec, err := recordbatch.Decode(b.Raw, max(b.Uncompressed, len(b.Raw)))
	if err != nil {
		return nil, err
	}
	half := len(dec.Records) / 2
	parts := [][]recordbatch.Record{dec.Records[:half], dec.Records[half:]}
	out := make([]*batch, 0, 2)
	for i, recs := range parts {
		size := recordbatch.HeaderSize
		for _, r := range recs {
			size += len(r.Body) + maxRecordOverhead
		}
		nb := s.p.acc.NewDetachedBatch(b.Partition, size)
		for _, r := range recs {
			if !nb.Builder.AppendBody(r.Timestamp, r.Body) {
				panic("producer: split batch overflow")
			}
		}
		for j := range recs {
			s.p.acc.AddCompletion(nb, *b.Records.At(i*half + j))
		}
		nb.Created = b.Created
		nb.Attempts = b.Attempts
		if err := s.finish(nb); err != nil {
			for _, x := range append(out, nb) {
				s.p.acc.Free(x) // drops copies: b keeps the completions
			}
			return nil, err
		}
		// The broker refused b, so its halves take over its sequences:
		// they keep their place among the partition's batches.
		if b.BaseSequence >= 0 {
			nb.BaseSequence = int32((int64(b.BaseSequence) + int64(i*half)) & math.MaxInt32) // sequences wrap to 0
			recordbatch.Stamp(nb.Raw, s.idem.producerID, s.idem.epoch, nb.BaseSequence)
		}
		out = append(out, nb)
	}
	// The halves own the completions now; b's memory goes back.
	s.p.acc.Free(b)
	for _, nb := range out {
		s.trackExpiry(opened{part: nb.Partition, b: nb, gen: nb.Gen(), at: nb.Created})
	}
	return out, nil
}

func (s *sink) resetTimer() {
	next := s.now.Add(time.Hour)
	if s.lingerQ.len() > 0 {
		if t := s.lingerQ.at(0).at.Add(s.cfg.Linger); t.Before(next) {
			next = t
		}
	}
	if s.expireQ.len() > 0 {
		if t := s.expireQ.at(0).at.Add(s.cfg.DeliveryTimeout); t.Before(next) {
			next = t
		}
	}
	for t := range s.parked {
		if at := t.ts.acc.OldestParked(); !at.IsZero() {
			limit, _ := s.parkLimit(t)
			if d := at.Add(limit); d.Before(next) {
				next = d
			}
		}
		if s.cfg.AutoCreateTopics && !t.creating && errors.Is(t.err, kerr.UnknownTopicOrPartition) &&
			t.createAt.After(s.now) && t.createAt.Before(next) {
			next = t.createAt // a throttled or failed CreateTopics is due again
		}
	}
	for _, br := range s.brokers {
		if len(br.ready) == 0 {
			continue
		}
		if br.conn == nil && br.backoff.After(s.now) && br.backoff.Before(next) {
			next = br.backoff
		}
		for _, ip := range br.ready {
			if ip.backoff.After(s.now) && ip.backoff.Before(next) {
				next = ip.backoff
			}
		}
	}
	if s.idem != nil && s.idem.retryAt.After(s.now) && s.idem.retryAt.Before(next) {
		next = s.idem.retryAt
	}
	d := max(next.Sub(s.now), 0)
	s.timer.Reset(d + time.Duration(rand.Int64N(int64(time.Millisecond)/4)))
}

// shutdown runs when the IO goroutine stops (Close): it fails everything
// still buffered with ErrClosed, waits for requests in flight, and closes the
// connections.
func (s *sink) shutdown() {
	defer s.hold(false) // Sends still waiting for memory fail with ErrClosed, not MaxBlock
	s.timer.Stop()
	s.now = time.Now()
	s.drainEvents()
	// Close the connections (which fails what they still hold) while
	// collecting the answers of requests in flight, so that their batches
	// complete with what the broker said, or with ErrClosed if it said
	// nothing.
	for _, br := range s.brokers {
		if br.conn != nil {
			go br.conn.Close()
			br.conn = nil
		}
	}
	for s.inflight > 0 {
		select {
		case <-s.respKick:
			for _, r := range s.takeResponses() {
				s.handleResponseClosing(r)
				s.freeRequest(r.req)
			}
		case d := <-s.dials:
			if d.conn != nil {
				d.conn.Close()
			}
		}
	}
	// Fail what is still buffered. A Send that passed its closed check just
	// before Close may still be appending: keep failing until every record
	// the producer accepted is completed, or until Close's context ends
	// (a callback may block, so completions may never catch up). Then a
	// Send still appending fails what is buffered itself (Producer.failLate).
	ctx := s.p.closeCtx
	for {
		s.drainEvents()
		s.failBuffered()
		idle := s.p.whenIdle()
		select {
		case <-idle:
		case <-s.p.acc.Wake():
			continue
		case <-ctx.Done():
			s.p.drained.Store(true)
			s.drainEvents()
			s.failBuffered() // what was appended before drained was set
		}
		break
	}
	// Dials end at once (their context is canceled); a connection one of
	// them made is closed by it or here.
	done := make(chan struct{})
	go func() { s.dialing.Wait(); close(done) }()
	for {
		select {
		case d := <-s.dials:
			if d.conn != nil {
				d.conn.Close()
			}
			continue
		case <-done:
		}
		break
	}
	for len(s.dials) > 0 {
		if d := <-s.dials; d.conn != nil {
			d.conn.Close()
		}
	}
	if s.compress != nil {
		s.compress.stop()
	}
}

// failBuffered fails every buffered record with ErrClosed (shutdown only).
func (s *sink) failBuffered() {
	closedErr := fmt.Errorf("%w: the record was not sent before Close returned", ErrClosed)
	var all []*batch
	s.p.topics.Range(func(k, v any) bool {
		ts := v.(*topicState)
		ts.acc.FailParked(func(c completion) {
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: ts.acc.Name, Partition: -1, Offset: -1}, err: closedErr})
		})
		for _, ap := range ts.acc.KnownPartitions() {
			ip := ap.IO.(*ioPart)
			for _, b := range ip.retry {
				s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: closedErr})
			}
			ip.retry = nil
			all = ap.TakeAll(all[:0])
			for _, b := range all {
				s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: closedErr})
			}
		}
		return true
	})
}

// handleResponseClosing completes in-flight batches during shutdown: success
// completes them, anything else fails them with the error (no retries).
func (s *sink) handleResponseClosing(r produceResponse) {
	s.inflight--
	r.broker.inflight--
	r.broker.answers++
	s.p.stats.inflight.Add(-1)
	for _, b := range r.batches {
		ip := b.Partition.IO.(*ioPart)
		ip.landed(b)
		if b.Expired { // its records have failed already
			s.p.completer.push(outcome{batch: b, release: true})
			continue
		}
		if r.err != nil {
			b.Ambiguous = true // the broker may have written it before the connection closed
			s.fail(ip, b, fmt.Errorf("%w: closing while the request was in flight: %w", ErrClosed, r.err))
			continue
		}
		if r.resp == nil {
			s.succeed(b, -1, -1)
			continue
		}
		rp := findPartition(r.resp.(*kmsg.ProduceResponse), ip)
		if rp == nil {
			b.Ambiguous = true // the broker may have written it
			s.fail(ip, b, fmt.Errorf("%w: no answer for %s[%d]", ErrClosed, ip.topic.name, ip.acc.ID))
			continue
		}
		if err := kerr.ForCode(rp.ErrorCode); err != nil && !errors.Is(err, kerr.DuplicateSequenceNumber) {
			s.fail(ip, b, fmt.Errorf("%w: %s[%d]: %w", ErrClosed, ip.topic.name, ip.acc.ID, err))
			continue
		}
		s.succeed(b, rp.BaseOffset, rp.LogAppendTime)
	}
}
