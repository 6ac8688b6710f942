// The spool's exactly-once mode (issue 34, SpoolConfig.ExactlyOnce): Send
// writes a record to the spool and queues its completion; one driver
// goroutine commits the written records in transactions, each with a
// progress record on a compacted topic, as Kafka Connect's exactly-once
// sources (KIP-618) commit their offsets. After a crash the next producer
// on the directory fences the old one (InitProducerId with the same
// transactional id), reads the committed progress with read_committed, and
// skips what was committed. The progress topic's reads are in
// spool_progress.go.

package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/kerr"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/spool"
)

// ErrSpoolProgress fails the records of an exactly-once spool
// (SpoolConfig.ExactlyOnce) whose progress topic cannot be used: it is
// missing and may not (Config.DisableAutoTopicCreation) or cannot be
// created, it is not compacted (its cleanup.policy lacks compact), the
// producer may not read or write it, it holds a progress
// record this producer cannot read, or its progress is ahead of the spool
// (a value above every sequence the spool has given out: a directory
// restored from a backup or snapshot older than its progress; the error
// names both; move the directory away to start a new spool). It surfaces through every record's
// outcome once the driver met it (and at once for later Sends); the
// records stay in the spool, for a producer that can use the topic.
var ErrSpoolProgress = errors.New("producer: the exactly-once spool's progress topic cannot be used")

// Defaults of the exactly-once spool.
const (
	// DefaultSpoolProgressTopic is SpoolConfig.ProgressTopic's default.
	DefaultSpoolProgressTopic = "samsa-spool-progress"
	// DefaultSpoolCommitInterval is SpoolConfig.CommitInterval's default.
	DefaultSpoolCommitInterval = 100 * time.Millisecond
	// spoolTxnPrefix + the spool's ID is the derived transactional id.
	spoolTxnPrefix = "samsa-spool-"
	// eosMaxRecords bounds the records of one transaction; its bytes
	// are bounded too (eosDriver.rangeBytes).
	eosMaxRecords = 8192
)

// eosTestHook, set only by tests (before New), is called by the driver
// at "taken" (Sends' records taken from the queue, before their
// transaction), "appended" (a transaction's records and progress record appended,
// before the commit) and "committed" (after the commit, before the acks
// to the spool): a child process kills itself there.
var eosTestHook func(stage string)

// SpoolExactlyOnceMetrics are the exactly-once spool's counters
// (Producer.SpoolExactlyOnceMetrics).
type SpoolExactlyOnceMetrics struct {
	// DuplicatesSkipped counts the backlog records that New found
	// unacknowledged in the spool but already committed (with their
	// progress record) by the producer before it: they are not sent
	// again.
	DuplicatesSkipped int64
	// Transactions counts the transactions committed, and Aborted those
	// aborted (their records sent again in the next one).
	Transactions, Aborted int64
}

// SpoolExactlyOnceMetrics returns the exactly-once spool's counters; the
// zero value without Config.Spool.ExactlyOnce.
func (p *Producer) SpoolExactlyOnceMetrics() SpoolExactlyOnceMetrics {
	if p.eos == nil {
		return SpoolExactlyOnceMetrics{}
	}
	return SpoolExactlyOnceMetrics{
		DuplicatesSkipped: p.eos.skipped.Load(),
		Transactions:      p.eos.committed.Load(),
		Aborted:           p.eos.aborted.Load(),
	}
}

// SpoolTransactionalID is the transactional id an exactly-once spool
// with id uses: "samsa-spool-" and the ID in hexadecimal.
func SpoolTransactionalID(id spool.ID) string { return spoolTxnPrefix + id.String() }

