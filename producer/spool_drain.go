// The spool's drainer (issue 34): the goroutine that owns the records on
// disk not yet in memory. It appends New's backlog first, then the
// records Sends spilled (written to the spool while memory had no room),
// reading them back from the spool in the order they were spilled.

package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/spool"
)

// spilled is a record on disk waiting for memory: its completion and
// sequence, not its bytes (the drainer reads them back). spilledBytes is
// its size in the queue, which BufferMemory does not count.
type spilled struct {
	seq uint64
	t   *topicState
	c   completion
	// ctx is the Send's context when it can end (cancel.go), nil
	// otherwise: after the append the record is swept like a Send's.
	ctx context.Context
}

// spilledBytes is what the drainer's queue holds per spilled record
// (documented in SpoolConfig).
const spilledBytes = 64

// drainer is the spool's drainer goroutine (runDrain), started by New
// with every spool and ended by Close. It appends to memory, waiting for
// it as long as it takes, first New's backlog (spool.Unacked, with
// RecoveryHook as the completion), then the records in queue, in the order
// Sends put them there.
//
// A topic is spilling while topicState.spilling is above 0: the count of
// its records in the queue, plus one while New's backlog of the topic is
// not all in memory. A Send of a spilling topic spills its record after
// writing it (spill), never trying memory, so that no record overtakes a
// spilled one of its partition; the drainer decrements the count once the
// record is in memory (or failed). A Send that reads 0 may append
// directly: every record of the topic spilled before it (by a Send that
// returned before it began) is then in memory.
type drainer struct {
	mu      sync.Mutex
	queue   []spilled // queue[head:] waits
	head    int
	stopped bool // set by the drainer when it stops: spill fails the record itself
	kick    chan struct{}
	// ctx is the producer's closing, canceled by Close once its flush
	// has ended (stopWaits): it ends the drainer's wait for memory and its
	// idle wait, and the drainer fails what is left.
	ctx context.Context
	// last is, per backlog topic, its last backlog sequence at New and
	// whether it was reached (drainer goroutine only).
	last map[*topicState]uint64
	// broken is, per topic, the read error that left one of its records
	// (spilled, or of New's backlog) in the spool unread (drainer
	// goroutine only). Each holds one count of its topic's spilling until
	// the drainer stops, so that no later record of the topic overtakes
	// the one left behind: they are failed the same way (ErrSpoolFailed,
	// not acknowledged) and stay in the spool behind it, for the next New.
	broken map[*topicState]error
	exited chan struct{} // closed when runDrain returns; Close waits for it
	goid   atomic.Uint64 // the drainer goroutine's id (ownGoroutine)
}

// startDrain starts the drainer, with New's backlog if the spool has one:
// the backlog's topics are spilling until their last backlog record is in
// memory, so Sends of those topics spill behind it instead of waiting.
func (p *Producer) startDrain() {
	d := &drainer{kick: make(chan struct{}, 1), exited: make(chan struct{}), last: map[*topicState]uint64{}, broken: map[*topicState]error{}, ctx: p.closing}
	for _, b := range p.spool.Recovery().Backlog {
		t, err := p.topic(b.Topic)
		if err != nil {
			continue // never sendable: the replay acknowledges its records
		}
		if _, ok := d.last[t]; !ok {
			t.spilling.Add(1)
		}
		d.last[t] = max(d.last[t], b.LastSeq)
	}
	p.drain = d
	go p.runDrain(d)
}

// spill puts a record written to the spool at seq in the queue (the
// caller counted its topic spilling). It reports false when the drainer
// has stopped (Close): the caller fails the record with ErrClosed.
func (d *drainer) spill(s spilled) bool {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return false
	}
	d.queue = append(d.queue, s)
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
	return true
}

// take returns the next record to drain, waiting for one; false once
// Close stopped the drainer.
func (d *drainer) take() (spilled, bool) {
	for {
		d.mu.Lock()
		if d.head < len(d.queue) && d.ctx.Err() == nil {
			s := d.queue[d.head]
			d.queue[d.head] = spilled{}
			d.head++
			if d.head == len(d.queue) {
				d.queue, d.head = d.releaseQueue(), 0
			} else if d.head >= 1024 && d.head*2 >= len(d.queue) {
				n := copy(d.queue, d.queue[d.head:])
				clear(d.queue[n:])
				d.queue, d.head = d.queue[:n], 0
			}
			d.mu.Unlock()
			return s, true
		}
		d.mu.Unlock()
		select {
		case <-d.kick:
		case <-d.ctx.Done():
			return spilled{}, false
		}
	}
}

