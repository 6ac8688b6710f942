// The IO goroutine: its state, its loop, the accumulator's events and the
// timer.

package producer

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"

	"github.com/samsa-go/samsa/internal/freelist"
)

// batch and accPartition are the accumulator's batch and partition with
// the IO goroutine's state in their slots: sendState per batch, ioPart per
// partition.
type (
	batch        = accumulator.Batch[completion, *ioPart, sendState]
	accPartition = accumulator.Partition[completion, *ioPart, sendState]
)

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
	// hintedBrokers counts the brokers with hinted set; hintedParts
	// whether a partition may have hinted set (dropHinted).
	hintedBrokers int
	hintedParts   bool
	hintRefusedAt time.Time // the last Warn of a refused hint broker

	events     []accumulator.Event[completion, *ioPart, sendState]
	lingerQ    fifo[opened] // batches by open time, for linger
	expireQ    fifo[opened] // batches by open time, for delivery timeout
	expireLive int          // expireQ's length after its last filtering
	parked     map[*ioTopic]struct{}

	creatingTopics bool // a CreateTopics request is in flight (autocreate.go)
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

	// background tracks the IO goroutine's short-lived goroutines: dials,
	// connection closes, InitProducerId, CreateTopics and
	// AddPartitionsToTxn requests. Each ends once Close cancels
	// p.closing (a connection's close once its goroutines have exited),
	// and shutdown waits for them all.
	background sync.WaitGroup

	// closedFailed counts the records the shutdown failed with ErrClosed
	// (sink.fail, failBuffered): Close's error says how many when its ctx
	// ended first. Read by Close, also while a blocked hook keeps the IO goroutine from exiting.
	closedFailed atomic.Int64
	debug        bool // the logger takes Debug records: per-batch logs are built only then

	// Idempotence (nil state when disabled).
	idem *idempotence
	txn  *txnIO // nil without Config.TransactionalID (txn_coordinator.go)

	inflight int // Produce requests in flight, all brokers

	reqFree freelist.List[*produceRequest] // see newRequest

	compress *compressors // nil: the IO goroutine compresses alone
	round    []*batch     // precompress's batches

	goneScratch []*batch // failPendingAll's batches
	unsent      []*batch // failUnsent's batches
	// leaderAsks counts the metadata refreshes asked for in a row because
	// a partition with batches had no known leader (askLeaders), and
	// leaderAskAt is when the next may go; leaderAskDue: one was wanted
	// before then, and step asks at leaderAskAt.
	leaderAsks   int
	leaderAskAt  time.Time
	leaderAskDue bool
}

type opened struct {
	part *accPartition
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
	sized    bool      // its partition count was compared with AutoCreatePartitions (checkPartitionCount)
	failing  failKind  // why Sends fail fast (accumulator.Topic.SetFailing), if they do
	parkedAt time.Time // when it started parking, for HookTopicUnparked; zero while not parked
	warnedAt time.Time // when warnMissing last logged it missing; zero once metadata has it
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
	acc    *accPartition
	leader int32 // -1 unknown
	epoch  int32

	retry     []*batch // batches to resend, oldest first
	inflight  []*batch // in flight, in send order
	resent    int      // batches in inflight on their second or later attempt
	failures  int      // consecutive retriable failures, for backoff
	backoff   time.Time
	lastErr   error
	readyOn   int32 // the broker whose ready list holds it, or -1
	nextSeq   int32
	lastAcked int64     // highest acknowledged offset, -1 before the first
	gapped    bool      // its sequence has a gap: the next epoch bump is for it
	confirmed bool      // a batch succeeded under the current producer id and epoch
	ackedAt   time.Time // when the last one did (confirmLapse)
	listed    []int32   // brokers whose ready lists hold it (readyOn's is the live one)
	hasSealed bool      // the accumulator announced sealed batches
	// hinted: a KIP-951 hint moved it to a broker that no snapshot listed
	// (hintedBy): the next metadata snapshot without that broker gives it
	// back its snapshot leader and epoch (dropHinted).
	hinted   bool
	hintedBy int32
}