// eosDriver is the exactly-once mode's state. Send (add) and the driver
// goroutine (run) share queue, stopping, stopped and fatal under mu; the
// rest is the driver goroutine's, but for the round's counter (the
// completion goroutine counts the round's records down) and the counters
// read by Metrics.
type eosDriver struct {
	p        *Producer
	topic    string // the progress topic
	key      []byte // the progress records' key: the spool's ID
	interval time.Duration
	start    uint64 // Written at New: the backlog is below it
	// appendBudget bounds the time a transaction appends records (a
	// quarter of TransactionTimeout; atomic for tests): past it the range
	// commits what it appended, and the rest goes to the next one.
	appendBudget atomic.Int64
	progress     int32 // the key's partition of the progress topic (found by begin; driver only)

	mu       sync.Mutex
	queue    map[uint64]eosItem // Sends' records by sequence, not yet committed
	stopping bool               // Close: commit what is queued, then exit
	stopped  bool               // the driver exited: add refuses
	sending  bool               // a range with Sends' records is being committed
	fatal    error              // the driver's fatal error: add refuses with it

	kick   chan struct{}
	ctx    context.Context // ended when Close gives up waiting
	cancel context.CancelFunc
	exited chan struct{}
	goid   atomic.Uint64

	// round counts the current transaction's records not completed yet;
	// roundDone is closed when it reaches 0.
	roundMu   sync.Mutex
	round     int
	roundDone chan struct{}

	skipped   atomic.Int64 // backlog records committed by an earlier producer
	committed atomic.Int64 // transactions committed
	aborted   atomic.Int64 // transactions aborted (and sent again)
}

// eosItem is one record of a transaction: a Send's (user, with its
// completion) or a backlog record (RecoveryHook tells its outcome).
type eosItem struct {
	seq   uint64
	size  int // the record's body size: a range's bytes are bounded
	c     completion
	user  bool
	topic string // a Send's: for its metadata if it fails
	part  int32
}

// eosOutcome is what the completion goroutine learned of a record of the
// round; read by the driver only once roundDone is closed.
type eosOutcome struct {
	md  RecordMetadata
	err error
}

func newEOSDriver(p *Producer, sp *spool.Spool) *eosDriver {
	sc := p.cfg.Spool
	ctx, cancel := context.WithCancel(context.Background())
	d := &eosDriver{
		p: p, topic: sc.ProgressTopic, key: progressKey(sp.ID()), interval: sc.CommitInterval,
		start: sp.Written(), queue: map[uint64]eosItem{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, exited: make(chan struct{}),
		roundDone: closedChan,
	}
	d.appendBudget.Store(int64(p.cfg.TransactionTimeout / 4))
	return d
}

// sendErr is the error of a Send once the driver failed for good.
func (d *eosDriver) sendErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fatal
}

// add queues a Send's record written at seq; its completion completes
// once a transaction with it committed (or the driver failed).
func (d *eosDriver) add(seq uint64, size int, c completion, topic string, part int32) error {
	d.mu.Lock()
	switch {
	case d.fatal != nil:
		err := d.fatal
		d.mu.Unlock()
		return err
	case d.stopped:
		d.mu.Unlock()
		return fmt.Errorf("%w: the spool's exactly-once driver has stopped", ErrClosed)
	}
	d.queue[seq] = eosItem{seq: seq, size: size, c: c, user: true, topic: topic, part: part}
	d.mu.Unlock()
	d.poke()
	return nil
}

func (d *eosDriver) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// stop is Close's: the driver commits the Sends' records queued, bounded
// by ctx, then exits; once they are committed (or ctx has ended) it is
// told to give up what is left (the backlog of New is not waited for, as
// write-ahead's replay is not: what it has not committed fails with
// ErrClosed, or ErrOutcomeUnknown while its commit was asked, and stays in
// the spool), and stop waits for it only while it
// is not blocked by user code (a callback or RecoveryHook on it):
// stuckAfter.
func (d *eosDriver) stop(ctx context.Context) {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.poke()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-d.exited:
			return
		case <-ctx.Done():
			break wait
		case <-tick.C:
			d.mu.Lock()
			idle := len(d.queue) == 0 && !d.sending
			d.mu.Unlock()
			if idle {
				break wait
			}
		}
	}
	d.cancel()
	select {
	case <-d.exited:
	case <-time.After(stuckAfter):
	}
}

