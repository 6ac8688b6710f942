package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/lifetime"
	"github.com/samsa-go/samsa/internal/logging"
	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/metadata"
	"github.com/samsa-go/samsa/spool"
)

// Producer sends records to Kafka asynchronously. Create it with New; it is
// safe for concurrent use. Every Send variant returns at once (blocking only
// while the buffer pool is full, for at most Config.MaxBlock); the outcome
// comes later through a Future, a callback or a channel.
type Producer struct {
	cfg        Config
	log        *slog.Logger
	pool       bufferpool.Pool
	acc        *accumulator.Accumulator[completion, *ioPart, sendState]
	meta       *metadata.Client
	compressor *compression.Compressor

	topics sync.Map // string → *topicState
	// lastTopic is the topic the last lookup found in topics (a Send's,
	// or the IO goroutine's): most producers send to one topic, and
	// comparing its name costs a few nanoseconds where the map's lookup
	// costs 20–30 (topics are never removed or replaced, so a cached one
	// stays valid).
	lastTopic atomic.Pointer[topicState]

	// pending counts records accepted by Send and not yet completed, in
	// two slots: a record counts in slot epoch&1 as loaded at its Send.
	// Flush increments epoch, so that the records sent before it are
	// those of the other slot, and waits for that slot to drain (see
	// flush). Close waits for both.
	pending  [2]atomic.Int64
	epoch    atomic.Uint64
	flushMu  sync.Mutex
	slotDone [2]chan struct{} // closed when pending[i] reaches 0; nil when nobody waits
	idleDone chan struct{}    // closed when both slots reach 0; nil when nobody waits
	flushing atomic.Int32     // Flush calls in progress: the IO goroutine seals at once

	// memWanted is set by the IO goroutine when moving parked records ran
	// out of pool memory; the completer then wakes it when memory is freed.
	memWanted atomic.Bool
	// ctxEnded is set when the Send context of a buffered record ended
	// (ctxWatch.ended): the IO goroutine's next step fails such records
	// (sink.failEnded).
	ctxEnded  atomic.Bool
	lastGroup atomic.Pointer[ctxGroup] // the Send context group made last (cancel.go)
	stats     counters
	clock     *clock    // record timestamps
	hooks     *hooks    // Config.Hooks, sorted per event (observe.go)
	rec       *recorder // behind Metrics

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	closeCtx  context.Context // Close's context, for the IO goroutine's shutdown (set before quit is closed)
	// drained is set by the IO goroutine's shutdown once it stops failing
	// buffered records (Close's context ended with records left). A Send
	// that appends after that fails what is buffered itself (failLate).
	drained   atomic.Bool
	lateMu    sync.Mutex      // serializes failLate
	quit      chan struct{}   // closed to stop the IO goroutine
	closing   context.Context // canceled by Close: ends waits for memory and dials
	stopWaits context.CancelFunc
	ioDone    chan struct{}
	ioGoid    atomic.Uint64 // the IO goroutine's id (see ownGoroutine)
	// stopSteps counts the steps of Close's teardown and of the IO
	// goroutine's shutdown: once Close's context has ended, Close waits
	// for them only while they move (stopGoroutines).
	stopSteps atomic.Uint64
	// owned holds the goroutines started on the producer's behalf through
	// the contexts it hands its SASL mechanism (ownedMechanism: a token
	// refresh); Close ends them and waits for them, last.
	owned     *lifetime.Group
	completer *completer

	// logRepeat rates the Warn of failures that last (dials,
	// InitProducerId, CreateTopics): once per key and minute.
	logRepeat logging.Repeat

	// connCfg is the connection config of every broker connection, for
	// Ping (the IO goroutine and the metadata client have their own).
	connCfg conn.Config

	txn     *txnManager // nil without Config.TransactionalID (transaction.go)
	txnSink *sink       // the IO goroutine, for the transaction methods' requests to it

	push *pusher // the KIP-714 telemetry goroutine (telemetry.go); nil with DisableMetricsPush
	// metaReady is closed at the first successful metadata refresh
	// (metaOnce): the telemetry goroutine's requests then find the
	// metadata connection open instead of dialing one of their own.
	metaReady chan struct{}
	metaOnce  sync.Once

	// spool is Config.Spool's log (spool.go); nil without one. persister
	// closes Futures' Persisted (nil without a spool).
	spool     *spool.Spool
	persister *persister
	drain     *drainer // the spool's drainer (spool_drain.go); nil without a spool or with ExactlyOnce
	// reach says whether the cluster is reachable (spool.go): only in
	// overflow mode, nil otherwise.
	reach *reachability
	// spoolAppended, set by tests only, runs in sendSpooled between a
	// record's append to memory and its markPersisted (a race's seam).
	spoolAppended func()
	eos           *eosDriver // nil unless Config.Spool.ExactlyOnce (spool_eos.go)
}