// sendState is what the IO goroutine keeps of a batch once it is sealed
// (accumulator.Batch.IO); the zero value is a batch not yet finished,
// sent or sequenced.
type sendState struct {
	raw          []byte // the finished batch (Builder.Finish); nil until then
	attempts     int    // Produce requests that carried the batch
	uncompressed int    // the records' size before compression
	seq          int32  // the idempotent sequence of the first record, if sequenced
	sequenced    bool
	// ambiguous is set when an attempt ended without a clear answer (a
	// timeout, a broken connection): the batch may have been written.
	ambiguous bool
	// expired is set when the batch's records were failed at their
	// delivery timeout while a request carried it: the batch stays until
	// that request's answer is in, which then only releases it.
	expired bool
	// hintMoved: a KIP-951 hint cleared the partition's backoff for this
	// batch once already; later hints do not (a hostile broker could make
	// it resend at round-trip rate).
	hintMoved bool
	// topicID is the topic id the batch is for: its topic's when it was
	// first sent (zero while the metadata has none; a batch first sent
	// without one takes the id known at its resend). A batch of a topic
	// since deleted and recreated is never sent under the new id
	// (staleTopic).
	topicID [16]byte
}

// baseSequence returns the batch's idempotent base sequence, or -1.
func (st *sendState) baseSequence() int32 {
	if !st.sequenced {
		return -1
	}
	return st.seq
}

// setSequence sets the batch's base sequence (-1: none).
func (st *sendState) setSequence(seq int32) { st.seq, st.sequenced = seq, seq >= 0 }

type ioBroker struct {
	id       int32
	addr     string
	conn     *conn.Conn
	dialing  bool
	failures int
	lastErr  error // why the last dial failed; nil once connected
	backoff  time.Time
	inflight int
	used     time.Time // when conn last carried a request or an answer, or was dialed (ConnMaxIdle)
	ready    []*ioPart
	lingered []lingering // open batches past Linger, waiting for an answer (see sealLingered)
	answers  uint64      // Produce requests answered (or failed)
	stats    *brokerStats
	// readiness: when it last had batches, and last took them
	// (partitioner.availability.timeout.ms, availability.go).
	readiness brokerReadiness
	// hinted: learned from a Produce answer's NodeEndpoints (KIP-951),
	// listed by no metadata snapshot since hintSnap, the one current when
	// it was learned. Dropped once a newer snapshot does not list it
	// (dropHinted); at most maxHintedBrokers at a time.
	hinted   bool
	hintSnap *metadata.Snapshot
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
	took   time.Duration
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
	if p.txn != nil {
		s.txn = newTxnIO(p.txn)
	}
	s.debug = p.log != nil && p.log.Enabled(context.Background(), slog.LevelDebug)
	// More compressing goroutines than GOMAXPROCS only take turns (and
	// the compressor keeps idle zstd encoders for GOMAXPROCS callers per
	// window class).
	if n := min(p.cfg.CompressionConcurrency, runtime.GOMAXPROCS(0)); n > 1 && p.cfg.Compression != compression.None {
		s.compress = newCompressors(s, n)
	}
	return s
}

