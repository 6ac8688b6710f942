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
	// takes it to fsync, a roll to close the file an fsync would use.
	// Lock order: syncMu → mu.
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
	synced       uint64    // sequences below it are fsynced
	acks         ackSet
	disk         int64
	// space is closed (and replaced) when segments are deleted.
	space   chan struct{}
	buf     []byte
	samples []sample
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

	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup

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
		kick:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		if s.active != nil {
			s.active.Close()
		}
		lock.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.loop()
	return s, nil
}

// ID is the spool's identity, carried in each record's header.
func (s *Spool) ID() ID { return s.id }

// Recovery is what Open found.
func (s *Spool) Recovery() Recovery { return s.recovery }

// Append writes rec to the log and returns its sequence once it is
// persisted under the sync policy (see SyncPolicy). When the log is at
// MaxBytes it waits for acknowledged segments to be deleted until ctx
// ends, then fails with ErrFull (wrapping ctx's error). Other errors:
// ErrTooLarge, ErrClosed, ErrFailed (wrapping the I/O error). When Append
// fails, rec is not persisted (but for an fsync failure under
// SyncAlways: then the record may be in the log, and is replayed after a
// reopen if it is).
func (s *Spool) Append(ctx context.Context, rec *Record) (uint64, error) {
	seq, err := s.Write(ctx, rec)
	if err != nil || s.opts.Sync != SyncAlways {
		return seq, err
	}
	if err := s.syncThrough(seq + 1); err != nil {
		return 0, err
	}
	return seq, nil
}

// Write is Append without waiting for SyncAlways' fsync: it returns once
// the record is written to the file (the page cache), with the same
// errors. The record is persisted once Persisted is above its sequence
// (Sync makes it so). A producer writes on Send's goroutine, for the
// sequence and the order, and completes Future.Persisted from one
// goroutine calling Sync, so that Send never waits for the disk.
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
		act := &s.segs[len(s.segs)-1]
		short := noSpace != nil || s.disk+size > s.opts.MaxBytes
		if act.size > 0 && (act.size+size > s.opts.SegmentBytes || short && s.acks.below >= s.next) {
			// Roll a full segment; or, short of space with everything
			// acknowledged, roll so the active segment can be deleted.
			first := act.first
			s.mu.Unlock()
			if err := s.roll(first); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return 0, err
				}
				noSpace = err
				if err := s.waitSpace(ctx, size, noSpace); err != nil {
					return 0, err
				}
			}
			s.kickLoop()
			continue
		}
		if s.disk+size > s.opts.MaxBytes {
			ch := s.space
			s.mu.Unlock()
			s.kickLoop()
			if err := s.waitOn(ctx, ch, size, nil); err != nil {
				return 0, err
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
		s.buf = appendEntry(s.buf[:0], seq, rec)
		n, err := s.active.Write(s.buf)
		if err != nil {
			// Take back a partial write; a failure that cannot be taken
			// back stops the spool.
			if n > 0 {
				if terr := s.active.Truncate(act.size); terr != nil {
					s.failLocked(fmt.Errorf("write %s: %w (and truncating it back: %v)", segName(s.dir, act.first), err, terr))
					s.mu.Unlock()
					return 0, s.failed
				}
			}
			if errors.Is(err, syscall.ENOSPC) {
				s.mu.Unlock()
				noSpace = err
				if err := s.waitSpace(ctx, size, noSpace); err != nil {
					return 0, err
				}
				continue
			}
			s.failLocked(fmt.Errorf("write %s: %w", segName(s.dir, act.first), err))
			s.mu.Unlock()
			return 0, s.failed
		}
		noSpace = nil
		s.maxEntry = max(s.maxEntry, int64(n))
		s.next++
		act.size += int64(n)
		s.disk += int64(n)
		disk := s.disk
		s.usage.Store(disk)
		if seq%sampleEvery == 0 || len(s.samples) == 0 {
			s.samples = append(s.samples, sample{seq: seq, at: time.Now()})
		}
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
// covered, otherwise every sequence written.
func (s *Spool) Persisted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Sync == SyncAlways {
		return s.synced
	}
	return s.next
}

// Sync fsyncs what was written (sharing the fsync with concurrent
// appenders) and returns Persisted's bound. Under SyncNone it only
// returns the bound. Its errors are ErrFailed's (the spool stops) and
// ErrClosed.
func (s *Spool) Sync() (uint64, error) {
	if s.opts.Sync != SyncNone {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		if err := s.syncThrough(next); err != nil {
			return s.Persisted(), err
		}
	}
	return s.Persisted(), nil
}

// syncThrough returns once the sequences below target are fsynced: the
// first caller fsyncs for everything written so far, and the callers
// that queued behind it find their records covered (group commit).
func (s *Spool) syncThrough(target uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.synced >= target {
		s.mu.Unlock()
		return nil
	}
	if s.failed != nil {
		s.mu.Unlock()
		return s.failed
	}
	if s.activeClosed {
		s.mu.Unlock()
		return ErrClosed
	}
	f, upto, first := s.active, s.next, s.segs[len(s.segs)-1].first
	s.mu.Unlock()
	// No roll can close f: rolls take syncMu.
	if err := s.fsync(f); err != nil {
		return s.fail(fmt.Errorf("fsync %s: %w", segName(s.dir, first), err))
	}
	s.mu.Lock()
	s.synced = max(s.synced, upto)
	s.mu.Unlock()
	return nil
}

// roll closes the active segment (fsynced, unless SyncNone) and starts a
// new one named after the next sequence, if the active segment is still
// the one starting at first (concurrent appenders that found it full
// roll it once).
func (s *Spool) roll(first uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	act := s.segs[len(s.segs)-1]
	if act.size == 0 || act.first != first {
		return nil
	}
	name := segName(s.dir, s.next)
	f, err := s.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return err
		}
		s.failLocked(fmt.Errorf("create %s: %w", name, err))
		return s.failed
	}
	if s.opts.Sync != SyncNone {
		if err := s.fsync(s.active); err != nil {
			f.Close()
			s.failLocked(fmt.Errorf("fsync %s: %w", segName(s.dir, act.first), err))
			return s.failed
		}
		if err := syncDir(s.fs, s.dir); err != nil {
			f.Close()
			s.failLocked(fmt.Errorf("fsync %s: %w", s.dir, err))
			return s.failed
		}
		s.synced = s.next
	}
	if err := s.active.Close(); err != nil {
		f.Close()
		s.failLocked(fmt.Errorf("close %s: %w", segName(s.dir, act.first), err))
		return s.failed
	}
	s.active = f
	s.segs = append(s.segs, segment{first: s.next})
	return nil
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
		if err := s.syncThrough(next); err != nil {
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

// Close stops the spool's goroutine, fsyncs the log (unless SyncNone),
// writes the position, deletes acknowledged segments and releases the
// directory. Appends waiting for space fail with ErrClosed. Close returns
// the error that stopped the spool, if one did (ErrFailed), or the
// error of its last writes. It is idempotent.
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

	var err error
	if s.opts.Sync != SyncNone {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		err = s.syncThrough(next)
	}
	if err == nil {
		err = s.maintain(true)
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