// topicState is a topic as Send sees it.
type topicState struct {
	name   string
	acc    *accumulator.Topic[completion, *ioPart, sendState]
	sticky *stickyPartitioner
	stats  *topicStats
	// count is the topic's partition count once it was recreated with
	// fewer partitions than the accumulator has (which only grow), 0
	// otherwise; set by the IO goroutine (updatePartitions).
	count atomic.Int32
	// watched is set once a record was sent to the topic with a context
	// that can end (cancel.go): the IO goroutine then looks at its
	// records' contexts before it writes them.
	watched atomic.Bool
	// spilling counts the topic's records on the spool's disk waiting for
	// the drainer (spool_drain.go), plus one while New's backlog of the
	// topic is not in memory: a Send of the topic then spills too.
	spilling atomic.Int32
}

// live returns the partitions records may go to: parts, cut to count.
func (t *topicState) live(parts []*accPartition) []*accPartition {
	if c := int(t.count.Load()); c > 0 && c < len(parts) {
		return parts[:c]
	}
	return parts
}

// New validates cfg, applies its defaults and starts the producer's IO and
// completion goroutines. It does no network I/O: brokers are contacted in
// the background, so New succeeds even when none is reachable yet. The
// error wraps ErrInvalidConfig and names every bad field.
func New(cfg Config) (*Producer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	comp, err := compression.NewCompressor(cfg.Compression, cfg.CompressionLevel)
	if err != nil {
		return nil, fmt.Errorf("%w: Compression: %w", ErrInvalidConfig, err)
	}
	hs, err := newHooks(cfg.Hooks, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("%w: Hooks: %w", ErrInvalidConfig, err)
	}
	usage := newSpoolUsage(cfg.Logger, cfg.Spool)
	sp, err := openSpool(cfg.Spool, usage.hook())
	if err != nil {
		return nil, err
	}
	if sp != nil {
		// A spooled record is retried until delivered or Close.
		cfg.DeliveryTimeout = spoolDeliveryTimeout
		if cfg.Spool.ExactlyOnce {
			// Stable across restarts: the next producer on the
			// directory fences this one (spool_eos.go).
			cfg.TransactionalID = SpoolTransactionalID(sp.ID())
		}
	}
	p := &Producer{
		cfg:        cfg,
		log:        cfg.Logger,
		pool:       guardUserPool(cfg.BufferPool, cfg.BufferMemory, cfg.Logger),
		compressor: comp,
		hooks:      hs,
		rec:        newRecorder(),
		quit:       make(chan struct{}),
		ioDone:     make(chan struct{}),
		owned:      lifetime.NewGroup(),
		metaReady:  make(chan struct{}),
		spool:      sp,
	}
	logIgnoredProperties(p.log, cfg.ignoredProps)
	usage.opened(sp)
	connCfg := conn.Config{
		ClientID:       cfg.ClientID,
		DialTimeout:    cfg.DialTimeout,
		DialTimeoutMax: cfg.DialTimeoutMax,
		Setups:         &conn.SetupTimeouts{}, // Produce and coordinator connections; metadata keeps its own
		Dialer:         cfg.Dialer,
		RequestTimeout: cfg.RequestTimeout,
		Logger:         cfg.Logger,
		TLS:            cfg.TLS,
		SASL:           ownMechanism(cfg.SASL, p.owned),

		SendBufferBytes:    cfg.SendBufferBytes,
		ReceiveBufferBytes: cfg.ReceiveBufferBytes,
		OnThrottle: func(addr string, d time.Duration) {
			p.stats.throttled.Add(int64(d)) // the connection logs it
		},
	}
	p.connCfg = connCfg
	p.meta, err = metadata.New(metadata.Config{
		Bootstrap:       cfg.Brokers,
		ClientID:        connCfg.ClientID,
		DialTimeout:     connCfg.DialTimeout,
		DialTimeoutMax:  connCfg.DialTimeoutMax,
		ConnMaxIdle:     cfg.ConnMaxIdle,
		Dialer:          connCfg.Dialer,
		RequestTimeout:  connCfg.RequestTimeout,
		TLS:             connCfg.TLS,
		SASL:            connCfg.SASL,
		OnThrottle:      connCfg.OnThrottle,
		OnRefresh:       p.onMetadataRefresh,
		MaxAge:          cfg.MetadataMaxAge,
		MaxIdle:         cfg.MetadataMaxIdle,
		RetryBackoff:    metadataBackoff(cfg),
		RetryBackoffMax: cfg.RetryBackoffMax,
		Logger:          cfg.Logger,

		// A producer that creates its topics itself (AutoCreateTopics)
		// never lets a Metadata request create them first: a broker
		// would use its num.partitions, not AutoCreatePartitions.
		AllowAutoTopicCreation:    !cfg.DisableAutoTopicCreation && !cfg.AutoCreateTopics,
		ResolveCanonicalBootstrap: cfg.ClientDNSLookup == DNSResolveCanonicalBootstrapServersOnly,
		DisableRebootstrap:        cfg.MetadataRecoveryStrategy == MetadataRecoveryNone,
		RebootstrapTrigger:        metadataTrigger(cfg),
		DisableClusterCheck:       cfg.DisableMetadataClusterCheck,
		SendBufferBytes:           cfg.SendBufferBytes,
		ReceiveBufferBytes:        cfg.ReceiveBufferBytes,
	})
	if err != nil {
		if sp != nil {
			sp.Close()
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	p.closing, p.stopWaits = context.WithCancel(context.Background())
	if sp != nil && cfg.Spool.Mode == SpoolOverflow {
		p.reach = &reachability{}
	}
	p.acc = accumulator.New[completion, *ioPart, sendState](accumulator.Config{
		// A batch never outgrows a request: a larger BatchSize would
		// make requests over MaxRequestSize that brokers refuse.
		BatchSize:        min(cfg.BatchSize, cfg.MaxRequestSize),
		InitialBatchSize: startBatchSize(cfg),
		MaxBatchSize:     min(cfg.MaxRequestSize, int(p.pool.Size())),
		Pool:             p.pool,
		MaxBlock:         cfg.MaxBlock,
		Closing:          p.closing,

		// Completions, batches and parked records are charged to the
		// pool: BufferMemory bounds the heap they take too.
		ChargeBookkeeping: true,
		// With HookRecordCompleted hooks a record also keeps a recordObs.
		// So does every record with a spool.
		ExtraRecordCharge: p.hooks.recordObsCharge(sp != nil),
		// A parked record that fails keeps its charge until its outcome
		// is delivered (completer.complete, failLate), as a batch keeps
		// its memory: slow callbacks slow Send instead of growing
		// memory.
		KeepFailedCharge: true,

		// The completion goroutine frees pool memory: a Send from a
		// callback must not wait for it (it would wait MaxBlock for
		// itself). Asked only when the pool is full.
		MayWait:  func() bool { return goroutineID() != p.completer.goid.Load() },
		OnWaited: p.onBufferWaited,
	})
	p.completer = newCompleter(p)
	p.clock = newClock()
	if cfg.TransactionalID != "" {
		connCfg.MaxVersions = txnMaxVersions
		txnCfg := connCfg
		txnCfg.MaxIdle = max(cfg.ConnMaxIdle, 0) // the IO goroutine closes its own connections (sink.closeIdle)
		p.txn = newTxnManager(p, newTxnClient(p, txnCfg))
	}
	if !cfg.DisableMetricsPush {
		p.push = newPusher(p, time.Now())
	}
	s := newSink(p, connCfg)
	p.txnSink = s
	go p.completer.run()
	if sp != nil {
		p.persister = newPersister(sp, cfg.Spool.Sync)
		go p.persister.run()
	}
	if p.push != nil {
		go p.push.run()
	}
	go func() {
		p.ioGoid.Store(goroutineID())
		defer close(p.ioDone)
		s.run()
	}()
	switch {
	case sp != nil && cfg.Spool.ExactlyOnce:
		// The driver sends the backlog, after skipping what an
		// earlier producer committed.
		p.eos = newEOSDriver(p, sp)
		go p.eos.run()
	case sp != nil:
		p.startDrain()
	}
	return p, nil
}

// initialBatchSize is the buffer a new batch starts with: min(batch.size,
// 16 KiB) halved while it stays even and at least 512 bytes. A batch that
// fills it grows by doubling up to batch.size, and its partition's next
// batch starts with the size the last one reached: a busy partition soon
// gets big buffers at once, while one that gets a record per linger (with
// thousands of partitions) touches a few hundred bytes, not 16 KiB. Every
// size a batch goes through is a doubling of this one, which the default
// pool recycles.
func initialBatchSize(batchSize int) int {
	n := min(batchSize, defaultBatchSize)
	for n%2 == 0 && n/2 >= 512 {
		n /= 2
	}
	return n
}

// startBatchSize is the buffer a new batch starts with: initialBatchSize,
// or the recycled size of a pool given in Config.BufferPool that reports one
// (as bufferpool.SimplePool does), so that batches start on a size that pool
// recycles.
func startBatchSize(cfg Config) int {
	if p, ok := cfg.BufferPool.(interface{ PooledSize() int }); ok {
		if n := p.PooledSize(); n > 0 {
			return min(n, cfg.BatchSize)
		}
	}
	return initialBatchSize(cfg.BatchSize)
}

// Send buffers rec and returns a Future for its outcome. It never blocks on
// metadata: when rec's topic is not known yet, the record is parked and sent
// once the topic's partitions are known. It blocks only while the buffer
// pool is full, for at most Config.MaxBlock or until ctx ends.
//
// ctx bounds the record until a Produce request first carries its batch,
// also after Send has returned (as kgo's Produce): if ctx ends while the
// record waits for memory, is parked for its topic's metadata, or lingers
// in a batch not yet written, the record fails with an error wrapping
// ctx.Err() (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded holds) and is never written; the batch goes
// without it (at once, if it was lingering), and under idempotence the
// partition's sequences stay gapless, since a batch takes its sequences
// only when it is first written. Once its batch was written, ctx no longer
// matters: the broker may already have the record, so only
// Config.DeliveryTimeout bounds it from then on, and a failure then says
// whether it may have been written (ErrOutcomeUnknown). A ctx already ended
// fails the record at once. With context.Background() (or any ctx whose
// Done is nil) nothing of this costs anything; records sent with one ctx
// that can end share one context.AfterFunc (no allocation per record), and
// a ctx per Send costs one each, released when its record completes. So
// do not cancel ctx right after Send (defer cancel() around a Send that
// returns at once) unless the record should go only if it is written by
// then: use a ctx that lives as long as the record may wait, or
// context.Background() and Config.DeliveryTimeout.
//
// Errors come through the Future: ErrInvalidRecord (nil record, bad topic,
// partition out of range, a timestamp before 1970, partitioner error),
// ErrRecordTooLarge,
// ErrBufferExhausted (pool full for MaxBlock; with Config.Spool, the
// spool at MaxBytes for MaxBlock: a full pool then spills the record to
// disk, SpoolConfig), ctx.Err() wrapped (ctx ended
// before the record was written), ErrPurged (Purge), ErrClosed,
// ErrDeliveryTimeout, or a *KafkaError.
func (p *Producer) Send(ctx context.Context, rec *Record) *Future {
	f := new(Future)
	if p.spool != nil {
		f.persisted = make(chan struct{})
	}
	p.send(ctx, rec, futureCompletion(f), true)
	return f
}

// TrySend is Send without any blocking: when the buffer pool has no memory
// for the record it fails at once with ErrBufferExhausted (with
// Config.Spool it is spilled to disk instead, and fails at once only when
// the spool is at MaxBytes: SpoolConfig). ctx bounds the record as Send's
// does.
func (p *Producer) TrySend(ctx context.Context, rec *Record) *Future {
	f := new(Future)
	if p.spool != nil {
		f.persisted = make(chan struct{})
	}
	p.send(ctx, rec, futureCompletion(f), false)
	return f
}

// SendCallback is Send with a callback instead of a Future, the
// allocation-free path. fn is called exactly once with the record's metadata
// or error. It runs on the producer's completion goroutine, one callback at a
// time, in order within each partition; a slow callback delays the others
// (and the memory of their batches), so hand long work to another
// goroutine. For an error found by SendCallback itself (invalid record,
// buffer exhausted, closed producer) fn runs on the caller's goroutine before
// SendCallback returns. Flush returns only after the callbacks of the records
// sent before it have returned. A callback that panics is recovered and
// logged at Error; the other records still complete. A Send from a callback
// never waits for memory (see ErrBufferExhausted). ctx bounds the record as
// Send's does.
func (p *Producer) SendCallback(ctx context.Context, rec *Record, fn func(RecordMetadata, error)) {
	if fn == nil {
		fn = func(RecordMetadata, error) {}
	}
	p.send(ctx, rec, callbackCompletion(fn), true)
}

// SendTo is Send with a delivery channel, for pipelines that collect every
// outcome in one goroutine (like confluent-kafka-go's delivery channel). One
// Result per record is sent on results, from the completion goroutine; the
// channel must be drained, because a full channel holds up every completion
// (and the buffer memory behind it) until it has room. An error found by
// SendTo itself is sent from the caller's goroutine before SendTo returns,
// so an unbuffered channel must have a receiver running elsewhere.
// SendTo panics if results is nil: the outcome would have nowhere to go.
// ctx bounds the record as Send's does.
func (p *Producer) SendTo(ctx context.Context, rec *Record, results chan<- Result) {
	if results == nil {
		panic("producer: SendTo needs a non-nil results channel")
	}
	p.send(ctx, rec, channelCompletion(results, rec), true)
}

func (p *Producer) send(ctx context.Context, rec *Record, c completion, wait bool) {
	if rec == nil {
		p.deliver(&c, p.failedMetadata(rec), fmt.Errorf("%w: nil record", ErrInvalidRecord))
		return
	}
	// Counted before the closed check: Close sets closed, then waits for
	// pending to reach 0. So a Send either sees closed and fails, or
	// Close waits for its record (flushed, or failed by the shutdown).
	c.setEpoch(uint8(p.epoch.Load() & 1))
	p.pending[c.epoch()].Add(1)
	if p.closed.Load() {
		// Not a record of the transaction (Close may be committing
		// it): as Java's send after close throws without touching it.
		p.refuse(&c, rec, ErrClosed)
		return
	}
	if p.txn != nil && p.eos == nil {
		if err := p.txn.sendErr(); err != nil {
			p.reject(&c, rec, err)
			return
		}
	}
	if !rec.Timestamp.IsZero() {
		// Compared as times: UnixMilli wraps around for times more than
		// 292 million years away.
		if rec.Timestamp.Before(unixEpoch) {
			// -1 is the wire's "no timestamp"; Java's ProducerRecord
			// refuses any negative one before send, so the record is
			// refused like a nil one: no hook sees it, and a
			// transaction is not spoiled.
			p.refuse(&c, rec, fmt.Errorf("%w: timestamp %v is before 1970 (Kafka's timestamps are milliseconds since 1970, never negative)", ErrInvalidRecord, rec.Timestamp))
			return
		} else if !rec.Timestamp.Before(timestampLimit) {
			p.refuse(&c, rec, fmt.Errorf("%w: timestamp %v is 2^60 ms or more after 1970", ErrInvalidRecord, rec.Timestamp))
			return
		}
	}
	if p.hooks.records {
		rec, c.obs = p.observeSend(ctx, rec) // Send's copy, with the hooks' headers
	}
	if rec.Timestamp.IsZero() {
		c.setTS(p.clock.nowMillis())
	} else {
		c.setTS(clampedMillis(rec.Timestamp)) // a hook may have set any time
	}
	size := recordbatch.BodySize(rec.Key, rec.Value, rec.Headers)
	p.rec.recordSize(size)
	if err := p.acc.CheckSize(size); err != nil {
		p.reject(&c, rec, fmt.Errorf("%w: topic %q: %w", ErrRecordTooLarge, rec.Topic, err))
		return
	}
	t, err := p.topic(rec.Topic)
	if err != nil {
		p.reject(&c, rec, err)
		return
	}
	watched := false
	if ctx != nil {
		if done := ctx.Done(); done != nil {
			// A context that can end bounds the record until a request
			// first carries it (cancel.go); context.Background() costs
			// nothing here.
			if err := ctx.Err(); err != nil {
				p.reject(&c, rec, ctxEndedErr(err))
				return
			}
			c.obs = p.watch(ctx, done, t, c.obs)
			watched = true
		}
	}
	if p.spool != nil {
		p.sendSpooled(ctx, t, rec, c, wait)
		return
	}
	if err := p.append(ctx, t, rec, size, c, wait); err != nil {
		err = p.appendErr(err, wait)
		p.observeExhausted(rec.Topic, size, err)
		p.reject(&c, rec, err)
		return
	}
	if watched {
		p.resweepIfEnded(ctx)
	}
	if p.drained.Load() {
		// Close gave up waiting (its context ended) and the IO goroutine
		// has stopped: nobody else will complete this record.
		p.failLate()
	}
}

// appendErr is the error of a record append refused.
func (p *Producer) appendErr(err error, wait bool) error {
	switch {
	case errors.Is(err, accumulator.ErrClosing):
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case wait && errors.Is(err, ErrBufferExhausted) && goroutineID() == p.completer.goid.Load():
		err = fmt.Errorf("%w (a Send from a callback does not wait for memory: the completion goroutine frees it)", err)
	}
	return err
}

// reject completes a record that Send counted but did not take. It counts
// the record finished before running its callback, on Send's goroutine: a
// callback that flushes, commits or aborts would otherwise wait for
// itself. Send has not returned, so no Flush was promised this record.
func (p *Producer) reject(c *completion, rec *Record, err error) {
	if p.txn != nil && p.eos == nil {
		// A record of the transaction failed: it cannot commit. (The
		// exactly-once spool's Sends are not in its transactions.)
		p.txn.rejected(err)
	}
	p.refuse(c, rec, err)
}

// refuse is reject without telling the transaction.
func (p *Producer) refuse(c *completion, rec *Record, err error) {
	p.failedOf(rec.Topic, 1)
	epoch := c.epoch()
	md := p.failedMetadata(rec)
	p.finished(epoch, 1)
	p.deliver(c, md, err)
}

// deliver completes c on the calling goroutine; a panicking callback is
// recovered and logged.
func (p *Producer) deliver(c *completion, md RecordMetadata, err error) {
	defer p.recoverCallback(c)
	c.deliver(md, err)
}

// recoverCallback, deferred around callbacks, recovers a panicking callback
// (or a send on a closed SendTo channel) and logs it: the other records
// still complete. A panic completing a Future is the producer's own bug and
// is not recovered.
func (p *Producer) recoverCallback(c *completion) {
	if c.kind() == kindFuture {
		return
	}
	if v := recover(); v != nil {
		p.logPanic(v)
	}
}

// logPanic logs a recovered callback panic at Error, with its stack, to
// Config.Logger (by default slog's default logger): a swallowed panic must
// not go unseen.
func (p *Producer) logPanic(v any, args ...any) {
	p.log.Error("producer: a record's callback panicked; the panic was recovered",
		append([]any{"panic", fmt.Sprint(v), "stack", string(debug.Stack())}, args...)...)
}

// failLate fails every record still buffered, on the calling goroutine,
// once the IO goroutine has stopped (see drained). Callbacks run here, after
// the locks are released.
func (p *Producer) failLate() {
	p.lateMu.Lock()
	defer p.lateMu.Unlock()
	err := fmt.Errorf("%w: the record was sent while Close was giving up", ErrClosed)
	var parked []completion
	var batches []*batch
	p.topics.Range(func(_, v any) bool {
		ts := v.(*topicState)
		ts.acc.FailParked(func(c completion) { parked = append(parked, c) })
		for _, ap := range ts.acc.KnownPartitions() {
			batches = ap.TakeAll(batches)
		}
		p.failedOf(ts.acc.Name, len(parked))
		for i := range parked {
			p.deliver(&parked[i], RecordMetadata{Topic: ts.acc.Name, Partition: -1, Offset: -1}, err)
			p.acc.ReleaseFailed(1)
			p.finished(parked[i].epoch(), 1)
		}
		parked = parked[:0]
		return true
	})
	for _, b := range batches {
		md := RecordMetadata{Topic: b.Partition.Topic.Name, Partition: b.Partition.ID, Offset: -1}
		n := b.Records.Len()
		p.failedOf(md.Topic, n)
		for i := range n {
			p.deliver(b.Records.At(i), md, err)
		}
		odd := oddEpochs(b)
		p.acc.Free(b)
		p.finishedBatch(int64(n), odd)
	}
}

func (p *Producer) failedMetadata(rec *Record) RecordMetadata {
	md := RecordMetadata{Partition: -1, Offset: -1}
	if rec != nil {
		md.Topic = rec.Topic
	}
	return md
}

// topic returns the state of a topic, creating it on first use. Only valid
// topic names get a state, so the name is checked once, not per record.
func (p *Producer) topic(name string) (*topicState, error) {
	if t := p.lastTopic.Load(); t != nil && t.name == name {
		return t, nil
	}
	if t, ok := p.topics.Load(name); ok {
		ts := t.(*topicState)
		p.lastTopic.Store(ts)
		return ts, nil
	}
	if err := validateTopic(name); err != nil {
		return nil, err
	}
	t := &topicState{name: name, acc: p.acc.NewTopic(name), sticky: newStickyPartitioner(min(p.cfg.BatchSize, p.cfg.MaxRequestSize), p.cfg.DisableAdaptivePartitioning)}
	t.stats = p.newTopicStats(t)
	actual, _ := p.topics.LoadOrStore(name, t)
	return actual.(*topicState), nil
}

// append puts the record in its partition's batch, or parks it.
func (p *Producer) append(ctx context.Context, t *topicState, rec *Record, size int, c completion, wait bool) error {
	if err := checkRecordPartition(p.cfg.Partitioner, rec); err != nil {
		return err
	}
	parts := t.acc.Partitions()
	if parts == nil {
		parked, err := t.acc.Park(ctx, c.ts(), rec.Key, rec.Value, rec.Headers, parkedPartition(p.cfg.Partitioner, rec), c, wait)
		if err != nil {
			// A topic that fails fast stays wanted, so that its metadata
			// is fetched again and the failure ends with its cause.
			p.meta.Want(rec.Topic)
			return err
		}
		if parked {
			p.meta.Want(rec.Topic)
			return nil
		}
		// The partitions became known while we took the lock.
		if parts = t.acc.KnownPartitions(); parts == nil {
			return errors.New("producer: internal error: topic neither parked nor known")
		}
	}
	parts = t.live(parts)
	n := int32(len(parts))
	part := UnknownPartition
	if rec.ExplicitPartition {
		part = rec.Partition // not negative (checkRecordPartition), so never UnknownPartition
	} else if _, ok := p.cfg.Partitioner.(defaultPartitioner); ok {
		if rec.Key != nil {
			part = KeyPartition(rec.Key, n)
		}
	} else {
		// The interface call would make rec escape, and so cost callers
		// who build a Record per Send an allocation: a custom partitioner
		// gets a copy instead.
		r := *rec
		var err error
		if part, err = callPartitioner(p.cfg.Partitioner, &r, n); err != nil {
			return err
		}
	}
	load := func(i int32) int { return parts[i].Load() }
	sticky := part == UnknownPartition
	if sticky {
		part = t.sticky.partition(n, load)
	}
	if part < 0 || part >= n {
		return checkPartition(rec.Topic, part, n)
	}
	if err := parts[part].Append(ctx, c.ts(), rec.Key, rec.Value, rec.Headers, c, wait); err != nil {
		return err
	}
	if sticky {
		t.sticky.appended(part, size, n, load)
	}
	return nil
}

// finished marks n records of epoch parity e as completed, and wakes
// Flush when none of that parity is left, and Close when none at all is.
// Whichever slot reaches 0 last sees the other at 0 too, so idleDone is
// never missed.
func (p *Producer) finished(e uint8, n int64) {
	if n == 0 || p.pending[e].Add(-n) != 0 {
		return
	}
	p.flushMu.Lock()
	if ch := p.slotDone[e]; ch != nil && p.pending[e].Load() == 0 {
		close(ch)
		p.slotDone[e] = nil
	}
	if p.idleDone != nil && p.pending[0].Load() == 0 && p.pending[1].Load() == 0 {
		close(p.idleDone)
		p.idleDone = nil
	}
	p.flushMu.Unlock()
}

// finishedBatch marks n records as completed, odd of them of odd parity.
func (p *Producer) finishedBatch(n, odd int64) {
	p.finished(0, n-odd)
	p.finished(1, odd)
}

// oddEpochs counts b's records sent in an odd Flush epoch.
func oddEpochs(b *batch) int64 {
	var odd int64
	for i, n := 0, b.Records.Len(); i < n; i++ {
		odd += int64(b.Records.At(i).epoch())
	}
	return odd
}

// Flush sends every buffered record at once, without waiting for Linger,
// and waits until every record sent before Flush was called is
// acknowledged or has failed, and its callback has returned. As in Java,
// records sent while it waits are not waited for (they are sent at once
// too, while Flush waits), so Flush returns under a continuous stream of
// Sends; a Send concurrent with the call may or may not be covered. It
// returns ctx.Err() if ctx ends first (records are not affected), and
// ErrClosed after Close.
//
// Flush must not be called from a callback, nor from a hook, partitioner
// or OnDataLoss running on one of the producer's goroutines (the IO
// goroutine, a connection's reader or writer, the metadata goroutine): it
// would wait for the goroutine that runs it. There it returns at once with
// an error wrapping ErrFlushInCallback. A hook that runs in Send, on its
// caller's goroutine (HookRecordBuffered, HookBufferWaited), runs for a
// record already counted: Flush there waits for that very record, which
// cannot be sent before the hook returns, so it returns only when ctx
// ends. Close there does the same. Call them after Send returns. A nil ctx
// is taken as context.Background(), as Java's flush().
func (p *Producer) Flush(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background() // as Java's flush(): no bound
	}
	if p.closed.Load() {
		return ErrClosed
	}
	if where := p.ownGoroutine(); where != "" {
		return fmt.Errorf("%w: Flush called from %s would wait for that goroutine", ErrFlushInCallback, where)
	}
	return p.flush(ctx)
}

// flush ends the current epoch and waits for its records. Sends from then
// on count in the other slot, which must be empty first: when an earlier
// Flush's epoch is still draining there, flush waits for it (those records
// were sent before this call too), and only then flips. So a slot never
// holds two epochs that a Flush waits for, and records sent after the flip
// never hold up this Flush. A Send that loaded the epoch just before the
// flip may count in the slot after this Flush saw it drained: it was
// concurrent with the call, and the next Flush covers it.
func (p *Producer) flush(ctx context.Context) error {
	p.flushing.Add(1)
	defer p.flushing.Add(-1)
	if p.eos != nil {
		p.eos.poke() // commit now, not at CommitInterval
	}
	var sealed uint8
	for {
		p.flushMu.Lock()
		e := p.epoch.Load()
		next := uint8((e + 1) & 1)
		if p.pending[next].Load() == 0 {
			p.epoch.Store(e + 1)
			sealed = uint8(e & 1)
			p.flushMu.Unlock()
			break
		}
		ch := p.slotDoneLocked(next)
		p.flushMu.Unlock()
		if err := p.awaitKicking(ctx, ch); err != nil {
			return err
		}
	}
	for {
		p.flushMu.Lock()
		if p.pending[sealed].Load() == 0 {
			p.flushMu.Unlock()
			return nil
		}
		ch := p.slotDoneLocked(sealed)
		p.flushMu.Unlock()
		if err := p.awaitKicking(ctx, ch); err != nil {
			return err
		}
	}
}

// slotDoneLocked returns the channel closed when pending[e] reaches 0.
// flushMu must be held.
func (p *Producer) slotDoneLocked(e uint8) chan struct{} {
	if p.slotDone[e] == nil {
		p.slotDone[e] = make(chan struct{})
	}
	return p.slotDone[e]
}

// awaitKicking wakes the IO goroutine (to seal what lingers) and waits for
// ch or ctx.
func (p *Producer) awaitKicking(ctx context.Context, ch <-chan struct{}) error {
	p.acc.Kick()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// whenIdle returns a channel closed once no record is buffered (closed
// already if none is).
func (p *Producer) whenIdle() <-chan struct{} {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if p.pending[0].Load() == 0 && p.pending[1].Load() == 0 {
		return closedChan
	}
	if p.idleDone == nil {
		p.idleDone = make(chan struct{})
	}
	return p.idleDone
}

// Close flushes (as Flush does, bounded by ctx), then stops the producer:
// records still buffered when ctx ends fail with ErrClosed, connections are
// closed, and every goroutine of the producer (its connections' and
// short-lived ones included) has exited when Close returns nil. Send after
// Close fails with ErrClosed. When ctx ends, Close stops waiting (for
// Flush, and for the callbacks): every record still buffered fails with
// ErrClosed and Close returns an error wrapping ctx.Err() that says how many
// ("producer: close: ctx ended with 3 records still buffered; they failed
// with ErrClosed: context deadline exceeded"), after the outcomes already
// decided are delivered, as long as callbacks keep returning. Close returns
// by ctx's end, plus 100 ms without progress, even when user code blocks one
// of its goroutines: a callback that blocks (none returned for 100 ms after
// ctx ended) is not waited for: the completion goroutine delivers the
// outcomes queued behind it once it returns, and then exits, after Close has
// returned. Likewise a hook, partitioner or OnDataLoss blocking the IO
// goroutine (HookBatchWritten, say), or a hook blocking a connection's or
// the metadata goroutine: user code cannot be interrupted, so that goroutine
// exits once it returns, after Close; the records it still holds then fail
// with ErrClosed (with ErrOutcomeUnknown for those in flight), each future
// exactly once, and the rest of the producer's goroutines stop after it.
// Close's error then says so and counts the records not completed yet
// ("producer: close: ctx ended while user code (a hook, a callback) blocks
// one of the producer's goroutines, with 20 records not completed; ...").
// Close is safe to call more than once; later calls return the first call's
// result.
//
// Called from a callback (on the completion goroutine), or from a hook,
// partitioner or OnDataLoss running on another of the producer's goroutines
// (the IO goroutine, a connection's reader or writer, the metadata
// goroutine), Close cannot wait for the goroutine it runs on: it marks the
// producer closed (Sends from then on fail with ErrClosed), starts closing
// in the background with ctx and returns at once an error wrapping
// ErrClosed. A later Close from another goroutine waits for that close and
// returns its result.
//
// A transactional producer's open transaction is aborted first, as Java's
// producer does on close (its records not yet sent fail with
// ErrTransactionAborted, then EndTxn(abort)), and a commit left in
// progress by a CommitTransaction that returned ctx.Err() is finished (or
// aborted, if a record of it failed meanwhile: Close then returns an error
// wrapping ErrTransactionAborted). A transaction method still running on
// another goroutine is waited for, and what it leaves open is ended. All
// of that is bounded by ctx and by Config.TransactionTimeout, after which
// the coordinator aborts the transaction itself. That error is Close's
// result when the flush has none.
//
// A nil ctx is taken as context.Background(): no bound, as Java's close()
// without a timeout.
//
// When the cluster subscribed the producer to client metrics (KIP-714, see
// Config.DisableMetricsPush), a push in flight is waited for and a last,
// terminating push with the final metrics is sent before the connections
// close, bounded by ctx and RequestTimeout; its failure is only logged.
func (p *Producer) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background() // as Java's close(): no bound
	}
	if where := p.ownGoroutine(); where != "" {
		// Waiting here would wait for the goroutine running this very
		// call. Close in the background instead, like the Java client
		// from a callback.
		p.closed.Store(true)
		go p.Close(ctx)
		return fmt.Errorf("%w: Close called from %s continues in the background", ErrClosed, where)
	}
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		if p.eos != nil {
			// Commit what the spool's driver has queued (bounded by
			// ctx) before the transaction is ended.
			p.eos.stop(ctx)
		}
		txnErr := p.endOnClose(ctx)
		flushErr := p.flush(ctx)
		if flushErr == nil {
			flushErr = txnErr
		}
		p.stopWaits() // Sends still waiting for memory fail with ErrClosed
		p.closeCtx = ctx
		close(p.quit)
		blocked, err := p.stopGoroutines(ctx)
		switch cerr := ctx.Err(); {
		case blocked:
			// The shutdown has not finished: what it has failed so far
			// is no count of what is left.
			flushErr = blockedCloseErr(p.pending[0].Load()+p.pending[1].Load(), cerr)
		case err != nil && flushErr == nil:
			flushErr = err
		case cerr != nil && errors.Is(flushErr, cerr):
			flushErr = closeCtxErr(p.txnSink.closedFailed.Load(), cerr)
		}
		p.closeErr = flushErr
	})
	return p.closeErr
}