// queueKeepCap is the largest capacity the drainer's queue keeps once it
// empties (4096 entries, 256 KiB): a larger backing array, grown by a
// burst of spills, is released for the garbage collector.
const queueKeepCap = 4096

// releaseQueue returns the empty queue to go on with: the same backing
// array unless it is larger than queueKeepCap. d.mu held.
func (d *drainer) releaseQueue() []spilled {
	if cap(d.queue) > queueKeepCap {
		return nil
	}
	clear(d.queue)
	return d.queue[:0]
}

// runDrain is the drainer goroutine.
func (p *Producer) runDrain(d *drainer) {
	defer close(d.exited)
	d.goid.Store(goroutineID())
	defer p.stopDrain(d)
	if len(d.last) > 0 && !p.replayBacklog(d) {
		return
	}
	cur := p.spool.NewCursor()
	defer cur.Close()
	for {
		s, ok := d.take()
		if !ok {
			return
		}
		if !p.drainOne(d, cur, s) {
			return
		}
	}
}

// stopDrain ends the drainer: the backlog topics not done and the records
// still in queue stop spilling; the records fail with ErrClosed and stay
// in the spool for the next New (their completion does not acknowledge
// them: spoolFinal).
func (p *Producer) stopDrain(d *drainer) {
	for t := range d.last {
		t.spilling.Add(-1)
	}
	clear(d.last)
	for t := range d.broken {
		t.spilling.Add(-1)
	}
	clear(d.broken)
	d.mu.Lock()
	d.stopped = true
	rest := d.queue[d.head:]
	d.queue, d.head = nil, 0
	d.mu.Unlock()
	for i := range rest {
		p.failSpilled(&rest[i], fmt.Errorf("%w: the record was in the spool, not yet back in memory; the next New sends it again", ErrClosed))
	}
}

// purge fails the records in queue with ErrPurged (Purge); their
// completions acknowledge them to the spool. It returns how many.
func (d *drainer) purge(p *Producer) int {
	d.mu.Lock()
	rest := slices.Clone(d.queue[d.head:])
	d.queue, d.head = d.releaseQueue(), 0
	d.mu.Unlock()
	for i := range rest {
		p.failSpilled(&rest[i], fmt.Errorf("%w: the record was spilled to the spool, not yet in memory, when Purge was called", ErrPurged))
	}
	return len(rest)
}

// failSpilled fails a spilled record and counts it out of its topic's
// spilling records.
func (p *Producer) failSpilled(s *spilled, err error) {
	p.refuse(&s.c, &Record{Topic: s.t.name}, err)
	s.t.spilling.Add(-1)
}

// drainReadAttempts bounds the reads of the spool the drainer tries
// before it gives a record up as unreadable (as the exactly-once driver's
// eosReadAttempts): a read of New's backlog, or of a spilled record, that
// fails is tried again after drainReadBackoff.
const drainReadAttempts = 5

// drainReadBackoff is the wait before read attempt+1: 100 ms, doubling
// (1.5 s over the 4 waits).
func drainReadBackoff(attempt int) time.Duration {
	return 100 * time.Millisecond << min(attempt-1, 4)
}

// breakTopic marks t broken by err (drainer goroutine): it stays spilling
// until the drainer stops, and its later spilled records fail with
// ErrSpoolFailed, not acknowledged, in order behind the unread one.
// held tells that the caller hands over a spilling count it holds (a
// backlog topic's).
func (p *Producer) breakTopic(d *drainer, t *topicState, err error, held bool) {
	if _, ok := d.broken[t]; ok {
		if held {
			t.spilling.Add(-1)
		}
		return
	}
	if !held {
		t.spilling.Add(1)
	}
	d.broken[t] = err
	p.log.Error("producer: a record of the topic cannot be read back from the spool; it and every later record of the topic fail with ErrSpoolFailed and stay in the spool for the next New", "topic", t.name, "err", err)
}

