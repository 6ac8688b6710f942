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
	// SpoolOverflow (records go to disk only when memory is full or the
	// cluster unreachable) is not built yet: New refuses it.
	SpoolOverflow SpoolMode = "overflow"
)

// SpoolConfig is Config.Spool: a durable, bounded log on disk (package
// spool) that every record goes through, so that what Send accepted
// survives a crash, a restart and an outage of any length. The zero value
// of a field means its default. README's "Durable spool" says what is
// promised and what it costs.
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

	// Mode is SpoolWriteAhead (samsa.spool.mode=write-ahead), the default.
	// SpoolOverflow is refused by New (not built yet).
	Mode SpoolMode

	// Sync is when the log is fsynced (samsa.spool.sync: none, interval,
	// always): spool.SyncInterval by default. Under SyncNone and
	// SyncInterval a record is persisted when Send returns (it survives
	// a crash of the process; SyncInterval loses at most SyncInterval of
	// records to a power loss); under SyncAlways once an fsync covers it
	// (the persister goroutine fsyncs for every record written since its
	// last fsync, whether sent by Send, SendCallback or SendTo: group
	// commit; Send never waits for it; the spool also fsyncs every
	// SyncInterval as a backstop).
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
	// ErrBufferExhausted wrapping spool.ErrFull. Default 1 GiB.
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
	// partition the topic no longer has) on the replay goroutine. A
	// record that fails with ErrClosed stays in the spool and is sent
	// again by the next New. HookRecordCompleted hooks do not see
	// replayed records. Default nil: their outcomes are not reported.
	RecoveryHook func(seq uint64, md RecordMetadata, err error)
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
		fail("Spool.Mode", "%q is not built yet (only %q)", string(sc.Mode), string(SpoolWriteAhead))
	default:
		fail("Spool.Mode", "%q is not %q", string(sc.Mode), string(SpoolWriteAhead))
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
		fail("Spool", "cannot be used with TransactionalID (exactly once across crashes is not built yet)")
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
	if err == nil || !errors.Is(err, spool.ErrFull) || !wait || p.cfg.MaxBlock <= 0 || goroutineID() == p.completer.goid.Load() {
		return seq, err
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	return p.spool.Write(wctx, rec)
}