// roundStart begins counting a transaction's n records.
func (d *eosDriver) roundStart(n int) {
	d.roundMu.Lock()
	d.round = n
	d.roundDone = make(chan struct{})
	d.roundMu.Unlock()
}

// roundOne counts one record of the round completed.
func (d *eosDriver) roundOne() {
	d.roundMu.Lock()
	d.round--
	if d.round == 0 {
		close(d.roundDone)
	}
	d.roundMu.Unlock()
}

// txnRecordsDone is what a transaction's end waits for: the driver's
// round (records sent by Send are not the transaction's until the driver
// appends them).
func (d *eosDriver) txnRecordsDone() <-chan struct{} {
	d.roundMu.Lock()
	defer d.roundMu.Unlock()
	return d.roundDone
}

// run is the driver goroutine: started by New, ended by Close (stop).
func (d *eosDriver) run() {
	defer close(d.exited)
	d.goid.Store(goroutineID())
	p := d.p
	var backlog []eosItem
	committed, err := d.begin()
	if err == nil && committed > d.start {
		// The progress says records were committed that this spool
		// has not written: the directory is older than its progress (a
		// restored backup or snapshot, a copy) or the value is not
		// ours. Sends at [start, committed) would be skipped as
		// committed after a crash: refused.
		err = fmt.Errorf("%w: the progress topic %q says sequences below %d were committed, but the spool has written only up to %d (a directory restored from a backup or snapshot, or copied, after its progress was committed?): move the directory away to start a new spool", ErrSpoolProgress, d.topic, committed, d.start)
	}
	if err == nil {
		backlog, err = d.readBacklog(committed)
	}
	if err == nil {
		if n := d.skipped.Load(); n > 0 {
			p.log.Info("spool: skipped records an earlier producer committed in exactly-once mode", "records", n, "committed_through", committed)
		}
		err = d.loop(backlog)
	}
	d.exit(err)
}

// errReadBack marks a transaction that failed reading a record back
// from the spool.
var errReadBack = errors.New("reading a record back from the spool")

// eosReadAttempts bounds the reads of the spool the driver tries before
// it fails for good (ErrSpoolFailed): the backlog at New, and a
// transaction's records read back.
const eosReadAttempts = 5

// readBacklog reads the backlog's sequences (below start): those below
// committed were committed by an earlier producer and are acknowledged
// (DuplicatesSkipped, RecoveryHook). A read error reads again after a
// backoff (what was acknowledged is not read again); after
// eosReadAttempts failed reads it returns the error wrapping
// ErrSpoolFailed: the driver fails for good, before any commit, for no
// commit's progress may pass a backlog record not read.
func (d *eosDriver) readBacklog(committed uint64) ([]eosItem, error) {
	p := d.p
	for attempt := 1; ; attempt++ {
		var backlog []eosItem
		var rerr error
		for e, err := range p.spool.Unacked() {
			if err != nil {
				rerr = err
				break
			}
			if e.Seq >= d.start {
				break
			}
			if e.Seq < committed {
				// Committed by an earlier producer, which crashed
				// before it acknowledged them to the spool.
				p.spool.Ack(e.Seq)
				d.skipped.Add(1)
				if hook := p.cfg.Spool.RecoveryHook; hook != nil {
					hook(e.Seq, RecordMetadata{Topic: e.Topic, Partition: e.Partition, Offset: -1, Timestamp: e.Timestamp}, nil)
				}
				continue
			}
			backlog = append(backlog, eosItem{seq: e.Seq, size: entrySize(e)})
		}
		if rerr == nil {
			return backlog, nil
		}
		if attempt >= eosReadAttempts {
			return nil, fmt.Errorf("%w: reading the spool's backlog failed %d times (nothing is committed before it is read): %w", ErrSpoolFailed, attempt, rerr)
		}
		p.log.Warn("spool: reading the exactly-once backlog failed; reading it again", "attempt", attempt, "err", rerr)
		if err := sleepCtx(d.ctx, p.txnSink.backoff(attempt)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrClosed, err)
		}
	}
}

