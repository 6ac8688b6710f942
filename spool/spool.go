package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/samsa-go/samsa/internal/metrics"
	"github.com/samsa-go/samsa/internal/spoolfault"
)

const (
	idFile       = "id"
	positionFile = "position"
	lockFile     = "lock"
	segSuffix    = ".seg"
	// sampleEvery is how often (in sequences) the append time is kept,
	// for the oldest unacknowledged record's age.
	sampleEvery = 256
)

// segment is one log file, covering the sequences from first to the next
// segment's first.
type segment struct {
	first uint64
	size  int64
}

func segName(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", first, segSuffix))
}

type sample struct {
	seq uint64
	at  time.Time
}

// Spool is a durable log of records, acknowledged out of order and
// replayed after a restart. Its methods are safe for concurrent use.
type Spool struct {
	opts Options
	fs   fileSystem
	dir  string
	id   ID
	lock io.Closer

	recovery  Recovery
	replayEnd uint64
	cursor    uint64 // Open's scan
	backlog   map[backlogKey]int

	// syncMu orders fsyncs of the active segment and rolls: group commit
	// takes it to fsync, a roll (by the writer) to close the file an fsync
	// would use. Lock order: syncMu → mu.
	syncMu sync.Mutex
	// maintMu makes maintain (the position file's writer) one at a time.
	maintMu sync.Mutex

	mu     sync.Mutex
	failed error
	closed bool
	// activeClosed is set once Close has closed the active segment.
	activeClosed bool
	active       file
	segs         []segment // the last is the active one
	next         uint64    // the next sequence
	written      uint64    // sequences below it are in the file (write.go)
	synced       uint64    // sequences below it are fsynced (<= written)
	acks         ackSet
	// disk counts the bytes in the segment files and in the write
	// buffer (MaxBytes bounds both).
	disk int64
	// space is closed (and replaced) when segments are deleted.
	space chan struct{}
	// The write buffer (write.go): Write encodes entries into pend (their
	// sizes in pendSizes) under mu; the writer goroutine takes pend whole
	// (leaving spare in its place) and writes it to the active segment.
	pend, spare           []byte
	pendSizes, spareSizes []int32
	// buffered counts the bytes in pend and in the writer's hands.
	buffered int64
	// writing is set while the writer has work: Write kicks it only when
	// it is not set.
	writing bool
	// wantRoll asks the writer to roll the active segment (short of
	// MaxBytes with everything acknowledged: the active segment can then
	// be deleted).
	wantRoll bool
	// noSpace is the writer's last ENOSPC, until a write succeeds: Writes
	// then wait for room as at MaxBytes.
	noSpace error
	// wrote is closed (and replaced) when written moves, when the writer
	// finds the disk full, and when the spool fails.
	wrote chan struct{}
	// wroteWanted is set once a waiter took wrote: only then is it closed.
	wroteWanted bool
	// writerDone is set by Close once it wrote what the buffer held (or
	// gave up): nothing will move written again.
	writerDone bool
	samples    []sample
	// posWritten is the acknowledged count at the last position write.
	posWritten uint64
	// posSize and posAt are the last position file's size and time.
	posSize int
	posAt   time.Time
	// maxEntry is the largest entry seen at Open or written since: a
	// resync candidate up to it is always checked (segmentReader.maxSeen).
	maxEntry int64
	// reserved is the durable bound on sequences given out: the position
	// file says no sequence at or above it was used (reserveStep ahead of
	// next, moved on by the maintenance goroutine, or by Append when it
	// catches up).
	reserved uint64
	acked    uint64

	kick  chan struct{}
	wkick chan struct{} // wakes the writer
	quit  chan struct{}
	wg    sync.WaitGroup

	// usage mirrors disk for Usage, which reads it without mu.
	usage atomic.Int64

	m struct {
		appended, replayed, positionWrites, deletedSegments metrics.Counter
		fsyncTime                                           metrics.Histogram // nanoseconds
	}
}

