// The durable spool (issue 34): Config.Spool, the write-ahead send path,
// Future.Persisted, the persister goroutine (SyncAlways), acks and replay.

package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/spool"
)

// SpoolMode says which records go through the spool.
type SpoolMode string

const (
	// SpoolWriteAhead (the default, also spelled "") writes every record
	// accepted by Send to the spool before it enters memory: a record
	// whose Future.Persisted is closed survives a crash of the process.
	SpoolWriteAhead SpoolMode = "write-ahead"
	// SpoolOverflow keeps a record in memory as without a spool (no spool
	// write, no samsa-spool header) while memory has room at once and the
	// cluster is reachable; it is written to the spool and spilled (the
	// drainer appends it as memory frees) when memory is full, while the
	// cluster is unreachable (overflowUnreachableAfter), and while its
	// topic has records spilled (so none overtakes them). Only the spilled
	// records are crash-safe: a crash, or Close giving up, loses the
	// records that were only in memory (Close fails them with ErrClosed).
	// A record that stayed in memory has its Future.Persisted closed once
	// it is delivered (it is then in Kafka), never if it fails. Records
	// in memory never expire either (DeliveryTimeout does not apply with a
	// spool): they wait for the cluster until Close, while new records go
	// to disk. The cluster is seen unreachable only through the produce
	// connections (a dial failed, a connection broke): a cluster down
	// before New, whose metadata never came, is not, and records then
	// stay in memory (not crash-safe) until memory is full.
	SpoolOverflow SpoolMode = "overflow"
)