// begin gets the transactional producer id (InitProducerId with the
// derived transactional id: a predecessor is fenced and its open
// transaction aborted), makes sure the progress topic exists, and reads
// the spool's committed progress: the sequence below which every record
// was committed. It retries what may pass until Close.
func (d *eosDriver) begin() (uint64, error) {
	p, t := d.p, d.p.txn
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(d.ctx, p.txnSink.backoff(attempt)); err != nil {
				return 0, fmt.Errorf("%w: %w", ErrClosed, err)
			}
		}
		if d.ctx.Err() != nil || d.isStopping() && d.idle() {
			return 0, fmt.Errorf("%w: before the exactly-once spool had its producer id", ErrClosed)
		}
		if err := d.open(); err != nil {
			return 0, err
		}
		info, err := p.txnSink.txnQuery(d.ctx, true, false)
		if err == nil && info.err != nil {
			return 0, info.err
		}
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return 0, err
			}
			continue
		}
		if st := t.load(); st == txnFatal {
			return 0, t.lastErr()
		}
		pp, err := p.ensureProgressTopic(d.ctx, d.topic, d.key)
		if err == nil {
			err = p.checkProgressTopic(d.ctx, d.topic, pp)
		}
		if err == nil {
			var next uint64
			var ok bool
			next, ok, err = p.readProgress(d.ctx, d.topic, pp, d.key)
			if err == nil {
				if !ok {
					next = 0
				}
				d.progress = pp.partition
				return next, nil
			}
		}
		var perm *errProgressPermanent
		if errors.As(err, &perm) {
			return 0, fmt.Errorf("%w: %w", ErrSpoolProgress, err)
		}
		p.log.Log(context.Background(), p.logRepeat.Level("spool progress", time.Now()),
			"spool: reading the exactly-once progress failed; retrying", "topic", d.topic, "err", err)
	}
}

// open opens a transaction unless one is: the first also asks the IO
// goroutine for the producer id.
func (d *eosDriver) open() error {
	t := d.p.txn
	switch t.load() {
	case txnInTxn:
		return nil
	case txnFatal:
		return t.lastErr()
	}
	first := t.load() == txnUninit
	if err := t.transition("the spool's exactly-once driver", txnInTxn, txnUninit, txnReady); err != nil {
		return err
	}
	if first {
		d.p.acc.Kick()
	}
	return nil
}

func (d *eosDriver) isStopping() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopping
}

func (d *eosDriver) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue) == 0
}

// loop commits the backlog, then the Sends' records in sequence order,
// each transaction at most CommitInterval after the record that opened
// it. It returns nil once Close asked it to stop and nothing is queued,
// or the error that ends it.
func (d *eosDriver) loop(backlog []eosItem) error {
	next := d.start // the next Send sequence to commit
	maxBytes := d.rangeBytes()
	var last time.Time
	for {
		var items []eosItem
		bytes := 0
		for len(backlog) > 0 && len(items) < eosMaxRecords && (len(items) == 0 || bytes+backlog[0].size <= maxBytes) {
			bytes += backlog[0].size
			items = append(items, backlog[0])
			backlog = backlog[1:]
		}
		if len(items) == 0 {
			// Batch: wait until CommitInterval after the last
			// transaction began, unless Close is waiting.
			if err := d.waitInterval(last); err != nil {
				return err
			}
			d.mu.Lock()
			for len(items) < eosMaxRecords {
				it, ok := d.queue[next]
				if !ok || len(items) > 0 && bytes+it.size > maxBytes {
					break
				}
				bytes += it.size
				delete(d.queue, next)
				items = append(items, it)
				next++
			}
			// Under mu with the taking: stop never sees the queue
			// empty and nothing sending while these are on their way.
			d.sending = len(items) > 0
			stopping := d.stopping
			d.mu.Unlock()
			if eosTestHook != nil && len(items) > 0 {
				eosTestHook("taken")
			}
			if len(items) == 0 {
				if stopping {
					// Records Send wrote but has not queued yet are
					// refused by add once stopped is set, and stay in
					// the spool.
					return nil
				}
				select {
				case <-d.kick:
				case <-d.ctx.Done():
					return fmt.Errorf("%w: %w", ErrClosed, d.ctx.Err())
				}
				continue
			}
		}
		last = time.Now()
		if err := d.commitRange(items); err != nil {
			return err
		}
	}
}