// Recovery is what Open found in the directory.
type Recovery struct {
	// Segments and Bytes are the log files found (after truncation).
	Segments int
	Bytes    int64
	// Unacked counts the records to replay; Acked those found
	// acknowledged (below the position or in its set above it).
	Unacked int64
	Acked   int64
	// DamagedRegions counts the regions inside segments that were not
	// valid entries and were skipped (the reader resynchronised on the
	// next valid entry); SkippedBytes are their bytes, and SkippedRecords
	// the sequences missing across them, and those of an earlier
	// segment's bad tail (those records are lost).
	DamagedRegions int
	SkippedBytes   int64
	SkippedRecords uint64
	// TruncatedBytes were cut from the end of segments, from the first
	// bad byte with no valid entry after it on: in the last segment a
	// torn tail (a write the crash interrupted); in an earlier one damage,
	// whose records, up to the next segment's first sequence, count in
	// SkippedRecords. Each is counted once: the next Open finds it cut.
	TruncatedBytes int64
	// PositionLost is set when the position file was missing or damaged
	// while segments existed: every record in them is replayed.
	PositionLost bool
	// NewID is set when the directory had no valid id file and got a
	// new ID (a new spool, or the old id file was lost).
	NewID bool
	// Backlog has, per topic and partition (-1: never assigned), the
	// unacknowledged records found, in the order their topics and
	// partitions first appear in the log. A producer keeps new records of
	// those partitions behind the replayed ones until it has taken the
	// record at LastSeq or Unacked has ended: an entry acknowledged after
	// Open (exactly-once progress acked before the replay) is not yielded,
	// so LastSeq may never come.
	Backlog []Backlog
}

// Backlog is one partition's unacknowledged records at Open.
type Backlog struct {
	Topic     string
	Partition int32
	Records   int64
	// FirstSeq and LastSeq are its first and last unacknowledged
	// sequences at Open. Unacked skips the entries acknowledged since, so
	// a replay is done at LastSeq or at the end of Unacked.
	FirstSeq, LastSeq uint64
}

type backlogKey struct {
	topic     string
	partition int32
}

// Open opens (creating if needed) the spool in opts.Dir, locks it against
// a second Spool (ErrLocked), and recovers its log: a torn tail is
// truncated, damage is skipped and counted (Recovery), never a failure.
// Open fails only for an invalid option or an I/O error (wrapped, with
// the file's name); a full disk is not one (see "Failures" in the package
// doc).
func Open(opts Options) (*Spool, error) {
	if opts.Dir == "" {
		return nil, errors.New("spool: Options.Dir is required")
	}
	if opts.Sync < SyncInterval || opts.Sync > SyncAlways {
		return nil, fmt.Errorf("spool: invalid Options.Sync %d", opts.Sync)
	}
	if opts.SyncInterval < 0 || opts.SegmentBytes < 0 || opts.MaxBytes < 0 {
		return nil, errors.New("spool: Options.SyncInterval, SegmentBytes and MaxBytes must not be negative")
	}
	if opts.SyncInterval == 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = min(DefaultSegmentBytes, max(opts.MaxBytes/4, 1))
	}
	if opts.SegmentBytes > opts.MaxBytes {
		return nil, fmt.Errorf("spool: Options.SegmentBytes %d above MaxBytes %d", opts.SegmentBytes, opts.MaxBytes)
	}
	fsys := opts.fs
	if fsys == nil {
		fsys = osFS{}
		if f := spoolfault.Lookup(opts.Dir); f != nil {
			fsys = hookedFS{faults: f} // a test outside the package injects failures
		}
	}
	if err := fsys.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("spool: lock: %w", err)
	}
	s := &Spool{
		opts:  opts,
		fs:    fsys,
		dir:   opts.Dir,
		lock:  lock,
		space: make(chan struct{}),
		wrote: make(chan struct{}),
		kick:  make(chan struct{}, 1),
		wkick: make(chan struct{}, 1),
		quit:  make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		if s.active != nil {
			s.active.Close()
		}
		lock.Close()
		return nil, err
	}
	s.wg.Add(2)
	go s.loop()
	go s.writer()
	return s, nil
}