// SpoolConfig is Config.Spool: a durable, bounded log on disk (package
// spool) that every record goes through, so that what Send accepted
// survives a crash, a restart and an outage of any length (or, in
// SpoolOverflow mode, only the records memory could not take or the
// cluster could not be reached for). The zero value of a field means its
// default. README's "Durable spool" says what is promised and what it
// costs.
//
// Send never waits for memory with a spool: a record BufferMemory has no
// room for at once is spilled, written to the spool and queued for the
// drainer goroutine, which appends it as memory frees (records of its
// topic sent later follow it, so none overtakes it). A spilled record
// costs 64 bytes of memory in that queue (its completion and sequence;
// up to twice that while the queue grows; not counted in BufferMemory)
// besides what the caller's Future holds. The queue is bounded only by
// the spool: at worst MaxBytes / the smallest record's entry records
// (64 bytes each); its backing array is let go when it empties above
// 4096 entries.
// Send waits only at MaxBytes (below). Flush waits for spilled records;
// Close too until its ctx ends, when those still on disk fail with
// ErrClosed (on the drainer goroutine) and stay in the spool. Except
// during New's replay of a backlog: Close stops the replay at once, and
// every record spilled meanwhile (of any topic) fails at once with
// ErrClosed and stays in the spool, Close returning nil.
//
// A spilled record (or a backlog record) the drainer cannot read back
// from the spool is read again, 5 times in all (100 ms, doubling,
// between); then it fails with ErrSpoolFailed (on the drainer goroutine,
// logged at Error) and stays in the spool, and so does every later
// record of its topic, which fails the same way until Close, so that
// none overtakes it: the next New sends them all, in order. A spilled
// record whose Send's ctx ended before the drainer reached it fails
// with the ctx's error and leaves the spool.
//
// A record leaves the spool when the broker acknowledges it: with
// AcksAll (the default) once the in-sync replicas have it; with
// AcksLeader (DisableIdempotence) once the leader has it, so a leader
// that fails before its followers copy it loses it, spooled or not.
// AcksNone is refused by New (ErrInvalidConfig naming Acks).
//
// A spooled record never expires: Close and Flush during an outage, or
// with a record of a topic the cluster does not have, wait as long as
// their ctx allows (bound it), and such a record stays in the spool
// (pinning its segment) across restarts; Purge fails the records not yet
// written with ErrPurged, which removes them from the spool. Flush and
// Close do not wait for New's replay of a backlog: what it has not put
// back in memory by Close fails RecoveryHook with ErrClosed and stays for
// the next New.
type SpoolConfig struct {
	// Dir is the spool's directory (samsa.spool.dir), created if missing.
	// Required. One producer at a time: New fails with ErrInvalidConfig
	// wrapping spool.ErrLocked while another spool (in this process or
	// another) has it open.
	Dir string

	// Mode is SpoolWriteAhead (samsa.spool.mode=write-ahead), the
	// default, or SpoolOverflow (samsa.spool.mode=overflow): see each.
	Mode SpoolMode

	// Sync is when the log is fsynced (samsa.spool.sync: none, interval,
	// always): spool.SyncInterval by default. A record is persisted once
	// its Future.Persisted is closed (or a SyncSpool called after its Send
	// returned has returned), not when Send returns: Send puts it in the
	// spool's write buffer, and the spool's writer goroutine writes what
	// accumulated with one write(2) (at most 1 MiB buffered, plus the
	// group being written). A crash of the process loses what was only in
	// the buffer: it was never reported persisted (its record may still be
	// delivered, if the producer sent it before the crash). Under SyncNone
	// and SyncInterval a record is persisted once it is in the segment
	// file (it survives a crash of the process; SyncInterval loses at most
	// SyncInterval of records to a power loss); under SyncAlways once an
	// fsync covers it (the persister goroutine fsyncs for every record
	// written since its last fsync, whether sent by Send, SendCallback or
	// SendTo: group commit; Send never waits for it; the spool also
	// fsyncs every SyncInterval as a backstop).
	Sync spool.SyncPolicy

	// SyncInterval is SyncInterval's period, and how often acknowledged
	// records are written to the position file and their segments
	// deleted (samsa.spool.sync.interval.ms). Default 100 ms.
	SyncInterval time.Duration

	// SegmentBytes is the size of a segment file
	// (samsa.spool.segment.bytes). Default 64 MiB, or MaxBytes/4 if that
	// is smaller.
	SegmentBytes int64

	// MaxBytes bounds the spool on disk (samsa.spool.max.bytes). When it
	// is reached, Send waits for acknowledged segments to be deleted up to
	// Config.MaxBlock (or its context), then fails the record with
	// ErrBufferFull (ErrBufferExhausted) wrapping spool.ErrFull, at Send.
	// Default 1 GiB.
	MaxBytes int64

	// DisableHeader leaves out the spool.HeaderKey ("samsa-spool") header
	// that every spooled record carries by default
	// (samsa.spool.header.enable=false): the spool's ID and the record's
	// sequence, 24 bytes, with which spool.Deduper drops the duplicates
	// that a replay after a crash can write.
	DisableHeader bool

	// RecoveryHook, if set, receives the outcome of each record that New
	// found unacknowledged in the spool and sent again, keyed by its
	// spool sequence (callbacks do not survive a restart). It runs on the
	// completion goroutine, like a SendCallback callback; for a record
	// that fails before it is back in memory (Close during the replay, a
	// partition the topic no longer has) on the drainer goroutine. A
	// record that fails with ErrClosed stays in the spool and is sent
	// again by the next New. HookRecordCompleted hooks do not see
	// replayed records. With ExactlyOnce it runs on the driver goroutine,
	// and also reports each record skipped because an earlier producer
	// committed it (nil error, Offset -1: its offset is not known).
	// Default nil: their outcomes are not reported.
	RecoveryHook func(seq uint64, md RecordMetadata, err error)

	// ExactlyOnce (samsa.spool.exactly.once.enable=true) commits the
	// spool's records in transactions, so that a read_committed consumer
	// sees each exactly once, across crashes too (without it a crash can
	// write a record twice: at least once). Default false. The producer
	// becomes transactional with an id derived from the spool
	// (SpoolTransactionalID: "samsa-spool-" + its ID), and one driver
	// goroutine commits every CommitInterval the records written since,
	// each transaction with a progress record (the next sequence) on
	// ProgressTopic. The next producer on the directory fences the old
	// one, reads the progress with read_committed and skips the records it
	// finds committed (counted in SpoolExactlyOnceMetrics'
	// DuplicatesSkipped; each
	// reported to RecoveryHook with a nil error and Offset -1), then sends
	// the rest in transactions before new records. The read goes past
	// everything committed before the fencing: while another producer's
	// transaction is open on the progress topic's partition (another
	// spool mid-commit, or a crashed one until its transaction timeout)
	// it waits, logging a Warn every 5 s, so New's records can wait that
	// long before they are sent.
	//
	// What changes for Send: a record's outcome comes once its
	// transaction committed (at least CommitInterval after Send, unless a
	// Flush or Close asks for the commit at once), or fails
	// for good (ErrRecordTooLarge, ErrInvalidRecord, an authorization
	// error: acknowledged, not sent again); it fails with ErrClosed (and
	// stays in the spool, for the next New) when Close gives up on it
	// (ErrOutcomeUnknown when that was while its transaction's commit was
	// asked: it may have committed; the next New skips it if so),
	// and with the driver's fatal error (ErrProducerFenced when another
	// producer opened a copy of the directory; ErrSpoolProgress when the
	// progress topic cannot be used or its progress is ahead of the spool;
	// ErrSpoolFailed when the spool's records cannot be read back, after
	// 5 attempts) once it met one, the records staying in the spool. Callbacks, Futures and SendTo channels complete on the
	// driver goroutine, in sequence order; Flush from there returns
	// ErrFlushInCallback. Send's ctx bounds only its wait for room in the
	// spool. Config.TransactionalID must be empty (New refuses it), and so
	// must AcksNone and DisableIdempotence; the transaction methods return
	// ErrNoTransaction.
	ExactlyOnce bool

	// ProgressTopic is the compacted topic the exactly-once mode writes its
	// progress records to (samsa.spool.progress.topic), keyed by the
	// spool's ID, so that many spools can share it. Default
	// "samsa-spool-progress" (DefaultSpoolProgressTopic). When missing it
	// is created (CreateTopics: 1 partition, the broker's replication
	// factor, cleanup.policy=compact) unless Config.DisableAutoTopicCreation;
	// otherwise, or when the creation fails, every record fails with
	// ErrSpoolProgress and stays in the spool. A topic that exists must be
	// compacted: one whose cleanup.policy lacks compact (checked at New
	// with DescribeConfigs) fails the same way, since retention would
	// delete the progress. Keep it at one partition: adding partitions
	// moves a spool's progress to another (New logs a Warn when there is
	// more than one). Used only with ExactlyOnce.
	ProgressTopic string

	// CommitInterval is how long the exactly-once driver gathers written
	// records before it commits them in one transaction
	// (samsa.spool.commit.interval.ms): a transaction, and a progress
	// record, per interval while records come. It adds up to that much
	// latency to every record; Flush and Close end the wait (what is
	// written commits at once). Default 100 ms (DefaultSpoolCommitInterval).
	// Used only with ExactlyOnce.
	CommitInterval time.Duration
}

