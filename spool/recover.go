package spool

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// recover reads the id, the segments and the position, truncates a torn
// tail, deletes acknowledged segments and opens the active segment.
func (s *Spool) recover() error {
	doSync := s.opts.Sync != SyncNone
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	// The files the spool replaces must be files: a directory (or a
	// FIFO, which a read would wait on) in their place is not damage the
	// spool can repair without deleting what someone put there, so Open
	// fails and says which.
	for _, e := range ents {
		switch e.Name() {
		case idFile, idFile + ".tmp", positionFile, positionFile + ".tmp":
			t := e.Type()
			if t.IsRegular() || t&fs.ModeSymlink != 0 {
				continue
			}
			what := "a directory"
			if !t.IsDir() {
				what = fmt.Sprintf("not a regular file (mode %v)", t)
			}
			return fmt.Errorf("spool: %s is %s, where the spool keeps a file of its own: move it away", filepath.Join(s.dir, e.Name()), what)
		}
	}
	if err := s.loadID(doSync); err != nil {
		return err
	}
	var firsts []uint64
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = s.fs.Remove(filepath.Join(s.dir, name))
			continue
		}
		if !strings.HasSuffix(name, segSuffix) || !e.Type().IsRegular() {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if err != nil || segName(s.dir, first) != filepath.Join(s.dir, name) {
			continue // not a name the spool writes
		}
		if first > seqLimit {
			// A sequence no spool reaches (2^64 - 2^21): damage, left
			// in place and not read.
			s.recovery.DamagedRegions++
			if fi, err := e.Info(); err == nil {
				s.recovery.SkippedBytes += fi.Size()
			}
			continue
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)

	// Sizes first: they bound the runs the position may name.
	segs := make([]segment, len(firsts))
	maxRuns := uint64(1)
	for i, first := range firsts {
		size, err := s.stat(segName(s.dir, first))
		if err != nil {
			return err
		}
		segs[i] = segment{first: first, size: size}
		maxRuns += uint64(size)/(entryHeaderLen+minBodyLen) + 1
	}

	posData, perr := readFile(s.fs, filepath.Join(s.dir, positionFile))
	if perr != nil && !errors.Is(perr, os.ErrNotExist) {
		return fmt.Errorf("spool: %w", perr)
	}
	s.acks = newAckSet(0)
	if perr == nil {
		a, reserved, err := decodePosition(posData, maxRuns)
		if err != nil {
			s.recovery.PositionLost = len(segs) > 0
		} else {
			s.acks = a
			s.reserved = reserved
		}
	} else if len(segs) > 0 {
		s.recovery.PositionLost = true
	}
	if len(segs) > 0 && segs[0].first > s.acks.below {
		// What is below the first segment was deleted: acknowledged.
		s.acks.addRange(s.acks.below, segs[0].first)
	}

	next := s.acks.below
	// Empty segments at the end are what a roll (or an Open) created
	// before the crash: drop them first, so that the last segment (whose
	// bad tail is truncated and which is fsynced below) is the last one
	// written. A roll creates the new file before it fsyncs the old one,
	// so a process killed in that fsync leaves the old one written and
	// not fsynced behind an empty one. Their names still bound next.
	for n := len(segs); n > 0 && segs[n-1].size == 0; n = len(segs) {
		next = max(next, segs[n-1].first)
		if err := s.fs.Remove(segName(s.dir, segs[n-1].first)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		segs = segs[:n-1]
	}
	// cursor is the sequence after the last entry found: the sequences
	// absent from the log are marked acknowledged as the scan passes them.
	s.cursor = s.acks.below
	for i := range segs {
		seg := &segs[i]
		last := i == len(segs)-1
		var nextFirst uint64
		if !last {
			nextFirst = segs[i+1].first
		}
		maxSeq, ok, err := s.scanSegment(seg, last, nextFirst)
		if err != nil {
			return err
		}
		next = max(next, seg.first)
		if ok {
			next = max(next, maxSeq+1)
		}
	}
	// Sequences given out before a crash may have been sent and lost
	// from the log (a power loss under SyncInterval): never give them
	// again, or a consumer's Deduper would drop the new records.
	next = max(next, s.reserved)
	if s.recovery.PositionLost {
		// The reservation is lost with the file: a floor is what the
		// log shows was given (the segments' names, the entries found)
		// plus the reach of a reservation, which bounded what was given
		// beyond it.
		next = min(next, seqLimit) + reserveStep
	}
	s.acks.addRange(s.cursor, next)
	s.next = next
	s.replayEnd = next
	s.synced = next
	s.written = next
	for _, seg := range segs {
		s.disk += seg.size
	}
	s.recovery.Segments = len(segs)
	s.recovery.Bytes = s.disk
	s.usage.Store(s.disk)

	// Delete the segments wholly acknowledged (a crash came between the
	// position write and their deletion), but the last.
	var gone []segment
	for len(segs) > 1 && segs[1].first <= s.acks.below {
		gone = append(gone, segs[0])
		segs = segs[1:]
	}
	s.segs = segs
	if len(gone) > 0 {
		disk, err := s.deleteSegments(gone)
		if f := s.opts.OnUsage; f != nil {
			f(disk)
		}
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}

	// Every Open starts a new segment, named after the next sequence, so
	// that a segment's sequences are contiguous (a jump after a crash
	// falls between segments): the reader relies on it to tell an entry
	// from garbage that happens to pass a CRC's cheap checks. (Empty
	// last segments were dropped above; a last segment emptied by its
	// truncation is replaced.)
	if n := len(s.segs); n > 0 && s.segs[n-1].size == 0 {
		if err := s.fs.Remove(segName(s.dir, s.segs[n-1].first)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		s.segs = s.segs[:n-1]
	}
	s.segs = append(s.segs, segment{first: s.next})
	f, err := s.fs.OpenFile(segName(s.dir, s.next), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.active = f
	if doSync {
		if err := syncDir(s.fs, s.dir); err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}
	s.backlog = nil
	// Reserve the first sequences now, so that the first Append does not
	// wait for a position write. A full disk does not fail Open (a
	// producer restarted on a full disk must be able to drain its
	// backlog): the reservation stays what the old file holds, and the
	// first Write waits for space to reserve, as it would later.
	if err := s.writePosition(false); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

func (s *Spool) stat(name string) (int64, error) {
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	return fi.Size(), nil
}

// scanSegment reads seg's entries, counting them and the damage, and
// truncates a bad tail (the records an earlier segment's held, up to
// nextFirst, are counted lost). It returns the largest sequence.
func (s *Spool) scanSegment(seg *segment, last bool, nextFirst uint64) (maxSeq uint64, ok bool, err error) {
	name := segName(s.dir, seg.first)
	f, err := s.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, false, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	sr := newSegmentReader(f, seg.size, seg.first)
	sr.maxSeen = max(sr.maxSeen, s.maxEntry)
	defer func() { s.maxEntry = max(s.maxEntry, sr.maxSeen) }()
	n := 0
	for {
		body, _, more, err := sr.next()
		if err != nil {
			return 0, false, fmt.Errorf("spool: read %s: %w", name, err)
		}
		if !more {
			break
		}
		e, _ := decodeBody(body, false)
		maxSeq, ok = e.Seq, true
		if e.Seq > s.cursor {
			s.acks.addRange(s.cursor, e.Seq)
		}
		s.cursor = max(s.cursor, e.Seq+1)
		if s.acks.has(e.Seq) {
			s.recovery.Acked++
		} else {
			s.recovery.Unacked++
			s.noteBacklog(body, e)
			if n%sampleEvery == 0 {
				at := e.Timestamp
				if at.IsZero() {
					at = time.Now()
				}
				s.samples = append(s.samples, sample{seq: e.Seq, at: at})
			}
			n++
		}
	}
	s.recovery.DamagedRegions += sr.damaged
	s.recovery.SkippedBytes += sr.skipped
	s.recovery.SkippedRecords += sr.gapRecords
	if sr.tailOff >= 0 {
		// A torn write (the last segment), or damage with no valid entry
		// after it: truncated, so that it is counted once. In an earlier
		// segment the records it held, up to the next segment's first
		// sequence, are lost.
		s.recovery.TruncatedBytes += seg.size - sr.tailOff
		if !last && nextFirst > sr.minSeq {
			s.recovery.SkippedRecords += nextFirst - sr.minSeq
		}
		if err := f.Truncate(sr.tailOff); err != nil {
			return 0, false, fmt.Errorf("spool: truncate %s: %w", name, err)
		}
		seg.size = sr.tailOff
	}
	// The last segment may hold what a crashed process wrote and never
	// fsynced (under SyncInterval): it is fsynced now, before anything
	// of it is reported again. The others were fsynced when they rolled
	// (or truncated now).
	if (last || sr.tailOff >= 0) && s.opts.Sync != SyncNone {
		if err := f.Sync(); err != nil {
			return 0, false, fmt.Errorf("spool: fsync %s: %w", name, err)
		}
	}
	return maxSeq, ok, nil
}

// noteBacklog counts an unacknowledged entry in Recovery.Backlog.
func (s *Spool) noteBacklog(body []byte, e Entry) {
	d := decoder{b: body[21:]}
	topic := d.uvarBytes()
	if s.backlog == nil {
		s.backlog = make(map[backlogKey]int)
	}
	i, ok := s.backlog[backlogKey{string(topic), e.Partition}]
	if !ok {
		i = len(s.recovery.Backlog)
		s.recovery.Backlog = append(s.recovery.Backlog, Backlog{Topic: string(topic), Partition: e.Partition, FirstSeq: e.Seq})
		s.backlog[backlogKey{string(topic), e.Partition}] = i
	}
	b := &s.recovery.Backlog[i]
	b.Records++
	b.LastSeq = e.Seq
}

// loadID reads the spool's id, or makes one.
func (s *Spool) loadID(doSync bool) error {
	name := filepath.Join(s.dir, idFile)
	b, err := readFile(s.fs, name)
	if err == nil && len(b) == 2*len(ID{})+1 && b[len(b)-1] == '\n' {
		var id ID
		if n, err := hex.Decode(id[:], b[:len(b)-1]); err == nil && n == len(id) {
			s.id = id
			return nil
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spool: %w", err)
	}
	if _, err := rand.Read(s.id[:]); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.recovery.NewID = true
	if err := writeFileAtomic(s.fs, s.dir, name, []byte(s.id.String()+"\n"), doSync); err != nil {
		return fmt.Errorf("spool: write %s: %w", name, err)
	}
	return nil
}

// Unacked iterates over the records that Open found unacknowledged, in
// sequence order, skipping those acknowledged since: Entries(0, the next
// sequence at Open).
func (s *Spool) Unacked() iter.Seq2[Entry, error] {
	return s.Entries(0, s.replayEnd)
}

// Entries iterates over the unacknowledged records with sequences in
// [from, to), in sequence order, skipping those acknowledged by the time
// it reaches them. It reads the segments through a bounded window (1 MiB,
// or one entry if larger), so a large backlog is never in memory; each
// Entry's slices are its own. It may run while the spool is in use (a
// producer's reader refilling memory from the disk); a segment deleted
// meanwhile was acknowledged and is skipped. It yields a non-nil error
// (and stops) only for an I/O error; damage is skipped as Open skipped
// it. Each entry yielded counts in Metrics().Replayed.
func (s *Spool) Entries(from, to uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		s.mu.Lock()
		var firsts []uint64
		for i, seg := range s.segs {
			if seg.first >= to {
				break
			}
			if i+1 < len(s.segs) && s.segs[i+1].first <= from {
				continue
			}
			firsts = append(firsts, seg.first)
		}
		s.mu.Unlock()
		var buf []byte // one read window for every segment
		for _, first := range firsts {
			if !s.replaySegment(first, from, to, &buf, yield) {
				return
			}
		}
	}
}

func (s *Spool) replaySegment(first, from, to uint64, buf *[]byte, yield func(Entry, error) bool) bool {
	name := segName(s.dir, first)
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true // deleted since: acknowledged
	}
	if err != nil {
		yield(Entry{}, fmt.Errorf("spool: %w", err))
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		yield(Entry{}, fmt.Errorf("spool: %w", err))
		return false
	}
	sr := newSegmentReader(f, fi.Size(), first)
	s.mu.Lock()
	sr.maxSeen = max(sr.maxSeen, s.maxEntry)
	s.mu.Unlock()
	sr.buf = (*buf)[:0]
	defer func() { *buf = sr.buf }()
	for {
		body, _, more, err := sr.next()
		if err != nil {
			yield(Entry{}, fmt.Errorf("spool: read %s: %w", name, err))
			return false
		}
		if !more {
			return true
		}
		e, _ := decodeBody(body, false)
		if e.Seq >= to {
			return false
		}
		if e.Seq < from || s.Acked(e.Seq) {
			continue
		}
		e, _ = decodeBody(body, true)
		s.m.replayed.Inc()
		if !yield(e, nil) {
			return false
		}
	}
}