// ID is the spool's identity, carried in each record's header.
func (s *Spool) ID() ID { return s.id }

// Recovery is what Open found.
func (s *Spool) Recovery() Recovery { return s.recovery }

// Append writes rec to the log and returns its sequence once it is
// persisted under the sync policy (see SyncPolicy): in the segment file
// (the page cache), and under SyncAlways fsynced. When the log is at
// MaxBytes, or the disk is full, it waits for room until ctx ends, then
// fails with ErrFull (wrapping ctx's error, and syscall.ENOSPC for a full
// disk). Other errors: ErrTooLarge, ErrClosed, ErrFailed (wrapping the
// I/O error). When Append fails, rec is not persisted, with three
// exceptions, for which Append returns the sequence with the error: a
// disk found full after the record entered the write buffer (ErrFull
// wrapping ENOSPC: the record is written once there is room, unless Close
// comes first), Close coming while Append waited for the writer
// (ErrClosed: Close writes it), and an fsync failure under SyncAlways (the
// record may be in the log). Either way it is replayed after a reopen if
// it is in the log.
func (s *Spool) Append(ctx context.Context, rec *Record) (uint64, error) {
	seq, err := s.Write(ctx, rec)
	if err != nil {
		return 0, err
	}
	for {
		err := s.flushWait(seq + 1)
		if err == nil {
			break
		}
		if errors.Is(err, ErrClosed) {
			return seq, err
		}
		if !errors.Is(err, syscall.ENOSPC) {
			return 0, err
		}
		// The disk is full: wait for the writer's next try, up to ctx.
		s.mu.Lock()
		ch := s.wroteChLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return seq, s.fullErr(ctx, int64(entryLen(rec)), err)
		case <-s.quit:
			return seq, ErrClosed
		}
	}
	if s.opts.Sync != SyncAlways {
		return seq, nil
	}
	if err := s.syncThrough(seq + 1); err != nil {
		return seq, err
	}
	return seq, nil
}