// spoolDeliveryTimeout replaces DeliveryTimeout with a spool: a spooled
// record is retried until it is delivered or Close, never expired.
const spoolDeliveryTimeout = time.Duration(maxMillis) * time.Millisecond

// checkSpool validates Config.Spool (a copy of it) in withDefaults.
func (c *Config) checkSpool(fail func(field, format string, args ...any)) {
	if c.Spool == nil {
		return
	}
	sc := *c.Spool // the caller's struct is not kept
	c.Spool = &sc
	if sc.Dir == "" {
		fail("Spool.Dir", "is required")
	}
	switch sc.Mode {
	case "":
		c.Spool.Mode = SpoolWriteAhead
	case SpoolWriteAhead:
	case SpoolOverflow:
	default:
		fail("Spool.Mode", "%q is not %q or %q", string(sc.Mode), string(SpoolWriteAhead), string(SpoolOverflow))
	}
	if sc.Sync < spool.SyncInterval || sc.Sync > spool.SyncAlways {
		fail("Spool.Sync", "unknown policy %d", int(sc.Sync))
	}
	if sc.SyncInterval < 0 {
		fail("Spool.SyncInterval", "must not be negative, got %v", sc.SyncInterval)
	}
	if sc.SegmentBytes < 0 {
		fail("Spool.SegmentBytes", "must not be negative, got %d", sc.SegmentBytes)
	}
	if sc.MaxBytes < 0 {
		fail("Spool.MaxBytes", "must not be negative, got %d", sc.MaxBytes)
	}
	if c.TransactionalID != "" {
		if sc.ExactlyOnce {
			fail("TransactionalID", "must be empty with Spool.ExactlyOnce: the transactional id is derived from the spool's ID")
		} else {
			fail("Spool", "cannot be used with TransactionalID (set Spool.ExactlyOnce instead: its transactional id is derived from the spool)")
		}
	}
	if sc.CommitInterval < 0 {
		fail("Spool.CommitInterval", "must not be negative, got %v", sc.CommitInterval)
	}
	if sc.ExactlyOnce {
		if c.Spool.ProgressTopic == "" {
			c.Spool.ProgressTopic = DefaultSpoolProgressTopic
		}
		if c.Spool.CommitInterval == 0 {
			c.Spool.CommitInterval = DefaultSpoolCommitInterval
		}
		if c.DisableIdempotence {
			fail("DisableIdempotence", "Spool.ExactlyOnce needs idempotence: its transactions do")
		}
		if sc.Mode == SpoolOverflow {
			fail("Spool.Mode", "%q cannot be used with Spool.ExactlyOnce: every record goes through the spool and its transactions", string(SpoolOverflow))
		}
	}
	if c.Acks == AcksNone {
		// acks=0 completes a record once it is on the socket: it would
		// leave the spool before any broker has it.
		fail("Acks", "AcksNone (acks=0) cannot be used with Spool: a record would leave the spool when written to the socket")
	}
}