// rangeBytes bounds the record bytes of one transaction: half of
// Config.BufferMemory, so that a range's appends do not wait for memory
// its own records hold, and a transaction of large records ends well
// before TransactionTimeout (past it the coordinator aborts it). A
// record larger than that is a range of its own.
func (d *eosDriver) rangeBytes() int {
	return int(max(d.p.cfg.BufferMemory/2, 1))
}

// entrySize is a spool entry's record body size (a range's bytes).
func entrySize(e spool.Entry) int {
	n := len(e.Key) + len(e.Value) + 16
	for _, h := range e.Headers {
		n += len(h.Key) + len(h.Value) + 4
	}
	return n
}

// waitInterval waits until CommitInterval after last (when the last
// transaction began), unless Close or a Flush is waiting: stop's poke and
// Flush's end the wait.
func (d *eosDriver) waitInterval(last time.Time) error {
	for {
		wait := d.interval - time.Since(last)
		if wait <= 0 || d.isStopping() || d.p.flushing.Load() > 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-d.kick:
			// A Send's poke (its record is queued: taken after the
			// wait), stop's or Flush's: checked above.
		case <-d.ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ErrClosed, d.ctx.Err())
		}
		t.Stop()
	}
}

// commitRange commits items in one transaction with the progress record,
// again after an abortable error, until it commits (their outcomes are
// delivered and their sequences acknowledged to the spool), a fatal error
// (returned, with items failed), or Close gives up (ErrClosed: items
// failed with it, and kept in the spool; ErrOutcomeUnknown when it gave up
// while the commit was asked).
func (d *eosDriver) commitRange(items []eosItem) error {
	p := d.p
	if items[0].user {
		// sending was set by loop as it took them.
		defer d.setSending(false)
	}
	readFails := 0
	for attempt := 0; ; attempt++ {
		outs, final, n, err := d.transaction(items)
		if err == nil && n < len(items) {
			// The append budget ended the transaction early: its
			// prefix committed, the rest goes in the next one.
			d.committed.Add(1)
			for i, it := range items[:n] {
				p.spool.Ack(it.seq)
				d.deliver(it, outs[i].md, outs[i].err)
			}
			items = items[n:]
			attempt, readFails = -1, 0
			continue
		}
		if err != nil && errors.Is(err, errReadBack) {
			if readFails++; readFails >= eosReadAttempts {
				// The spool cannot give these records back: fail
				// for good rather than abort and retry forever.
				_ = d.abort()
				err = fmt.Errorf("%w (%d attempts)", err, readFails)
				d.failItems(items, err)
				return err
			}
		}
		if err == nil {
			d.committed.Add(1)
			for i, it := range items {
				p.spool.Ack(it.seq)
				d.deliver(it, outs[i].md, outs[i].err)
			}
			return nil
		}
		if errors.Is(err, ErrOutcomeUnknown) && d.ctx.Err() != nil {
			d.failItems(items, err)
			return fmt.Errorf("%w: %w", ErrClosed, d.ctx.Err())
		}
		if errors.Is(err, ErrClosed) || d.ctx.Err() != nil || IsFatal(err) || errors.Is(err, ErrSpoolProgress) {
			d.failItems(items, err)
			return err
		}
		d.aborted.Add(1)
		if aerr := d.abort(); aerr != nil {
			if errors.Is(aerr, ErrClosed) || d.ctx.Err() != nil || IsFatal(aerr) {
				d.failItems(items, aerr)
				return aerr
			}
		}
		// Records that can never be written leave the range, failed
		// for good (acknowledged: they are not sent again).
		if len(final) > 0 {
			keep := items[:0]
			for i, it := range items {
				if i < len(final) && final[i] != nil {
					ferr := final[i]
					p.spool.Ack(it.seq)
					d.deliver(it, p.failedMetadataOf(it), ferr)
					continue
				}
				keep = append(keep, it)
			}
			items = keep
			if len(items) == 0 {
				return nil
			}
		}
		p.log.Info("spool: an exactly-once transaction was aborted; sending its records again", "records", len(items), "err", err)
		if err := sleepCtx(d.ctx, p.txnSink.backoff(attempt+1)); err != nil {
			d.failItems(items, fmt.Errorf("%w: %w", ErrClosed, err))
			return ErrClosed
		}
	}
}