// Write gives rec the next sequence and puts its entry in the write
// buffer, from which the spool's writer goroutine writes it to the file
// (one write(2) for what accumulated while the last one ran); it returns
// without waiting for the file, with the same errors as Append (a Write
// that returned a sequence never fails afterwards: a failed write of the
// buffer stops the spool, and its records are never reported persisted).
// The record is persisted once Persisted is above its sequence; Flush
// (under SyncNone and SyncInterval) and Sync make it so and say it, and
// Written says which sequences are in the file. Write waits (ignoring
// ctx: the wait is one write(2)) while the buffer holds writeBufBytes,
// and up to ctx for room under MaxBytes or on a full disk. A producer
// writes on Send's goroutine, for the sequence and the order, and
// completes Future.Persisted from one goroutine calling Flush or Sync, so
// that Send never waits for the disk.
func (s *Spool) Write(ctx context.Context, rec *Record) (uint64, error) {
	size := int64(entryLen(rec))
	if size > maxEntryLen || size > s.opts.MaxBytes {
		return 0, fmt.Errorf("%w: %d bytes (MaxBytes %d, at most %d)", ErrTooLarge, size, s.opts.MaxBytes, maxEntryLen)
	}
	var noSpace error
	for {
		s.mu.Lock()
		if err := s.usableLocked(); err != nil {
			s.mu.Unlock()
			return 0, err
		}
		if s.noSpace != nil {
			// The writer found the disk full: wait for its next try (it
			// retries when segments are deleted, or every 50 ms).
			ch, cause := s.wroteChLocked(), s.noSpace
			s.mu.Unlock()
			if err := s.waitOn(ctx, ch, size, cause); err != nil {
				return 0, err
			}
			continue
		}
		if s.disk+size > s.opts.MaxBytes {
			if s.acks.below >= s.next && s.segs[len(s.segs)-1].size+s.buffered > 0 {
				// Short of space with everything acknowledged: the
				// writer rolls, so that the active segment can be
				// deleted.
				s.wantRoll = true
				s.kickWriterLocked()
			}
			ch := s.space
			s.mu.Unlock()
			s.kickLoop()
			if err := s.waitOn(ctx, ch, size, nil); err != nil {
				return 0, err
			}
			continue
		}
		if len(s.pend) > 0 && int64(len(s.pend))+size > writeBufBytes {
			// The buffer is full: wait for the writer to take it.
			ch := s.wroteChLocked()
			s.kickWriterLocked()
			s.mu.Unlock()
			select {
			case <-ch:
			case <-s.quit:
				return 0, ErrClosed
			}
			continue
		}
		if s.next >= s.reserved {
			before := s.reserved
			s.mu.Unlock()
			if err := s.maintain(false); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return 0, err
				}
				noSpace = err
				if err := s.waitSpace(ctx, size, noSpace); err != nil {
					return 0, err
				}
			} else if err := ctx.Err(); err != nil {
				s.mu.Lock()
				moved := s.reserved != before
				s.mu.Unlock()
				if !moved {
					// The reservation did not move (the top of the
					// sequence space): do not spin past ctx.
					return 0, s.fullErr(ctx, size, nil)
				}
			}
			continue
		}
		seq := s.next
		start := len(s.pend)
		s.pend = appendUnsealedEntry(s.pend, seq, rec) // the writer seals it
		n := len(s.pend) - start
		s.pendSizes = append(s.pendSizes, int32(n))
		s.maxEntry = max(s.maxEntry, int64(n))
		s.next++
		s.buffered += int64(n)
		s.disk += int64(n)
		disk := s.disk
		s.usage.Store(disk)
		if seq%sampleEvery == 0 || len(s.samples) == 0 {
			s.samples = append(s.samples, sample{seq: seq, at: time.Now()})
		}
		s.kickWriterLocked()
		s.mu.Unlock()
		s.m.appended.Inc()
		if f := s.opts.OnUsage; f != nil {
			f(disk)
		}
		return seq, nil
	}
}

// waitSpace waits a short while for the disk to have room again (no ack
// may come to free a segment: the space may be taken by someone else).
func (s *Spool) waitSpace(ctx context.Context, size int64, cause error) error {
	s.mu.Lock()
	ch := s.space
	s.mu.Unlock()
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ch:
		return nil
	case <-ctx.Done():
		return s.fullErr(ctx, size, cause)
	case <-s.quit:
		return ErrClosed
	}
}

func (s *Spool) waitOn(ctx context.Context, ch chan struct{}, size int64, cause error) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return s.fullErr(ctx, size, cause)
	case <-s.quit:
		return ErrClosed
	}
}

func (s *Spool) fullErr(ctx context.Context, size int64, cause error) error {
	s.mu.Lock()
	disk := s.disk
	s.mu.Unlock()
	if cause != nil {
		return fmt.Errorf("%w: the disk has no space for %d bytes (%d bytes in the spool): %w: %w", ErrFull, size, disk, cause, ctx.Err())
	}
	return fmt.Errorf("%w: %d bytes on disk, MaxBytes %d, no room for %d bytes: %w", ErrFull, disk, s.opts.MaxBytes, size, ctx.Err())
}

func (s *Spool) usableLocked() error {
	if s.failed != nil {
		return s.failed
	}
	if s.closed {
		return ErrClosed
	}
	return nil
}

// failLocked stops the spool with cause.
func (s *Spool) failLocked(cause error) {
	if s.failed == nil {
		s.failed = fmt.Errorf("%w: %w", ErrFailed, cause)
		close(s.space)
		s.space = make(chan struct{})
		s.broadcastWroteLocked()
	}
}

