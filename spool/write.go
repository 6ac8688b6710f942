// The write buffer and its writer goroutine: Write encodes entries into
// the buffer; the writer writes what accumulated with one write(2), rolls
// segments, and moves Written.

package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// writeBufBytes bounds the write buffer: a Write waits while the buffer
// holds entries and its own would take it past this (an entry larger than
// it enters an empty buffer alone). With the group in the writer's hands,
// the spool holds at most twice this, or twice its largest entry, of
// records not yet in the file.
const writeBufBytes = 1 << 20

// kickWriterLocked wakes the writer unless it is already at work (it
// looks at the buffer again before it stops).
func (s *Spool) kickWriterLocked() {
	if s.writing {
		return
	}
	s.writing = true
	select {
	case s.wkick <- struct{}{}:
	default:
	}
}

// wroteChLocked returns the channel broadcastWroteLocked closes next.
func (s *Spool) wroteChLocked() chan struct{} {
	s.wroteWanted = true
	return s.wrote
}

// broadcastWroteLocked wakes the waiters of wrote, if any (a channel is
// made only for them: with one record per group, the producer's usual
// case when the writer keeps up, that saves an allocation per record).
func (s *Spool) broadcastWroteLocked() {
	if !s.wroteWanted {
		return
	}
	s.wroteWanted = false
	close(s.wrote)
	s.wrote = make(chan struct{})
}

// writer is the spool's second goroutine (started by Open, ended by
// Close, which then writes the rest itself): it writes the buffer to the
// active segment, one write(2) per group of entries (a group is what
// accumulated while the last write ran), rolls full segments and moves
// Written.
func (s *Spool) writer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.quit:
			return
		case <-s.wkick:
		}
		for {
			more, err := s.writeGroup(false)
			if err != nil || !more {
				break
			}
			select {
			case <-s.quit:
				return
			default:
			}
		}
	}
}

// writeGroup writes what the buffer holds (and rolls, if a Write asked).
// It reports whether it did something (the buffer may have more). On a
// full disk it puts the group back in front of the buffer, sets noSpace,
// rolls the active segment if everything in the file is acknowledged (so
// that it can be deleted), and waits a little (or, final, at Close,
// returns the ENOSPC). Its other errors have stopped the spool.
func (s *Spool) writeGroup(final bool) (bool, error) {
	s.mu.Lock()
	if s.failed != nil || len(s.pend) == 0 && !s.wantRoll {
		s.writing = false
		s.mu.Unlock()
		return false, nil
	}
	s.writing = true
	buf, sizes := s.pend, s.pendSizes
	s.pend, s.pendSizes = s.spare[:0], s.spareSizes[:0]
	s.spare, s.spareSizes = nil, nil
	roll := s.wantRoll
	s.wantRoll = false
	s.mu.Unlock()

	// The entries' CRCs are computed here, off the Writes' goroutines
	// (sealing again a group put back after ENOSPC changes nothing).
	for k, e := 0, 0; k < len(sizes); k++ {
		sealEntry(buf[e : e+int(sizes[k])])
		e += int(sizes[k])
	}
	off, i, err := s.writeOut(buf, sizes)
	if err == nil {
		if roll {
			if err := s.roll(); err != nil && !errors.Is(err, syscall.ENOSPC) {
				return false, err
			}
			s.kickLoop()
		}
		if cap(buf) <= 2*writeBufBytes {
			s.mu.Lock()
			s.spare, s.spareSizes = buf[:0], sizes[:0]
			s.mu.Unlock()
		}
		return true, nil
	}
	if !errors.Is(err, syscall.ENOSPC) {
		return false, err
	}
	s.mu.Lock()
	rest := make([]byte, 0, len(buf)-off+len(s.pend))
	rest = append(append(rest, buf[off:]...), s.pend...)
	restSizes := make([]int32, 0, len(sizes)-i+len(s.pendSizes))
	restSizes = append(append(restSizes, sizes[i:]...), s.pendSizes...)
	s.pend, s.pendSizes = rest, restSizes
	s.wantRoll = s.wantRoll || roll
	s.noSpace = err
	s.broadcastWroteLocked()
	freeable := s.acks.below >= s.written && s.segs[len(s.segs)-1].size > 0
	ch := s.space
	s.mu.Unlock()
	if freeable {
		// Everything in the file is acknowledged: roll, so that the
		// maintenance goroutine can delete the active segment and free
		// its space.
		if rerr := s.roll(); rerr != nil && !errors.Is(rerr, syscall.ENOSPC) {
			return false, rerr
		}
		s.kickLoop()
	}
	if final {
		return false, err
	}
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ch:
	case <-s.quit:
	}
	return true, nil
}