// transaction runs one transaction: the records of items read back from
// the spool and appended to memory (each to the partition it was written
// with, with its samsa-spool header), the progress record, and the
// commit. On success it returns each record's outcome, for the first n
// items: the transaction stops appending once appendBudget passed (and
// carries at least one record). On failure, final holds (when not nil) the
// error of each record that can never be written, by index.
func (d *eosDriver) transaction(items []eosItem) (outs []eosOutcome, final []error, n int, err error) {
	p, t := d.p, d.p.txn
	if err := d.open(); err != nil {
		return nil, nil, 0, err
	}
	outs = make([]eosOutcome, len(items))
	d.roundStart(len(items) + 1)
	cur := p.spool.NewCursor()
	defer cur.Close()
	began, budget := time.Now(), time.Duration(d.appendBudget.Load())
	for i, it := range items {
		if i > 0 && time.Since(began) > budget {
			d.roundSkip(len(items) - i)
			items, outs = items[:i], outs[:i]
			break
		}
		e, ok, rerr := d.p.readSpooled(d.ctx, cur, it.seq)
		if rerr != nil {
			d.roundSkip(len(items) - i + 1)
			return nil, nil, 0, fmt.Errorf("%w: %w: sequence %d: %w", ErrSpoolFailed, errReadBack, it.seq, rerr)
		}
		if !ok {
			outs[i].err = fmt.Errorf("%w: spool sequence %d is no longer in the log (lost to damage)", ErrSpoolFailed, it.seq)
			d.roundOne()
			continue
		}
		if err := d.appendEntry(e, &outs[i]); err != nil {
			d.roundSkip(len(items) - i) // this one was counted by its completion
			return nil, nil, 0, err
		}
	}
	var progress eosOutcome
	if err := d.appendProgress(items[len(items)-1].seq+1, &progress); err != nil {
		return nil, nil, 0, err
	}
	if eosTestHook != nil {
		eosTestHook("appended")
	}
	for attempt := 1; ; attempt++ {
		t.ops.Lock()
		err = p.endTxnLocked(d.ctx, t, "the spool's exactly-once driver", true, txnCommitting, txnInTxn, txnCommitting)
		t.ops.Unlock()
		// Still committing (an error that is neither abortable nor
		// fatal): the coordinator may have committed, so the commit is
		// asked again, never aborted.
		if err == nil || t.load() != txnCommitting || d.ctx.Err() != nil {
			break
		}
		if serr := sleepCtx(d.ctx, p.txnSink.backoff(attempt)); serr != nil {
			break
		}
	}
	if err == nil {
		<-d.txnRecordsDone()
		if eosTestHook != nil {
			eosTestHook("committed")
		}
		return outs, nil, len(items), nil
	}
	if d.ctx.Err() != nil && t.load() == txnCommitting {
		// Close gave up while the commit was asked: the coordinator
		// may have committed, and endOnClose may still finish it. The
		// records stay in the spool; the next New skips them if the
		// progress committed.
		return nil, nil, 0, fmt.Errorf("%w: Close gave up while the exactly-once transaction was committing (the records stay in the spool; the next producer skips them if it committed): %w", ErrOutcomeUnknown, err)
	}
	select {
	case <-d.txnRecordsDone():
		for i := range outs {
			if ferr := outs[i].err; ferr != nil && neverWritable(ferr) {
				if final == nil {
					final = make([]error, len(items))
				}
				final[i] = ferr
			}
		}
	default:
	}
	return nil, final, 0, err
}

