package spool

import (
	"errors"
	"fmt"
	"os"
)

// WrittenThrough returns the sequence below which every record Write gave
// out is in the segment files, where a Cursor can read it. Today Write
// returns only once its record is written, so it is the next sequence;
// a spool that writes records in groups after Write returned reports the
// end of what reached the files.
func (s *Spool) WrittenThrough() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writtenLocked()
}

// writtenLocked is WrittenThrough under mu: the one place that says how
// far the files hold what Write gave out.
func (s *Spool) writtenLocked() uint64 { return s.next }

// Cursor reads records back by sequence from the live log, while the
// spool is in use: a producer's drainer refills memory with the records
// it could not take when they were written. It keeps one segment file
// open and one read window (1 MiB, or one entry if larger) and moves
// forward; reading a sequence behind it reopens the sequence's segment.
// It reads through the spool's file system, like every other read. A
// Cursor is for one goroutine at a time; Close it before the spool.
type Cursor struct {
	s     *Spool
	f     file
	first uint64 // the open segment's first sequence
	sr    *segmentReader
	buf   []byte // the read window, kept across segments
}

// ErrNotWritten is Cursor.Read's error for a sequence at or above
// WrittenThrough: it is not in the segment files (yet).
var ErrNotWritten = errors.New("spool: sequence not written yet")

// NewCursor returns a Cursor on the log.
func (s *Spool) NewCursor() *Cursor { return &Cursor{s: s} }

// Read returns the record with sequence seq (its slices are its own),
// whether or not it was acknowledged. ok is false when the log does not
// hold it: its segment was deleted (every sequence in it acknowledged), or
// it was lost to damage. The error is ErrNotWritten (seq at or above
// WrittenThrough), ErrClosed, or an I/O error reading the segment (wrapped
// with the file's name); damage is skipped, as Open skips it.
func (c *Cursor) Read(seq uint64) (e Entry, ok bool, err error) {
	s := c.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, false, ErrClosed
	}
	if w := s.writtenLocked(); seq >= w {
		s.mu.Unlock()
		return Entry{}, false, fmt.Errorf("%w: %d (written through %d)", ErrNotWritten, seq, w)
	}
	i := len(s.segs) - 1
	for i >= 0 && s.segs[i].first > seq {
		i--
	}
	if i < 0 {
		s.mu.Unlock()
		return Entry{}, false, nil // below the first segment: acknowledged and deleted
	}
	first, size, maxEntry := s.segs[i].first, s.segs[i].size, s.maxEntry
	s.mu.Unlock()
	if c.sr == nil || c.first != first || seq < c.sr.minSeq {
		if err := c.open(first, size, maxEntry); err != nil {
			return Entry{}, false, err
		}
		if c.sr == nil {
			return Entry{}, false, nil // deleted since
		}
	} else if size > c.sr.size {
		c.sr.size = size // the active segment grew
	}
	for {
		body, _, more, err := c.sr.next()
		if err != nil {
			return Entry{}, false, fmt.Errorf("spool: read %s: %w", segName(s.dir, first), err)
		}
		if !more {
			return Entry{}, false, nil
		}
		got, _ := decodeBody(body, false)
		if got.Seq < seq {
			continue
		}
		if got.Seq > seq {
			return Entry{}, false, nil // skipped over as damage
		}
		e, _ = decodeBody(body, true)
		return e, true, nil
	}
}

// open moves the cursor to the start of the segment first (size bytes
// written); c.sr stays nil if the file was deleted.
func (c *Cursor) open(first uint64, size, maxEntry int64) error {
	if c.sr != nil {
		c.buf = c.sr.buf
	}
	c.closeFile()
	name := segName(c.s.dir, first)
	f, err := c.s.fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	c.f, c.first = f, first
	c.sr = newSegmentReader(f, size, first)
	c.sr.maxSeen = max(c.sr.maxSeen, maxEntry)
	c.sr.buf = c.buf[:0]
	return nil
}

func (c *Cursor) closeFile() {
	if c.f != nil {
		c.f.Close()
	}
	c.f, c.sr = nil, nil
}

// Close releases the cursor's file and window.
func (c *Cursor) Close() error {
	c.closeFile()
	c.buf = nil
	return nil
}