func (s *Spool) fail(cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(cause)
	return s.failed
}

// fsync syncs f, counting it.
func (s *Spool) fsync(f file) error {
	start := time.Now()
	err := f.Sync()
	d := time.Since(start)
	s.m.fsyncTime.Observe(uint64(max(d, 0)))
	return err
}

// Usage returns the bytes of the segment files now (Metrics' Bytes),
// without a lock.
func (s *Spool) Usage() int64 { return s.usage.Load() }

// Persisted returns the bound below which every sequence written is
// persisted under the policy: under SyncAlways the sequences an fsync
// covered, otherwise the sequences in the file (Written). It is never
// ahead of the file: a crash of the process right after it returned keeps
// every sequence below it.
func (s *Spool) Persisted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Sync == SyncAlways {
		return s.synced
	}
	return s.written
}

// Sync writes what the buffer holds, fsyncs what was written (sharing the
// fsync with concurrent appenders; not under SyncNone) and returns
// Persisted's bound, which then covers every Write that returned before
// the call. Its errors are ErrFailed's (the spool stops), ErrClosed, and
// ErrFull wrapping syscall.ENOSPC while the disk is full (the records
// wait in the buffer: call it again).
func (s *Spool) Sync() (uint64, error) {
	s.mu.Lock()
	next := s.next
	s.mu.Unlock()
	var err error
	if s.opts.Sync == SyncNone {
		err = s.flushWait(next)
	} else {
		err = s.syncThrough(next)
	}
	return s.Persisted(), fullDiskErr(err)
}

// syncThrough returns once the sequences below target are in the file and
// fsynced: the first caller fsyncs for everything written so far, and the
// callers that queued behind it find their records covered (group
// commit). While the disk is full it fsyncs what is in the file and
// returns the writer's ENOSPC.
func (s *Spool) syncThrough(target uint64) error {
	werr := s.flushWait(target)
	if werr != nil && !errors.Is(werr, syscall.ENOSPC) {
		return werr
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.synced >= min(target, s.written) {
		s.mu.Unlock()
		return werr
	}
	if s.failed != nil {
		s.mu.Unlock()
		return s.failed
	}
	if s.activeClosed {
		s.mu.Unlock()
		return ErrClosed
	}
	f, upto, first := s.active, s.written, s.segs[len(s.segs)-1].first
	s.mu.Unlock()
	// No roll can close f: rolls take syncMu. The writer may append to f
	// meanwhile: upto is what was in it before the fsync began.
	if err := s.fsync(f); err != nil {
		return s.fail(fmt.Errorf("fsync %s: %w", segName(s.dir, first), err))
	}
	s.mu.Lock()
	s.synced = max(s.synced, upto)
	s.mu.Unlock()
	return werr
}

// Ack marks seq delivered. Acks may come in any order; an ack of a
// sequence already acknowledged, or never appended, is ignored. Once a
// whole segment is below the contiguous acknowledged position, the
// spool's goroutine writes the position file and deletes the segment.
// Ack never blocks on I/O.
//
// Ack reports false when the spool was closed (Close began) or had
// failed (ErrFailed) before it: Close wrote the last position without it,
// or a failed spool writes no position again, so the record stays in the
// log and the next Open replays it. An ack of a sequence already
// acknowledged, or never appended, reports true otherwise.
func (s *Spool) Ack(seq uint64) bool {
	s.mu.Lock()
	if s.closed || s.failed != nil {
		s.mu.Unlock()
		return false
	}
	if seq >= s.next || !s.acks.add(seq) {
		s.mu.Unlock()
		return true
	}
	s.acked++
	kick := len(s.segs) > 1 && s.segs[1].first <= s.acks.below
	s.mu.Unlock()
	if kick {
		s.kickLoop()
	}
	return true
}

// Acked reports whether seq is acknowledged.
func (s *Spool) Acked(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acks.has(seq)
}

func (s *Spool) kickLoop() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loop is the spool's one goroutine: every SyncInterval (and when an ack
// makes a segment deletable) it fsyncs under SyncInterval (and under
// SyncAlways, as a backstop for records written with Write that no
// caller fsynced: Sync's group commit does it first), writes the
// position file if acks came, and deletes acknowledged segments. It ends
// at Close.
func (s *Spool) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			_ = s.maintain(false)
		case <-s.kick:
			// An ack made a segment deletable, or an Append waits for
			// space: no fsync of the log is due.
			_ = s.step(false, false)
		}
	}
}