// replayBacklog appends New's backlog (spool.Unacked) in sequence order;
// each topic stops being a backlog topic once its last backlog record is
// in memory. A read error reads again from the last sequence read, after
// drainReadBackoff, up to drainReadAttempts times without progress; then
// the backlog topics not done are broken (breakTopic), and the drainer
// goes on with the queue. It returns false once the producer is closing.
func (p *Producer) replayBacklog(d *drainer) bool {
	done := func(t *topicState) {
		if _, ok := d.last[t]; ok {
			delete(d.last, t)
			t.spilling.Add(-1)
		}
	}
	var next uint64 // the lowest sequence not read yet
	for attempt := 1; ; attempt++ {
		var rerr error
		for e, err := range p.spool.Unacked() {
			if err != nil {
				rerr = err
				break
			}
			if e.Seq < next {
				continue // read by an earlier attempt
			}
			next, attempt = e.Seq+1, 1
			if !p.replayOne(d, e) {
				return false
			}
			if t, err := p.topic(e.Topic); err == nil && e.Seq >= d.last[t] {
				done(t)
			}
		}
		if rerr == nil {
			break
		}
		if attempt >= drainReadAttempts {
			err := fmt.Errorf("%w: reading the spool's backlog failed %d times: %w", ErrSpoolFailed, attempt, rerr)
			for t := range d.last {
				p.breakTopic(d, t, err, true)
			}
			clear(d.last)
			return true
		}
		p.log.Warn("producer: reading the spool's backlog failed; reading it again", "attempt", attempt, "err", rerr)
		if sleepCtx(d.ctx, drainReadBackoff(attempt)) != nil {
			return false
		}
	}
	for t := range d.last {
		done(t) // Unacked skipped what was acknowledged since Open
	}
	return true
}

func noopCallback(RecordMetadata, error) {}