func (s *sink) run() {
	stopped := false // by Close, through quit
	defer func() {
		if !stopped {
			s.unwinding()
		}
		s.shutdown()
	}()
	for {
		select {
		case <-s.p.quit:
			stopped = true
			return
		case <-s.p.acc.Wake():
		case <-s.respKick:
			s.now = time.Now()
			for _, r := range s.takeResponses() {
				s.handleResponse(r, false)
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
		select {
		case <-s.p.quit:
			// Close has stopped waiting: what a handler above held (a
			// hook blocked past Close's ctx, say) is not sent now, but
			// failed by the shutdown, as Close's error said.
			stopped = true
			return
		default:
		}
		s.step()
	}
}

// step does everything that may have become possible.
func (s *sink) step() {
	s.now = time.Now()
	s.drainEvents()
	s.failEnded() // before moveParked: a parked record whose context ended does not move
	s.sealLingered()
	s.moveParked()
	s.expire()
	s.ensureProducerID()
	if s.leaderAskDue && !s.now.Before(s.leaderAskAt) {
		s.askLeaders() // its answer asks again if a leader is still missing
	}
	s.sendAll()
	s.trackReadiness()
	if s.txn != nil {
		s.txnStep() // after sendAll: the send gate queues partitions to add
	}
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
			if s.txn != nil {
				s.txnWant(e.Partition.IO) // add it while the batch fills
			}
		case accumulator.Sealed:
			ip := e.Partition.IO
			ip.hasSealed = true
			s.markReady(ip)
		case accumulator.Parked:
			t := s.topicFor(e.Topic.Name)
			s.parked[t] = struct{}{}
			s.observeParked(t)
			s.p.meta.Want(t.name)
			// The snapshot may already hold the topic: Send asked for it
			// before this event was drained, and its update came first.
			s.applyMetadata()
		}
	}
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

// markReady lists ip on its leader's ready list. A partition without a
// known leader asks for fresh metadata instead (askLeaders, Java's
// requestUpdate), so such a partition never waits for MetadataMaxAge.
func (s *sink) markReady(ip *ioPart) {
	if ip.gone() {
		s.failGone(ip)
		return
	}
	if ip.leader < 0 {
		s.askLeaders()
		return
	}
	if ip.readyOn == ip.leader {
		return
	}
	br := s.brokers[ip.leader]
	if br == nil {
		s.askLeaders()
		return
	}
	ip.readyOn = br.id
	if !slices.Contains(ip.listed, br.id) { // a stale entry there comes alive again
		ip.listed = append(ip.listed, br.id)
		br.ready = append(br.ready, ip)
	}
}

// askLeaders asks the metadata client for a refresh because a partition
// with batches has no known leader. While answers bring none, the asks
// back off as the producer's other retries do (RetryBackoff doubling up
// to RetryBackoffMax, KIP-580's jitter), as Java's metadata backs off
// when answers make no progress: a partition whose replicas are all down
// costs a Metadata request every RetryBackoffMax, not every RetryBackoff.
// An ask before its time is remembered and made at leaderAskAt (step,
// resetTimer). A partition gaining a leader starts the backoff over.
func (s *sink) askLeaders() {
	if s.now.Before(s.leaderAskAt) {
		s.leaderAskDue = true
		return
	}
	s.leaderAskDue = false
	s.leaderAsks++
	s.leaderAskAt = s.now.Add(s.backoff(s.leaderAsks))
	s.p.meta.Trigger()
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
			if d := at.Add(s.parkLimit(t)); d.Before(next) {
				next = d
			}
		}
		if s.cfg.AutoCreateTopics && !t.creating && errors.Is(t.err, kerr.UnknownTopicOrPartition) &&
			t.createAt.After(s.now) && t.createAt.Before(next) {
			next = t.createAt // a throttled or failed CreateTopics is due again
		}
	}
	for _, br := range s.brokers {
		if br.conn != nil && br.inflight == 0 {
			next = s.closeIdle(br, next) // sink_dial.go
		}
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
	if s.idem != nil {
		next = s.idem.wakeBy(s.now, next)
	}
	if s.leaderAskDue && s.leaderAskAt.Before(next) {
		next = s.leaderAskAt
	}
	next = s.readinessWake(next)
	// The exact deadline, no jitter: Go's netpoller sleeps in whole
	// milliseconds (epoll_wait), so a deadline pushed past a millisecond
	// boundary (the 0–250 µs of jitter this had) fires about 1 ms late
	// whenever nothing else wakes the runtime: a lingered batch then went
	// out at linger + ~1.4 ms for 34–46 % of single records (issue 35,
	// TestLingeredBatchSentWhenItsLingerEnds).
	d := max(next.Sub(s.now), 0)
	s.timer.Reset(d)
}

// post runs f on the IO goroutine, unless the producer is closing.
func (s *sink) post(f func()) {
	select {
	case s.admin <- f:
	case <-s.p.quit:
	}
}