// openSpool opens Config.Spool's directory (nil without a spool);
// onUsage is spool.Options.OnUsage (spool_metrics.go).
func openSpool(sc *SpoolConfig, onUsage func(int64)) (*spool.Spool, error) {
	if sc == nil {
		return nil, nil
	}
	sp, err := spool.Open(spool.Options{
		Dir:          sc.Dir,
		Sync:         sc.Sync,
		SyncInterval: sc.SyncInterval,
		SegmentBytes: sc.SegmentBytes,
		MaxBytes:     sc.MaxBytes,
		OnUsage:      onUsage,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: Spool: %w", ErrInvalidConfig, err)
	}
	return sp, nil
}

// spoolErr is the error of a record that spool.Write refused.
func spoolErr(topic string, err error) error {
	switch {
	case errors.Is(err, spool.ErrFull):
		return fmt.Errorf("%w: topic %q: the spool is full: %w", ErrBufferExhausted, topic, err)
	case errors.Is(err, spool.ErrTooLarge):
		return fmt.Errorf("%w: topic %q: %w", ErrRecordTooLarge, topic, err)
	case errors.Is(err, spool.ErrFailed):
		return fmt.Errorf("%w: %w", ErrSpoolFailed, err)
	case errors.Is(err, spool.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("%w: %w", ErrSpoolFailed, err)
}

// endedCtx is an ended context: spool.Write with it fails at once
// (ErrFull) where it would wait for room, and costs nothing otherwise.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// spoolWrite is a Send's spool.Write: at once when the spool has room;
// otherwise, for a Send that may wait, again with a context bounded by
// MaxBlock (and ctx). TrySend, MaxBlock NoWait and a Send from the
// completion goroutine (which is what acks records, and so frees the
// spool) do not wait. The first try makes no timer and reads no
// goroutine id: both cost more than the write.
func (p *Producer) spoolWrite(ctx context.Context, rec *spool.Record, wait bool) (uint64, error) {
	seq, err := p.spool.Write(endedCtx, rec)
	if err == nil || !errors.Is(err, spool.ErrFull) || !wait || p.cfg.MaxBlock <= 0 {
		return seq, err
	}
	if id := goroutineID(); id == p.completer.goid.Load() || p.eos != nil && id == p.eos.goid.Load() {
		// The goroutine that acks records (the completion goroutine, or
		// the exactly-once driver, where callbacks run) must not wait
		// for itself.
		return seq, err
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	return p.spool.Write(wctx, rec)
}

// sendSpooled is send's end with a write-ahead spool: the record's
// partition is chosen, the record written to the spool, and then appended
// to memory with that partition (ExplicitPartition), carrying its
// samsa-spool header, if memory has room at once; otherwise it is spilled
// (spool_drain.go): its completion and sequence go to the drainer's queue,
// which appends it once memory frees, reading it back from the spool.
// While its topic is spilling (records of it in the queue, or New's
// backlog of it not yet in memory) a record is spilled without trying
// memory, so that none overtakes a spilled one. So Send waits only for
// the spool (at MaxBytes, up to MaxBlock), never for memory. A record the
// spool refuses fails at once; a record written to the spool that memory
// refuses for another reason (the header making it too large, Close) is
// acknowledged to the spool (it fails, and is not replayed), unless the
// spool closed or failed first: then it stays in the log and fails with
// ErrClosed or ErrSpoolFailed saying so.
func (p *Producer) sendSpooled(ctx context.Context, t *topicState, rec *Record, c completion, wait bool) {
	if err := checkRecordPartition(p.cfg.Partitioner, rec); err != nil {
		p.reject(&c, rec, err)
		return
	}
	overflow := p.cfg.Spool.Mode == SpoolOverflow
	if overflow && t.spilling.Load() == 0 && !p.reach.unreachable() && p.sendToMemory(ctx, t, rec, c) {
		return
	}
	part, parts, sticky, err := p.spoolPartition(t, rec)
	if err != nil {
		p.reject(&c, rec, err)
		return
	}
	if p.eos != nil {
		if err := p.eos.sendErr(); err != nil {
			p.reject(&c, rec, err)
			return
		}
	}
	sr := spool.Record{Topic: rec.Topic, Partition: part, Timestamp: time.UnixMilli(c.ts()), Key: rec.Key, Value: rec.Value}
	if len(rec.Headers) > 0 {
		sr.Headers = make([]spool.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			sr.Headers[i] = spool.Header{Key: h.Key, Value: h.Value}
		}
	}
	seq, err := p.spoolWrite(ctx, &sr, wait)
	if err != nil {
		err = spoolErr(rec.Topic, err)
		p.observeExhausted(rec.Topic, recordbatch.BodySize(rec.Key, rec.Value, rec.Headers), err)
		p.reject(&c, rec, err)
		return
	}
	if !sticky {
		parts = nil
	}
	if p.eos != nil {
		p.sendExactlyOnce(t, rec, part, parts, seq, &c)
		return
	}
	c.obs = p.spoolObs(c.obs, seq)
	if overflow || t.spilling.Load() > 0 {
		p.spillSticky(t, rec, part, parts)
		p.spill(ctx, t, rec, seq, c)
		return
	}
	err = p.appendSpooled(ctx, t, rec, part, parts, seq, &c, false)
	if err != nil && errors.Is(err, ErrBufferExhausted) && !errors.Is(err, ErrClosed) {
		p.spillSticky(t, rec, part, parts)
		p.spill(ctx, t, rec, seq, c) // no room at once
		return
	}
	if err != nil {
		p.observeExhausted(rec.Topic, recordbatch.BodySize(rec.Key, rec.Value, rec.Headers), err)
		c.obs.spool = nil // acknowledged here, not by the completion
		if !p.spool.Ack(seq) {
			// The spool closed first (Close ended while this Send was
			// between its spool write and its append, which failed with
			// ErrClosed), or failed (it writes no position again): the
			// record stays in the log, and the next New sends it again,
			// as for any record Close gave up on.
			// Persisted follows the log as for any written record (under
			// SyncAlways, only if an fsync covered it).
			p.markPersisted(&c, seq)
			if ferr := p.spool.Metrics().Failed; ferr != nil {
				err = fmt.Errorf("%w: the record stays in the failed spool, and the next New may send it again (%w; %w)", ErrSpoolFailed, err, ferr)
			} else if !errors.Is(err, ErrClosed) {
				err = fmt.Errorf("%w: the record stays in the spool for the next New (%w)", ErrClosed, err)
			}
		}
		// Else failed now, and said so: not sent again by a later New.
		p.reject(&c, rec, err)
		return
	}
	if p.spoolAppended != nil {
		p.spoolAppended()
	}
	p.markPersisted(&c, seq)
	if ctx != nil && ctx.Done() != nil {
		p.resweepIfEnded(ctx)
	}
	if p.drained.Load() {
		p.failLate()
	}
}

// sendToMemory is an overflow Send's first try: the record appended to
// memory as without a spool, if the pool has room at once. It reports
// false when it had none: the caller writes the record to the spool and
// spills it. Otherwise the record is in memory, or failed (for another
// reason than memory, as without a spool).
func (p *Producer) sendToMemory(ctx context.Context, t *topicState, rec *Record, c completion) bool {
	size := recordbatch.BodySize(rec.Key, rec.Value, rec.Headers)
	mc := c // the caller's c spills without the mark
	if mc.kind() == kindFuture {
		mc.rec = &persistedAtDelivery
	}
	err := p.append(ctx, t, rec, size, mc, false)
	if err != nil && errors.Is(err, ErrBufferExhausted) {
		return false
	}
	if err != nil {
		err = p.appendErr(err, false)
		p.observeExhausted(rec.Topic, size, err)
		p.reject(&c, rec, err)
		return true
	}
	if ctx != nil && ctx.Done() != nil {
		p.resweepIfEnded(ctx)
	}
	if p.drained.Load() {
		p.failLate()
	}
	return true
}

// overflowUnreachableAfter is how long the cluster must have been
// unreachable before overflow Sends go to disk: since a dial failed or a
// connection broke, no dial succeeded and no Produce request was
// answered for this long.
const overflowUnreachableAfter = time.Second

// reachability tracks whether the cluster is reachable, for overflow
// mode: the IO goroutine notes each dial's and each Produce request's
// result; Sends read it. Without overflow mode it is not used (nil).
type reachability struct {
	// downSince is when the current run of failures began (unix nanos),
	// 0 while the last dial or request succeeded.
	downSince atomic.Int64
}

func (r *reachability) failed() {
	if r != nil && r.downSince.Load() == 0 {
		r.downSince.Store(time.Now().UnixNano())
	}
}

func (r *reachability) ok() {
	if r != nil && r.downSince.Load() != 0 {
		r.downSince.Store(0)
	}
}

// unreachable reports whether the cluster has been unreachable for
// overflowUnreachableAfter.
func (r *reachability) unreachable() bool {
	if r == nil {
		return false
	}
	since := r.downSince.Load()
	return since != 0 && time.Now().UnixNano()-since >= int64(overflowUnreachableAfter)
}

// spillSticky tells the sticky partitioner of a record it chose the
// partition of (parts set) and that is spilled: the drainer appends it
// with that partition, which is not the partitioner's choice again, so
// without this the partitioner would never move on while its topic
// spills (every keyless record on one partition).
func (p *Producer) spillSticky(t *topicState, rec *Record, part int32, parts []*accPartition) {
	if parts == nil {
		return
	}
	size := recordbatch.BodySize(rec.Key, rec.Value, rec.Headers)
	t.sticky.appended(part, size, int32(len(parts)), func(i int32) int { return parts[i].Load() })
}

// spill puts a record written to the spool at seq in the drainer's queue,
// its topic counted spilling, and closes its Persisted as sendSpooled
// does. Once the drainer has stopped (Close) the record fails with
// ErrClosed and stays in the spool.
func (p *Producer) spill(ctx context.Context, t *topicState, rec *Record, seq uint64, c completion) {
	t.spilling.Add(1)
	s := spilled{seq: seq, t: t, c: c}
	if ctx != nil && ctx.Done() != nil {
		s.ctx = ctx
	}
	// Persisted before the queue takes the completion: the drainer may
	// complete it at once.
	p.markPersisted(&c, seq)
	if !p.drain.spill(s) {
		p.failSpilled(&s, fmt.Errorf("%w: the producer was closing; the record stays in the spool", ErrClosed))
	}
}

// appendSpooled appends a record written to the spool at seq (by Send, or
// found there by New's replay, spilled, or read back by the exactly-once
// driver) to memory, with partition part
// (-1: the partitioner decides once the topic's partitions are known),
// carrying its samsa-spool header; c's recordObs (spoolObs, set by the
// caller; not by the exactly-once driver, which acknowledges its records
// itself after the commit) acknowledges it at its outcome. parts is set when the sticky partitioner chose part:
// it is told of the append. wait false tries without waiting for memory.
// The error is the record's; the caller decides whether to acknowledge
// it, and observes it.
func (p *Producer) appendSpooled(ctx context.Context, t *topicState, rec *Record, part int32, parts []*accPartition, seq uint64, c *completion, wait bool) error {
	cp := *rec
	if part >= 0 {
		cp.Partition, cp.ExplicitPartition = part, true
	} else if _, manual := p.cfg.Partitioner.(manualPartitioner); !manual {
		cp.Partition, cp.ExplicitPartition = 0, false
	}
	if !p.cfg.Spool.DisableHeader {
		cp.Headers = append(slices.Clip(rec.Headers), Header{Key: spool.HeaderKey, Value: spool.EncodeHeader(p.spool.ID(), seq)})
	}
	size := recordbatch.BodySize(cp.Key, cp.Value, cp.Headers)
	if err := p.acc.CheckSize(size); err != nil {
		return fmt.Errorf("%w: topic %q (with its %s header): %w", ErrRecordTooLarge, rec.Topic, spool.HeaderKey, err)
	}
	if err := p.append(ctx, t, &cp, size, *c, wait); err != nil {
		return p.appendErr(err, wait)
	}
	if parts != nil {
		t.sticky.appended(part, size, int32(len(parts)), func(i int32) int { return parts[i].Load() })
	}
	return nil
}

// spoolPartition is the partition a Send's record is written to the spool
// with: the one append would choose, or -1 (or the record's own, with
// ExplicitPartition or ManualPartitioner) while the topic's partitions are
// not known.
func (p *Producer) spoolPartition(t *topicState, rec *Record) (part int32, parts []*accPartition, sticky bool, err error) {
	parts = t.acc.Partitions()
	if parts == nil {
		return parkedPartition(p.cfg.Partitioner, rec), nil, false, nil
	}
	parts = t.live(parts)
	n := int32(len(parts))
	part = UnknownPartition
	if rec.ExplicitPartition {
		part = rec.Partition
	} else if _, ok := p.cfg.Partitioner.(defaultPartitioner); ok {
		if rec.Key != nil {
			part = KeyPartition(rec.Key, n)
		}
	} else {
		r := *rec
		if part, err = callPartitioner(p.cfg.Partitioner, &r, n); err != nil {
			return 0, nil, false, err
		}
	}
	if part == UnknownPartition {
		sticky = true
		part = t.sticky.partition(n, func(i int32) int { return parts[i].Load() })
	}
	if part < 0 || part >= n {
		return 0, nil, false, checkPartition(rec.Topic, part, n)
	}
	return part, parts, sticky, nil
}

// spoolObs returns the record's recordObs with its spool sequence: the
// completion acknowledges it to the spool at its outcome.
//
// A record sent with a context that can end and no record hook points to
// its context group's shared recordObs (cancel.go): it gets one of its own
// with that group, since the sequence is the record's.
func (p *Producer) spoolObs(obs *recordObs, seq uint64) *recordObs {
	if obs == nil || obs.g != nil && obs == &obs.g.obs {
		own := &recordObs{}
		if obs != nil {
			own.g = obs.g
		}
		obs = own
	}
	obs.spool, obs.seq = p.spool, seq
	return obs
}

// spoolFinal reports whether a spooled record that completed with err is
// done with: delivered, or failed for good. A record that failed with
// ErrClosed (Close gave up on it), ErrOutcomeUnknown, ErrDeliveryTimeout
// (an epoch bump left it unresolved) or a retriable error stays in the
// spool, and the next New on the directory sends it again.
func spoolFinal(err error) bool {
	if err == nil {
		return true
	}
	return !errors.Is(err, ErrClosed) && !errors.Is(err, ErrOutcomeUnknown) &&
		!errors.Is(err, ErrDeliveryTimeout) && !IsRetriable(err)
}

// markPersisted queues a Send's Future.Persisted on the persister, which
// closes it once the record is in the file (SyncNone, SyncInterval) or
// fsynced (SyncAlways). Under SyncAlways a record of SendCallback or
// SendTo (no channel to close) still kicks the persister, so that it is
// fsynced as soon as a Future's would be; under the other policies the
// spool's writer writes it without being asked.
func (p *Producer) markPersisted(c *completion, seq uint64) {
	if c.kind() != kindFuture {
		if p.persister.always {
			p.persister.poke()
		}
		return
	}
	p.persister.add(seq, (*Future)(c.to).persisted)
}

// SyncSpool returns once every record whose Send, SendCallback or SendTo
// returned (without failing) before the call is in the spool's file, and
// fsynced unless Config.Spool.Sync is none: it is how SendCallback and
// SendTo users learn what Future.Persisted tells a Future's (under
// SyncInterval it also makes them survive a power loss). Errors:
// ErrInvalidConfig without Config.Spool, ErrClosed after Close,
// ErrSpoolFailed (wrapping spool.ErrFailed and the I/O error) once a
// write or an fsync has failed, ErrBufferExhausted wrapping spool.ErrFull
// and syscall.ENOSPC while the disk is full (the records wait in the
// spool's buffer: call it again).
func (p *Producer) SyncSpool() error {
	if p.spool == nil {
		return fmt.Errorf("%w: SyncSpool without Config.Spool", ErrInvalidConfig)
	}
	if _, err := p.spool.Sync(); err != nil {
		return spoolErr("", err)
	}
	return nil
}

// persister is the goroutine that closes Future.Persisted: it waits for
// the spool's writer to have the records in the file (spool.Flush) under
// SyncNone and SyncInterval, and fsyncs them under SyncAlways
// (spool.Sync, shared with the spool's own fsyncs: group commit), then
// closes the Persisted channels of the queued records below the bound it
// got. Send only queues (under mu) and kicks it: Send never waits for the
// disk. The queue holds one entry per record in memory with a Future, so
// BufferMemory bounds it. After a failed write or fsync it closes
// nothing again: those records are not persisted (their Futures still
// complete with their delivery). While the disk is full it closes what is
// in the file and tries again every 50 ms. Started by New, ended by
// Close before the spool closes.
type persister struct {
	sp      *spool.Spool
	always  bool // SyncAlways: fsync, not only the write
	mu      sync.Mutex
	waits   []persistWait
	failed  bool
	stopped bool // stop took the queue: add persists itself
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

type persistWait struct {
	seq uint64
	ch  chan struct{}
}

func newPersister(sp *spool.Spool, policy spool.SyncPolicy) *persister {
	return &persister{sp: sp, always: policy == spool.SyncAlways, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (ps *persister) add(seq uint64, ch chan struct{}) {
	ps.mu.Lock()
	if ps.failed {
		ps.mu.Unlock()
		return
	}
	if ps.stopped {
		// A Send that wrote its record before the spool closed and gets
		// here after stop (Close ran meanwhile): write (and fsync) here,
		// or find that spool.Close covered it. Only during Close.
		ps.mu.Unlock()
		// After spool.Close (which wrote and fsynced its buffer) the
		// bound comes with ErrClosed, and is still right.
		if bound, err := ps.persist(); (err == nil || errors.Is(err, spool.ErrClosed)) && seq < bound {
			close(ch)
		}
		return
	}
	ps.waits = append(ps.waits, persistWait{seq, ch})
	ps.mu.Unlock()
	ps.poke()
}

// poke kicks the persister without a channel to close: a record written
// by SendCallback or SendTo.
func (ps *persister) poke() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// persist is the bound below which records are persisted under the
// policy, once the spool has them there.
func (ps *persister) persist() (uint64, error) {
	if ps.always {
		return ps.sp.Sync()
	}
	return ps.sp.Flush()
}

func (ps *persister) run() {
	defer close(ps.done)
	var work, keep []persistWait
	for {
		select {
		case <-ps.quit:
			return
		case <-ps.kick:
		}
		bound, err := ps.persist()
		failed := err != nil && errors.Is(err, spool.ErrFailed)
		ps.mu.Lock()
		work, ps.waits = ps.waits, work[:0]
		if failed {
			ps.failed = true
		}
		ps.mu.Unlock()
		keep = keep[:0]
		for _, w := range work {
			switch {
			case failed:
				// Never persisted: the channel stays open.
			case w.seq < bound:
				close(w.ch)
			default:
				keep = append(keep, w) // written after the wait began, or the disk is full
			}
		}
		clear(work)
		if len(keep) > 0 {
			ps.mu.Lock()
			ps.waits = append(ps.waits, keep...)
			ps.mu.Unlock()
			if err != nil {
				// A full disk (or Close coming): try again a little later.
				select {
				case <-ps.quit:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			ps.poke()
		}
	}
}

// stop ends the goroutine, then writes (and fsyncs, under SyncAlways) once
// more and closes the channels that this covers: what was queued since
// the last kick is persisted by spool.Close anyway, and its Futures say
// so. A record added after stop (its Send raced Close) is persisted by
// add itself.
func (ps *persister) stop() {
	close(ps.quit)
	<-ps.done
	ps.mu.Lock()
	work, failed := ps.waits, ps.failed
	ps.waits, ps.stopped = nil, true
	ps.mu.Unlock()
	if failed || len(work) == 0 {
		return
	}
	bound, err := ps.persist()
	if err != nil && errors.Is(err, spool.ErrFailed) {
		return
	}
	for _, w := range work {
		if w.seq < bound {
			close(w.ch)
		}
	}
}

// entryRecord is the Record of an entry read back from the spool (by
// New's replay, the exactly-once driver, or a drainer of spilled records),
// and its timestamp in milliseconds (the entry's, or now for a record
// written without one). appendSpooled then appends it to the partition it
// was written with, with its samsa-spool header.
func (p *Producer) entryRecord(e spool.Entry) (*Record, int64) {
	rec := &Record{Topic: e.Topic, Key: e.Key, Value: e.Value, Timestamp: e.Timestamp}
	if len(e.Headers) > 0 {
		rec.Headers = make([]Header, len(e.Headers))
		for i, h := range e.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	if rec.Timestamp.IsZero() {
		return rec, p.clock.nowMillis()
	}
	return rec, clampedMillis(rec.Timestamp)
}