func (d *eosDriver) setSending(v bool) {
	d.mu.Lock()
	d.sending = v
	d.mu.Unlock()
}

// roundSkip counts down n records of the round that were never appended.
func (d *eosDriver) roundSkip(n int) {
	for range n {
		d.roundOne()
	}
}

// appendEntry is the exactly-once driver's append of a record read back
// from the spool: as New's replay appends one (appendEntry's conversion,
// entryRecord, is shared), but acknowledged to the spool by the driver
// after the commit, not by its completion. It waits for memory until
// Close gives up.
func (d *eosDriver) appendEntry(e spool.Entry, out *eosOutcome) error {
	p := d.p
	rec, ts := p.entryRecord(e)
	c := callbackCompletion(func(md RecordMetadata, err error) {
		out.md, out.err = md, err
		d.roundOne()
	})
	c.setTS(ts)
	c.setEpoch(uint8(p.epoch.Load() & 1))
	p.pending[c.epoch()].Add(1)
	t, err := p.topic(e.Topic)
	if err != nil {
		p.refuse(&c, rec, err) // never sendable: final
		return nil
	}
	for {
		err = p.appendSpooled(d.ctx, t, rec, e.Partition, nil, e.Seq, &c, true)
		if err == nil || !errors.Is(err, ErrBufferExhausted) || d.ctx.Err() != nil {
			break
		}
		if serr := sleepCtx(d.ctx, 100*time.Millisecond); serr != nil {
			break
		}
	}
	if err != nil {
		p.refuse(&c, rec, err)
		if d.ctx.Err() != nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrBufferExhausted) {
			return fmt.Errorf("%w: appending sequence %d: %w", ErrClosed, e.Seq, err)
		}
	}
	return nil
}

// appendProgress appends the progress record (next: the sequence after
// the transaction's last) to the progress topic's partition for the
// spool's key (the one begin read), whatever the partitioner.
func (d *eosDriver) appendProgress(next uint64, out *eosOutcome) error {
	p := d.p
	rec := &Record{Topic: d.topic, Key: d.key, Value: encodeProgress(next), Partition: d.progress, ExplicitPartition: true}
	c := callbackCompletion(func(md RecordMetadata, err error) {
		out.md, out.err = md, err
		d.roundOne()
	})
	c.setTS(p.clock.nowMillis())
	c.setEpoch(uint8(p.epoch.Load() & 1))
	p.pending[c.epoch()].Add(1)
	t, err := p.topic(d.topic)
	if err != nil {
		p.refuse(&c, rec, err)
		return fmt.Errorf("%w: %w", ErrSpoolProgress, err)
	}
	size := recordbatch.BodySize(rec.Key, rec.Value, nil)
	for {
		err = p.append(d.ctx, t, rec, size, c, true)
		if err == nil || !errors.Is(err, ErrBufferExhausted) || d.ctx.Err() != nil {
			break
		}
		if serr := sleepCtx(d.ctx, 100*time.Millisecond); serr != nil {
			break
		}
	}
	if err != nil {
		err = p.appendErr(err, true)
		p.refuse(&c, rec, err)
		return fmt.Errorf("%w: appending the progress record: %w", ErrClosed, err)
	}
	return nil
}