// sendSpooled is send's end with a write-ahead spool: the record's
// partition is chosen, the record written to the spool, and then appended
// to memory with that partition (ExplicitPartition), carrying its
// samsa-spool header. A record the spool refuses fails at once and is not
// appended; a record appended to the spool that memory refuses is
// acknowledged to the spool (it fails, and is not replayed), unless the
// spool closed or failed first: then it stays in the log and fails with
// ErrClosed or ErrSpoolFailed saying so.
func (p *Producer) sendSpooled(ctx context.Context, t *topicState, rec *Record, c completion, wait bool) {
	if err := checkRecordPartition(p.cfg.Partitioner, rec); err != nil {
		p.reject(&c, rec, err)
		return
	}
	if rs := p.replay; rs != nil {
		if ch := rs.topics[rec.Topic]; ch != nil {
			if err := p.awaitReplay(ctx, ch, rec.Topic, wait); err != nil {
				p.reject(&c, rec, err)
				return
			}
		}
	}
	part, parts, sticky, err := p.spoolPartition(t, rec)
	if err != nil {
		p.reject(&c, rec, err)
		return
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
	if err := p.appendSpooled(ctx, t, rec, part, parts, seq, &c, wait); err != nil {
		c.obs.spool = nil // acknowledged here, not by the completion
		if !p.spool.Ack(seq) {
			// The spool closed first (Close's ctx ended while this Send
			// waited for memory), or failed (it writes no position
			// again): the record stays in the log, and the next New
			// sends it again, as for any record Close gave up on.
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

// appendSpooled appends a record written to the spool at seq (by Send, or
// found there by New's replay) to memory, with partition part (-1: the
// partitioner decides once the topic's partitions are known), carrying
// its samsa-spool header; c gets the recordObs through which its
// completion acknowledges it. parts is set when the sticky partitioner
// chose part: it is told of the append. The error is the record's; the
// caller decides whether to acknowledge it.
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
	c.obs = p.spoolObs(c.obs, seq)
	size := recordbatch.BodySize(cp.Key, cp.Value, cp.Headers)
	if err := p.acc.CheckSize(size); err != nil {
		return fmt.Errorf("%w: topic %q (with its %s header): %w", ErrRecordTooLarge, rec.Topic, spool.HeaderKey, err)
	}
	if err := p.append(ctx, t, &cp, size, *c, wait); err != nil {
		err = p.appendErr(err, wait)
		p.observeExhausted(rec.Topic, size, err)
		return err
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

// markPersisted closes a Send's Future.Persisted: at once under SyncNone
// and SyncInterval (the record is in the log), through the persister
// under SyncAlways. Under SyncAlways a record of SendCallback or SendTo
// (no channel to close) still kicks the persister, so that it is fsynced
// as soon as a Future's would be.
func (p *Producer) markPersisted(c *completion, seq uint64) {
	if c.kind() != kindFuture {
		if p.persister != nil {
			p.persister.poke()
		}
		return
	}
	ch := (*Future)(c.to).persisted
	if p.persister == nil {
		close(ch)
		return
	}
	p.persister.add(seq, ch)
}

// SyncSpool returns once every record whose Send, SendCallback or SendTo
// returned (without failing) before the call is persisted, and fsynced
// unless Config.Spool.Sync is none: it is how SendCallback and SendTo
// users learn what Future.Persisted tells a Future's. Under SyncNone and
// SyncInterval such records are already persisted when their Send
// returns; SyncSpool then also makes them survive a power loss (but for
// SyncNone). Errors: ErrInvalidConfig without Config.Spool, ErrClosed
// after Close, ErrSpoolFailed (wrapping spool.ErrFailed and the I/O
// error) once an fsync has failed.
func (p *Producer) SyncSpool() error {
	if p.spool == nil {
		return fmt.Errorf("%w: SyncSpool without Config.Spool", ErrInvalidConfig)
	}
	if _, err := p.spool.Sync(); err != nil {
		return spoolErr("", err)
	}
	return nil
}

// persister is the goroutine that, under SyncAlways, fsyncs the spool
// (spool.Sync, shared with the spool's own fsyncs: group commit) and
// closes the Persisted channels of the Futures it covered. Send only
// queues (under mu) and kicks it: Send never waits for an fsync. The
// queue holds one entry per record in memory with a Future, so
// BufferMemory bounds it. After a failed fsync it closes nothing again:
// those records are not persisted (their Futures still complete with
// their delivery). Started by New, ended by Close before the spool
// closes.
type persister struct {
	sp      *spool.Spool
	mu      sync.Mutex
	waits   []persistWait
	failed  bool
	stopped bool // stop took the queue: add fsyncs itself
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

type persistWait struct {
	seq uint64
	ch  chan struct{}
}

func newPersister(sp *spool.Spool) *persister {
	return &persister{sp: sp, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (ps *persister) add(seq uint64, ch chan struct{}) {
	ps.mu.Lock()
	if ps.failed {
		ps.mu.Unlock()
		return
	}
	if ps.stopped {
		// A Send that wrote its record before the spool closed and gets
		// here after stop (Close ran meanwhile): fsync here, or find
		// that spool.Close's fsync covered it (Sync then returns its
		// bound). Only during Close.
		ps.mu.Unlock()
		if bound, err := ps.sp.Sync(); err == nil && seq < bound {
			close(ch)
		}
		return
	}
	ps.waits = append(ps.waits, persistWait{seq, ch})
	ps.mu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// poke kicks the persister without a channel to close: a record written
// by SendCallback or SendTo.
func (ps *persister) poke() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
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
		bound, err := ps.sp.Sync()
		ps.mu.Lock()
		work, ps.waits = ps.waits, work[:0]
		if err != nil {
			ps.failed = true
		}
		ps.mu.Unlock()
		keep = keep[:0]
		for _, w := range work {
			switch {
			case err != nil:
				// Never persisted: the channel stays open.
			case w.seq < bound:
				close(w.ch)
			default:
				keep = append(keep, w) // written after the fsync began
			}
		}
		clear(work)
		if len(keep) > 0 {
			ps.mu.Lock()
			ps.waits = append(ps.waits, keep...)
			ps.mu.Unlock()
			select {
			case ps.kick <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the goroutine, then fsyncs once more and closes the channels
// that fsync covers: what was queued since the last kick is persisted by
// spool.Close's own fsync anyway, and its Futures say so. A record added
// after stop (its Send raced Close) is fsynced by add itself.
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
	bound, err := ps.sp.Sync()
	if err != nil {
		return
	}
	for _, w := range work {
		if w.seq < bound {
			close(w.ch)
		}
	}
}

// replayState is New's replay of the records that a previous producer on
// the directory left unacknowledged (spool.Recovery().Backlog). The
// replay goroutine (runReplay, started by New when the backlog is not
// empty, ended by Close, which waits for it before it closes the spool;
// a Close or Flush from RecoveryHook on it does not wait: ownGoroutine) appends them to memory in sequence order, each
// to the partition it was written with (-1: through the partitioner);
// Sends to a topic of the backlog wait until its last backlog record is
// in memory (awaitReplay), so that none overtakes a replayed one.
type replayState struct {
	// topics has a channel per backlog topic, closed once the topic's
	// backlog is in memory (or the replay ended). The map is read-only
	// after New.
	topics map[string]chan struct{}
	last   map[string]uint64 // the topic's last backlog sequence (replay goroutine only)
	exited chan struct{}     // closed when runReplay returns; Close waits for it
	goid   atomic.Uint64     // the replay goroutine's id (ownGoroutine)
}

// startReplay starts the replay goroutine if the spool has a backlog.
func (p *Producer) startReplay() {
	backlog := p.spool.Recovery().Backlog
	if len(backlog) == 0 {
		return
	}
	rs := &replayState{topics: map[string]chan struct{}{}, last: map[string]uint64{}, exited: make(chan struct{})}
	for _, b := range backlog {
		if rs.topics[b.Topic] == nil {
			rs.topics[b.Topic] = make(chan struct{})
		}
		rs.last[b.Topic] = max(rs.last[b.Topic], b.LastSeq)
	}
	p.replay = rs
	go p.runReplay(rs)
}

func (p *Producer) runReplay(rs *replayState) {
	defer close(rs.exited)
	rs.goid.Store(goroutineID())
	done := map[string]bool{}
	defer func() {
		for topic, ch := range rs.topics {
			if !done[topic] {
				close(ch)
			}
		}
	}()
	for e, err := range p.spool.Unacked() {
		if err != nil {
			p.log.Error("producer: reading the spool's backlog failed; the records not sent again yet will be at the next New", "err", err)
			return
		}
		if !p.replayOne(e) {
			return
		}
		if e.Seq >= rs.last[e.Topic] && !done[e.Topic] {
			done[e.Topic] = true
			close(rs.topics[e.Topic])
		}
	}
}

func noopCallback(RecordMetadata, error) {}

// replayOne appends one backlog record, waiting for memory as long as it
// takes (until Close). It returns false once the producer is closing: the
// records left stay in the spool, for the next New.
func (p *Producer) replayOne(e spool.Entry) bool {
	fn := noopCallback
	if hook := p.cfg.Spool.RecoveryHook; hook != nil {
		seq := e.Seq
		fn = func(md RecordMetadata, err error) { hook(seq, md, err) }
	}
	c := callbackCompletion(fn)
	rec := &Record{Topic: e.Topic, Key: e.Key, Value: e.Value, Timestamp: e.Timestamp}
	if len(e.Headers) > 0 {
		rec.Headers = make([]Header, len(e.Headers))
		for i, h := range e.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	if rec.Timestamp.IsZero() {
		c.setTS(p.clock.nowMillis())
	} else {
		c.setTS(clampedMillis(rec.Timestamp))
	}
	// Counted as send counts a record, so that Flush and Close wait for it.
	c.setEpoch(uint8(p.epoch.Load() & 1))
	p.pending[c.epoch()].Add(1)
	if p.closed.Load() {
		c.obs = p.spoolObs(nil, e.Seq) // not acknowledged: ErrClosed
		p.refuse(&c, rec, ErrClosed)
		return false
	}
	t, err := p.topic(e.Topic)
	if err != nil {
		p.spool.Ack(e.Seq) // a name no producer would have written: never sendable
		p.refuse(&c, rec, err)
		return true
	}
	for {
		err = p.appendSpooled(p.closing, t, rec, e.Partition, nil, e.Seq, &c, true)
		if err == nil || !errors.Is(err, ErrBufferExhausted) || p.closed.Load() {
			break
		}
		// Memory stays full (the cluster is away): wait and try again,
		// not faster than every 100 ms (MaxBlock may be NoWait).
		select {
		case <-p.closing.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil && errors.Is(err, ErrBufferExhausted) && p.closed.Load() {
		// Close ended the wait for memory: RecoveryHook is told so.
		err = fmt.Errorf("%w: the replay was waiting for memory (%v)", ErrClosed, err)
	}
	if err != nil {
		// The completion acknowledges it unless the producer is closing
		// (spoolFinal): the record stays for the next New.
		p.refuse(&c, rec, err)
		return !errors.Is(err, ErrClosed) && !p.closed.Load()
	}
	if p.drained.Load() {
		p.failLate()
	}
	return true
}

// awaitReplay waits until the replay has put topic's backlog in memory
// (ch closed), so that a new record never overtakes a replayed one: up to
// MaxBlock (or ctx), as for memory; at once for a Send that must not
// wait. Its error wraps ErrBufferExhausted, ErrClosed, or (ctxEndedErr,
// as Send's other waits) ctx's error.
func (p *Producer) awaitReplay(ctx context.Context, ch chan struct{}, topic string, wait bool) error {
	select {
	case <-ch:
		return nil
	default:
	}
	if !wait || p.cfg.MaxBlock <= 0 || goroutineID() == p.completer.goid.Load() {
		return fmt.Errorf("%w: topic %q: the spool's backlog of the topic is still being sent again, and new records wait behind it", ErrBufferExhausted, topic)
	}
	start := time.Now()
	timer := time.NewTimer(p.cfg.MaxBlock)
	defer timer.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctxEndedErr(ctx.Err())
	case <-p.closing.Done():
		return fmt.Errorf("%w: while waiting for the spool's backlog of topic %q", ErrClosed, topic)
	case <-timer.C:
		return fmt.Errorf("%w: topic %q: the spool's backlog of the topic was still being sent again after %v (MaxBlock %v); new records wait behind it",
			ErrBufferExhausted, topic, time.Since(start).Truncate(time.Millisecond), p.cfg.MaxBlock)
	}
}