// closeCtxErr is Close's error when its ctx ended before everything was
// delivered: how many records the shutdown failed with ErrClosed, wrapping
// ctx's error.
func closeCtxErr(n int64, ctxErr error) error {
	records := "records"
	if n == 1 {
		records = "record"
	}
	return fmt.Errorf("producer: close: ctx ended with %d %s still buffered; they failed with ErrClosed: %w", n, records, ctxErr)
}

// blockedCloseErr is Close's error when it returns while user code blocks
// one of the producer's goroutines (stopGoroutines): n records are not
// completed yet, and complete once that code returns.
func blockedCloseErr(n int64, ctxErr error) error {
	records := "records"
	if n == 1 {
		records = "record"
	}
	return fmt.Errorf("producer: close: ctx ended while user code (a hook, a callback) blocks one of the producer's goroutines, with %d %s not completed; they complete (those still buffered fail with ErrClosed) once it returns: %w", n, records, ctxErr)
}

// ownGoroutine names the producer's goroutine the caller runs on, or
// returns "" for any other (the user's): Close, Flush and the transaction
// methods must not wait for it. The completion and IO goroutines are known
// by their ids; a connection's reader or writer and the metadata goroutine
// only while they run a hook (the only user code of theirs that may call
// back into the producer), which hooks.callers marks. It costs a
// goroutineID, once per call of those methods.
func (p *Producer) ownGoroutine() string {
	id := goroutineID()
	switch {
	case id == p.completer.goid.Load():
		return "a callback"
	case id == p.ioGoid.Load():
		return "the IO goroutine (a hook, a parked record's partitioner, OnDataLoss)"
	case p.hooks.callers.has(id):
		return "a hook on a connection's or the metadata goroutine"
	case p.drain != nil && id == p.drain.goid.Load():
		return "the spool's drainer goroutine (RecoveryHook, a callback of a record failed there)"
	case p.eos != nil && id == p.eos.goid.Load():
		return "the spool's exactly-once driver (a callback, RecoveryHook)"
	}
	return ""
}

type counters struct {
	inflight, batches, batchBytes, uncompressed, retries atomic.Int64
	throttled                                            atomic.Int64 // nanoseconds
}

// minMetadataBackoff is the least wait between failed metadata requests
// when RetryBackoff is NoWait: batches are then retried at once, but a
// broker that is down is not polled in a loop.
const minMetadataBackoff = 10 * time.Millisecond

// metadataTrigger is metadata.Config.RebootstrapTrigger for cfg (after
// withDefaults, where NoWait became 0): there 0 is the default, and "at
// once" is negative.
func metadataTrigger(cfg Config) time.Duration {
	if cfg.MetadataRecoveryRebootstrapTrigger <= 0 {
		return -1
	}
	return cfg.MetadataRecoveryRebootstrapTrigger
}

// metadataBackoff is the metadata client's RetryBackoff for cfg (after
// withDefaults, where NoWait became 0): RetryBackoff, or with NoWait
// minMetadataBackoff capped at RetryBackoffMax.
func metadataBackoff(cfg Config) time.Duration {
	if cfg.RetryBackoff > 0 {
		return cfg.RetryBackoff
	}
	return min(minMetadataBackoff, cfg.RetryBackoffMax)
}