// abort aborts the open (or abortable) transaction.
func (d *eosDriver) abort() error {
	p, t := d.p, d.p.txn
	switch t.load() {
	case txnReady, txnUninit:
		return nil
	case txnFatal:
		return t.lastErr()
	}
	t.ops.Lock()
	defer t.ops.Unlock()
	for {
		err := p.endTxnLocked(d.ctx, t, "the spool's exactly-once driver", false, txnAborting, txnInTxn, txnAbortable, txnAborting, txnCommitting)
		if err == nil || d.ctx.Err() != nil || IsFatal(err) {
			return err
		}
		if serr := sleepCtx(d.ctx, p.txnSink.backoff(1)); serr != nil {
			return fmt.Errorf("%w: %w", ErrClosed, serr)
		}
	}
}

// neverWritable reports whether a record that failed with err in a
// transaction can never be written: it leaves its range, failed for good.
func neverWritable(err error) bool {
	if errors.Is(err, ErrTransactionAborted) || IsAbortable(err) || IsFatal(err) {
		return false
	}
	return errors.Is(err, ErrRecordTooLarge) || errors.Is(err, ErrInvalidRecord) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.CorruptMessage)
}

// deliver completes one item: a Send's completion (on the driver
// goroutine), or RecoveryHook for a backlog record.
func (d *eosDriver) deliver(it eosItem, md RecordMetadata, err error) {
	p := d.p
	if !it.user {
		if hook := p.cfg.Spool.RecoveryHook; hook != nil {
			func() {
				defer func() {
					if v := recover(); v != nil {
						p.logPanic(v)
					}
				}()
				hook(it.seq, md, err)
			}()
		}
		return
	}
	c := it.c
	if err != nil && md.Topic != "" {
		p.failedOf(md.Topic, 1)
	}
	p.finished(c.epoch(), 1)
	p.deliver(&c, md, err)
}

// failItems fails items with err (they stay in the spool: not
// acknowledged).
func (d *eosDriver) failItems(items []eosItem, err error) {
	for _, it := range items {
		d.deliver(it, d.p.failedMetadataOf(it), err)
	}
}

// exit ends the driver: records still queued fail with err (ErrClosed
// when Close stopped it), and stay in the spool; later Sends are refused.
func (d *eosDriver) exit(err error) {
	d.mu.Lock()
	d.stopped = true
	if err != nil && !errors.Is(err, ErrClosed) && d.fatal == nil {
		d.fatal = err
	}
	q := d.queue
	d.queue = map[uint64]eosItem{}
	d.mu.Unlock()
	if err == nil {
		err = fmt.Errorf("%w: the spool's exactly-once driver stopped", ErrClosed)
	} else if !errors.Is(err, ErrClosed) {
		d.p.log.Error("spool: the exactly-once driver failed for good; the records stay in the spool for the next New", "err", err)
	}
	seqs := make([]uint64, 0, len(q))
	for s := range q {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		d.deliver(q[s], d.p.failedMetadataOf(q[s]), err)
	}
}

// failedMetadataOf is the metadata of a failed item: a Send's topic and
// partition (a backlog record's are not known without reading it back).
func (p *Producer) failedMetadataOf(it eosItem) RecordMetadata {
	return RecordMetadata{Topic: it.topic, Partition: it.part, Offset: -1}
}

// sendExactlyOnce is sendSpooled's end in exactly-once mode: the record
// is in the spool at seq; its completion waits in the driver's queue
// until a transaction with it commits. It takes no memory: the driver
// reads it back from the spool.
func (p *Producer) sendExactlyOnce(t *topicState, rec *Record, part int32, parts []*accPartition, seq uint64, c *completion) {
	size := recordbatch.BodySize(rec.Key, rec.Value, rec.Headers)
	if parts != nil {
		t.sticky.appended(part, size, int32(len(parts)), func(i int32) int { return parts[i].Load() })
	}
	p.markPersisted(c, seq)
	if err := p.eos.add(seq, int(size), *c, rec.Topic, part); err != nil {
		// Not acknowledged: it stays in the spool for the next New.
		p.refuse(c, rec, err)
	}
}