// maintain fsyncs (under SyncInterval and SyncAlways), persists the position (and
// reserves sequences) and deletes the segments wholly below it. final (at
// Close) reserves no more than what was given out.
func (s *Spool) maintain(final bool) error { return s.step(final, true) }

// step is maintain, with the fsync only if doSync. It calls OnUsage
// after releasing maintMu (a callback may Write, which can need maintMu).
func (s *Spool) step(final, doSync bool) error {
	s.maintMu.Lock()
	disk, shrank, err := s.stepLocked(final, doSync)
	s.maintMu.Unlock()
	if f := s.opts.OnUsage; f != nil && shrank {
		f(disk)
	}
	return err
}

// stepLocked is step's work, with maintMu held; shrank reports that
// segments were deleted, leaving disk bytes.
func (s *Spool) stepLocked(final, doSync bool) (disk int64, shrank bool, err error) {
	if doSync && s.opts.Sync != SyncNone {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		// A full disk fsyncs what is in the file and goes on: the
		// deletions below are what frees it.
		if err := s.syncThrough(next); err != nil && !errors.Is(err, syscall.ENOSPC) {
			return 0, false, err
		}
	}
	s.mu.Lock()
	if s.failed != nil {
		s.mu.Unlock()
		return 0, false, s.failed
	}
	if s.closed && !final {
		// A Write that waited for maintMu while Close ran: Close wrote
		// the last position (and may have released the directory).
		s.mu.Unlock()
		return 0, false, ErrClosed
	}
	s.mu.Unlock()
	posErr := s.writePosition(final)
	if posErr != nil && !errors.Is(posErr, syscall.ENOSPC) {
		return 0, false, s.fail(posErr)
	}
	// A full disk only delays the position (retried at the next tick);
	// the deletions below are what frees the disk.
	s.mu.Lock()
	// Delete the segments wholly below the contiguous position (never the
	// active one). The position file need not be written first: at Open,
	// whatever is below the first segment counts as acknowledged. A crash
	// between the two leaves an older position, and at worst replays
	// acknowledged records: duplicates, never a loss.
	s.trimSamplesLocked()
	var gone []segment
	for len(s.segs) > 1 && s.segs[1].first <= s.acks.below {
		gone = append(gone, s.segs[0])
		s.segs = s.segs[1:]
	}
	s.mu.Unlock()
	if len(gone) == 0 {
		return 0, false, posErr
	}
	disk, err = s.deleteSegments(gone)
	if err != nil {
		return disk, true, err
	}
	return disk, true, posErr
}

// deleteSegments removes acknowledged segment files and returns the
// segment files' bytes left (the caller tells OnUsage, without maintMu).
func (s *Spool) deleteSegments(gone []segment) (int64, error) {
	var freed int64
	var firstErr error
	for _, g := range gone {
		if err := s.fs.Remove(segName(s.dir, g.first)); err != nil && !errors.Is(err, os.ErrNotExist) && firstErr == nil {
			firstErr = err
		}
		freed += g.size
		s.m.deletedSegments.Inc()
	}
	s.mu.Lock()
	s.disk -= freed
	disk := s.disk
	s.usage.Store(disk)
	close(s.space)
	s.space = make(chan struct{})
	s.mu.Unlock()
	// The records were acknowledged: a segment left behind (firstErr)
	// costs disk, not data. Reopening deletes it.
	return disk, firstErr
}