// replayOne appends one backlog record, waiting for memory as long as it
// takes (until Close). It returns false once the producer is closing: the
// records left stay in the spool, for the next New.
func (p *Producer) replayOne(d *drainer, e spool.Entry) bool {
	fn := noopCallback
	if hook := p.cfg.Spool.RecoveryHook; hook != nil {
		seq := e.Seq
		fn = func(md RecordMetadata, err error) { hook(seq, md, err) }
	}
	c := callbackCompletion(fn)
	rec, ts := p.entryRecord(e)
	c.setTS(ts)
	// Counted as send counts a record, so that Flush and Close wait for it.
	c.setEpoch(uint8(p.epoch.Load() & 1))
	p.pending[c.epoch()].Add(1)
	if p.closed.Load() || d.ctx.Err() != nil {
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
	c.obs = p.spoolObs(c.obs, e.Seq) // its completion acknowledges it
	if err := p.drainAppend(d, t, rec, e, &c, true); err != nil {
		// The completion acknowledges it unless the producer is closing
		// (spoolFinal): the record stays for the next New.
		p.refuse(&c, rec, err)
		return !errors.Is(err, ErrClosed) && !p.closed.Load()
	}
	return true
}

// drainOne reads a spilled record back from the spool and appends it,
// waiting for memory as long as it takes (until Close). It returns false
// once the producer is closing.
func (p *Producer) drainOne(d *drainer, cur *spool.Cursor, s spilled) bool {
	closedErr := func() error {
		return fmt.Errorf("%w: the record was in the spool, not yet back in memory; the next New sends it again", ErrClosed)
	}
	if d.ctx.Err() != nil {
		p.failSpilled(&s, closedErr())
		return false
	}
	if err := spilledCtxErr(&s); err != nil {
		// Its Send's ctx ended: it fails as a record swept from memory
		// would (acknowledged: its caller was told it was not sent).
		p.failSpilled(&s, err)
		return true
	}
	if berr := d.broken[s.t]; berr != nil {
		p.failUnread(&s, fmt.Errorf("%w: an earlier record of the topic could not be read back from the spool; this one stays in the spool behind it, for the next New (%w)", ErrSpoolFailed, berr))
		return true
	}
	var e spool.Entry
	var ok bool
	var err error
	for attempt := 1; ; attempt++ {
		e, ok, err = p.readSpooled(d.ctx, cur, s.seq)
		if err != nil && d.ctx.Err() != nil {
			p.failSpilled(&s, closedErr())
			return false
		}
		if err == nil || attempt >= drainReadAttempts {
			break
		}
		p.log.Warn("producer: reading a spilled record back from the spool failed; reading it again", "topic", s.t.name, "seq", s.seq, "attempt", attempt, "err", err)
		if sleepCtx(d.ctx, drainReadBackoff(attempt)) != nil {
			p.failSpilled(&s, closedErr())
			return false
		}
	}
	if err != nil {
		// Not readable: it stays in the spool (not acknowledged), and so
		// do the topic's records after it, for the next New.
		err = fmt.Errorf("%w: reading the record back from the spool failed %d times: %w", ErrSpoolFailed, drainReadAttempts, err)
		p.breakTopic(d, s.t, err, false)
		p.failUnread(&s, err)
		return true
	}
	if !ok {
		// Not in the log (damage): nothing of it is left to send again.
		p.log.Error("producer: a spilled record is not in the spool's log (damage)", "topic", s.t.name, "seq", s.seq)
		p.failUnread(&s, fmt.Errorf("%w: reading the record back from the spool: not found in the spool's log", ErrSpoolFailed))
		return true
	}
	rec, _ := p.entryRecord(e) // its completion has Send's timestamp
	if err := p.drainAppend(d, s.t, rec, e, &s.c, false); err != nil {
		p.failSpilled(&s, err)
		return !errors.Is(err, ErrClosed) && d.ctx.Err() == nil
	}
	s.t.spilling.Add(-1)
	if s.ctx != nil {
		p.resweepIfEnded(s.ctx)
	}
	return true
}

// spilledCtxErr is the error of a spilled record whose Send's ctx has
// ended, nil otherwise.
func spilledCtxErr(s *spilled) error {
	if s.c.obs != nil && s.c.obs.g != nil && s.c.obs.g.hasEnded() {
		return s.c.obs.g.err()
	}
	if s.ctx != nil && s.ctx.Err() != nil {
		return ctxEndedErr(s.ctx.Err())
	}
	return nil
}

// failUnread fails a spilled record not read back with err, without
// acknowledging it: it stays in the spool, for the next New.
func (p *Producer) failUnread(s *spilled, err error) {
	if s.c.obs != nil {
		s.c.obs.spool = nil
	}
	p.failSpilled(s, err)
}

// drainAppend appends a record read from the spool with its partition,
// waiting for memory as long as it takes: until Close, whose ErrClosed it
// then returns. A backlog record (atClose) stops waiting as soon as Close
// begins (Flush and Close do not wait for the backlog); a spilled one
// once Close's flush has ended (closing canceled), since its Send was
// counted like any other.
func (p *Producer) drainAppend(d *drainer, t *topicState, rec *Record, e spool.Entry, c *completion, atClose bool) error {
	var err error
	for {
		err = p.appendSpooled(d.ctx, t, rec, e.Partition, nil, e.Seq, c, true)
		if err == nil || !errors.Is(err, ErrBufferExhausted) || d.ctx.Err() != nil || atClose && p.closed.Load() {
			break
		}
		// Memory stays full (the cluster is away): wait and try again,
		// not faster than every 100 ms (MaxBlock may be NoWait).
		select {
		case <-d.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil && (errors.Is(err, ErrBufferExhausted) || errors.Is(err, context.Canceled)) && (d.ctx.Err() != nil || atClose && p.closed.Load()) {
		// Close ended the wait for memory.
		err = fmt.Errorf("%w: the record was in the spool, waiting for memory (%v); the next New sends it again", ErrClosed, err)
	}
	if err == nil && p.drained.Load() {
		p.failLate()
	}
	return err
}

// readSpooled reads seq back through cur, for the drainer and the
// exactly-once driver. A record Send wrote may still be in the spool's
// write buffer (grouped writes): it then flushes the buffer and reads
// again, waiting while the disk is full, until ctx ends (Close).
func (p *Producer) readSpooled(ctx context.Context, cur *spool.Cursor, seq uint64) (spool.Entry, bool, error) {
	for {
		e, ok, err := cur.Read(seq)
		if err == nil || !errors.Is(err, spool.ErrNotWritten) {
			return e, ok, err
		}
		if _, ferr := p.spool.Flush(); ferr != nil {
			if !errors.Is(ferr, spool.ErrFull) {
				return spool.Entry{}, false, ferr
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return spool.Entry{}, false, fmt.Errorf("%w: %w", ErrClosed, ctx.Err())
			}
		}
	}
}