// writeOut writes the entries of buf (their sizes in sizes) to the active
// segment, as few write(2)s as the segment ends allow, rolling full
// segments, and moves written after each. It returns how far it got (in
// bytes and entries) and, short of the end, why: ENOSPC (a partial write
// truncated back), or the error that stopped the spool.
func (s *Spool) writeOut(buf []byte, sizes []int32) (off, i int, err error) {
	for i < len(sizes) {
		s.mu.Lock()
		if s.failed != nil {
			err := s.failed
			s.mu.Unlock()
			return off, i, err
		}
		act, f := s.segs[len(s.segs)-1], s.active
		s.mu.Unlock()
		j, n := i, int64(0)
		for j < len(sizes) && act.size+n+int64(sizes[j]) <= s.opts.SegmentBytes {
			n += int64(sizes[j])
			j++
		}
		if j == i {
			if act.size > 0 {
				if err := s.roll(); err != nil {
					return off, i, err
				}
				continue
			}
			n, j = int64(sizes[i]), i+1 // an entry larger than a segment
		}
		w, err := f.Write(buf[off : off+int(n)])
		if err != nil {
			// Take back a partial write; a failure that cannot be taken
			// back stops the spool.
			if w > 0 {
				if terr := f.Truncate(act.size); terr != nil {
					return off, i, s.fail(fmt.Errorf("write %s: %w (and truncating it back: %v)", segName(s.dir, act.first), err, terr))
				}
			}
			if errors.Is(err, syscall.ENOSPC) {
				return off, i, err
			}
			return off, i, s.fail(fmt.Errorf("write %s: %w", segName(s.dir, act.first), err))
		}
		s.mu.Lock()
		s.segs[len(s.segs)-1].size += n
		s.written += uint64(j - i)
		s.buffered -= n
		s.noSpace = nil
		s.broadcastWroteLocked()
		s.mu.Unlock()
		off += int(n)
		i = j
	}
	return off, i, nil
}

// roll closes the active segment (fsynced, unless SyncNone) and starts a
// new one named after the first sequence not in the file, if the active
// one holds entries. Only the writer (or Close, after it) rolls, between
// two writes: every entry in the file is then in the old segment, and the
// ones still buffered go to the new one. The fsyncs run without mu (Writes
// go on filling the buffer meanwhile; nothing else writes or swaps the
// active file, and syncMu keeps group commit's fsync away). A full disk
// (ENOSPC creating the file) is returned as it is; other errors stop the
// spool.
func (s *Spool) roll() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return err
	}
	act, old, written := s.segs[len(s.segs)-1], s.active, s.written
	s.mu.Unlock()
	if act.size == 0 {
		return nil
	}
	name := segName(s.dir, written)
	f, err := s.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return err
		}
		return s.fail(fmt.Errorf("create %s: %w", name, err))
	}
	if s.opts.Sync != SyncNone {
		// A crash after the new file exists but before this fsync leaves
		// an unsynced segment before it: Open fsyncs the last segment
		// holding bytes (invariant 7).
		if err := s.fsync(old); err != nil {
			f.Close()
			return s.fail(fmt.Errorf("fsync %s: %w", segName(s.dir, act.first), err))
		}
		if err := syncDir(s.fs, s.dir); err != nil {
			f.Close()
			return s.fail(fmt.Errorf("fsync %s: %w", s.dir, err))
		}
	}
	s.mu.Lock()
	if s.opts.Sync != SyncNone {
		s.synced = max(s.synced, written)
	}
	s.active = f
	s.segs = append(s.segs, segment{first: written})
	s.mu.Unlock()
	if err := old.Close(); err != nil {
		return s.fail(fmt.Errorf("close %s: %w", segName(s.dir, act.first), err))
	}
	return nil
}

// flushWait returns once the sequences below target are in the file, or
// with the error that keeps them out: the spool's failure (ErrFailed),
// the writer's ENOSPC while the disk is full (raw: fullDiskErr wraps it
// for callers outside), ErrClosed once Close began.
func (s *Spool) flushWait(target uint64) error {
	s.mu.Lock()
	for s.written < target {
		var err error
		switch {
		case s.failed != nil:
			err = s.failed
		case s.noSpace != nil:
			err = s.noSpace
		case s.writerDone:
			err = ErrClosed
		}
		if err != nil {
			s.mu.Unlock()
			return err
		}
		ch := s.wroteChLocked()
		s.kickWriterLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.quit:
			return ErrClosed
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	return nil
}

// fullDiskErr wraps the writer's ENOSPC in ErrFull, for the callers of
// Flush, Sync and Close.
func fullDiskErr(err error) error {
	if err != nil && errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrFull) && !errors.Is(err, ErrFailed) {
		return fmt.Errorf("%w: the disk is full; records wait in the write buffer: %w", ErrFull, err)
	}
	return err
}

// Written returns the bound below which every sequence given out is in
// the segment files (the page cache: it survives a crash of the process,
// not a power loss unless Persisted under SyncAlways covers it too). A
// reader of the log (Entries) finds every sequence below it that is not
// acknowledged; one at or above it may still be only in the write buffer.
// It only grows.
func (s *Spool) Written() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// Flush returns once every record whose Write returned before the call is
// in the file, with Written's bound; it does not fsync (Sync does). Its
// errors: ErrFailed once the spool stopped, ErrClosed once Close began,
// ErrFull wrapping syscall.ENOSPC while the disk is full (the records
// wait in the buffer; call it again).
func (s *Spool) Flush() (uint64, error) {
	s.mu.Lock()
	next := s.next
	s.mu.Unlock()
	err := s.flushWait(next)
	return s.Written(), fullDiskErr(err)
}