// Close stops the spool's goroutines, writes what the write buffer holds,
// fsyncs the log (unless SyncNone), writes the position, deletes
// acknowledged segments and releases the directory. Appends waiting for
// space fail with ErrClosed. Close returns the error that stopped the
// spool, if one did (ErrFailed), or the error of its last writes (ErrFull
// wrapping syscall.ENOSPC when the disk had no room for the buffer: those
// records were never persisted). It is idempotent.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	s.mu.Unlock()
	s.wg.Wait()

	// The writer has ended: Close writes the rest on its own (no waiting
	// for space: a full disk leaves the rest unwritten).
	var drainErr error
	for {
		more, err := s.writeGroup(true)
		if err != nil {
			drainErr = err
			break
		}
		if !more {
			break
		}
	}
	s.mu.Lock()
	s.writerDone = true
	s.broadcastWroteLocked()
	next := s.next
	s.mu.Unlock()

	var err error
	if s.opts.Sync != SyncNone {
		if err = s.syncThrough(next); errors.Is(err, syscall.ENOSPC) {
			err = nil // drainErr says it
		}
	}
	if err == nil {
		err = s.maintain(true)
	}
	if drainErr != nil && (err == nil || errors.Is(err, syscall.ENOSPC)) {
		err = fullDiskErr(drainErr)
	}
	s.syncMu.Lock()
	s.mu.Lock()
	if cerr := s.active.Close(); err == nil && cerr != nil && s.failed == nil {
		err = cerr
	}
	s.activeClosed = true
	if s.failed != nil {
		err = s.failed
	}
	s.mu.Unlock()
	s.syncMu.Unlock()
	s.lock.Close()
	return err
}

// reserveStep is how many sequences a position write reserves ahead.
const reserveStep = 1 << 20

// writePosition writes the position file when acks came since the last
// write or more sequences must be reserved (final: exactly what was
// given out, at Close). Its caller holds maintMu (or is Open).
func (s *Spool) writePosition(final bool) error {
	s.mu.Lock()
	reserve := s.reserved
	if final {
		reserve = s.next
	} else if s.next+reserveStep/2 > s.reserved {
		// Saturating: Open refuses sequences above seqLimit, so only
		// 2^21 appends more could reach the top.
		reserve = s.next + min(reserveStep, math.MaxUint64-s.next)
	}
	if s.acked == s.posWritten && reserve == s.reserved && s.m.positionWrites.Load() > 0 {
		s.mu.Unlock()
		return nil
	}
	// A large file (acks scattered over a large backlog) is rewritten at
	// most every positionLargeEvery for acks alone.
	if !final && reserve == s.reserved && s.posSize > positionLargeBytes && time.Since(s.posAt) < positionLargeEvery {
		s.mu.Unlock()
		return nil
	}
	acked, below := s.acked, s.acks.below
	// A write that raises the reservation is fsynced whatever the policy
	// (once per reserveStep/2 appends): a sequence is never given twice,
	// even after a power loss under SyncNone.
	doSync := s.opts.Sync != SyncNone || reserve > s.reserved
	// Only the copy is made under mu; Append and Ack do not wait for the
	// encoding.
	skips, words := s.acks.snapshot()
	s.mu.Unlock()
	data := encodePosition(below, reserve, skips, words)
	name := filepath.Join(s.dir, positionFile)
	if err := writeFileAtomic(s.fs, s.dir, name, data, doSync); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	s.m.positionWrites.Inc()
	s.mu.Lock()
	s.posWritten = acked
	s.reserved = reserve
	s.posSize = len(data)
	s.posAt = time.Now()
	s.mu.Unlock()
	return nil
}

// A position file above positionLargeBytes is rewritten for acks alone at
// most every positionLargeEvery (a write that reserves sequences, or
// Close's, is never put off). Variables for the tests.
var (
	positionLargeBytes = 64 << 10
	positionLargeEvery = time.Second
)
