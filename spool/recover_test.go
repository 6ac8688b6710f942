package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncFS is the real file system, counting the fsyncs of each file (by
// base name).
type syncFS struct {
	osFS
	mu    sync.Mutex
	syncs map[string]int
}

type syncFile struct {
	file
	name string
	fs   *syncFS
}

func (r *syncFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := r.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncFile{file: f, name: filepath.Base(name), fs: r}, nil
}

func (f *syncFile) Sync() error {
	f.fs.mu.Lock()
	if f.fs.syncs == nil {
		f.fs.syncs = make(map[string]int)
	}
	f.fs.syncs[f.name]++
	f.fs.mu.Unlock()
	return f.file.Sync()
}

func (r *syncFS) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs[name]
}

// A process killed inside a roll (the new segment created, the old one
// not yet fsynced) leaves written, unfsynced records behind an empty
// segment: Open fsyncs the last segment that holds records (and truncates
// its torn tail), not the empty one.
func TestOpenAfterACrashMidRollSyncsTheWrittenSegment(t *testing.T) {
	for _, empties := range []int{1, 2} {
		dir, crashed := t.TempDir(), t.TempDir()
		s := mustOpen(t, Options{Dir: dir, SyncInterval: time.Hour})
		appendN(t, s, 0, 10)
		copyDir(t, dir, crashed)
		next := s.next
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// The roll had created the next segment, empty (and, for two,
		// an Open after it had too, then died).
		for i := range empties {
			if err := os.WriteFile(segName(crashed, next+uint64(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A torn write at the end of the written segment.
		f, err := os.OpenFile(segName(crashed, 0), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte{0, 0, 0, 40, 1, 2}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r := &syncFS{}
		c := mustOpen(t, Options{Dir: crashed, SyncInterval: time.Hour, fs: r})
		rec := c.Recovery()
		if n := r.count(filepath.Base(segName(crashed, 0))); n == 0 {
			t.Errorf("%d empty segments: the segment holding the crashed process's records was not fsynced at Open", empties)
		}
		if rec.TruncatedBytes != 6 || rec.Unacked != 10 {
			t.Errorf("%d empty segments: recovery %+v, want the 6 torn bytes truncated and 10 records", empties, rec)
		}
		if c.next < next+uint64(empties)-1 {
			t.Errorf("%d empty segments: next %d, below an empty segment's name %d", empties, c.next, next+uint64(empties)-1)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The position file stays small when acks alternate over a backlog (a
// stuck partition beside a delivered one): about a bit per sequence
// between the contiguous position and the newest ack, not a run per
// unacknowledged record; and a large one is not rewritten every interval
// for acks alone, while a write that reserves sequences still goes.
func TestPositionFileStaysCompact(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, Sync: SyncNone, SyncInterval: time.Hour, MaxBytes: 1 << 30})
	defer s.Close()
	r := &Record{Topic: "t", Value: make([]byte, 10)}
	const n = 100_000
	for range n {
		seq, err := s.Write(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if seq%2 == 1 {
			s.Ack(seq)
		}
	}
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, positionFile))
	if err != nil {
		t.Fatal(err)
	}
	if limit := int64(n/64*10 + 64); fi.Size() > limit {
		t.Fatalf("position file of %d bytes for %d sequences with every other one acknowledged, want at most %d", fi.Size(), n, limit)
	}

	old := positionLargeBytes
	positionLargeBytes = 1 << 10
	defer func() { positionLargeBytes = old }()
	writes := s.Metrics().PositionWrites
	s.Ack(0)
	s.Ack(2)
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if got := s.Metrics().PositionWrites; got != writes {
		t.Fatalf("a large position file rewritten at once for acks alone (%d writes, want %d)", got, writes)
	}
	s.mu.Lock()
	s.reserved = s.next // sequences must be reserved
	s.mu.Unlock()
	if _, err := s.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := s.Metrics().PositionWrites; got != writes+1 {
		t.Fatalf("a reservation waited for the large position file's interval (%d writes, want %d)", got, writes+1)
	}
}

// Under SyncNone the position file is not fsynced for acks, but a write
// that reserves sequences is: the reservation is what keeps a sequence
// from being given twice after a power loss.
func TestSyncNoneReservationIsDurable(t *testing.T) {
	dir := t.TempDir()
	r := &syncFS{}
	s := mustOpen(t, Options{Dir: dir, Sync: SyncNone, SyncInterval: time.Hour, fs: r})
	defer s.Close()
	tmp := positionFile + ".tmp"
	if n := r.count(tmp); n != 1 {
		t.Fatalf("Open's reservation: position file fsynced %d times, want 1", n)
	}
	if n := r.count(filepath.Base(dir)); n == 0 {
		t.Fatalf("Open's reservation: directory not fsynced after the rename")
	}
	seqs := appendN(t, s, 0, 3)
	s.Ack(seqs[1])
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if n := r.count(tmp); n != 1 {
		t.Fatalf("a position write for acks alone fsynced under SyncNone (%d fsyncs, want 1)", n)
	}
	s.mu.Lock()
	s.reserved = s.next
	s.mu.Unlock()
	appendN(t, s, 3, 1)
	if n := r.count(tmp); n != 2 {
		t.Fatalf("a position write raising the reservation: %d fsyncs in all, want 2", n)
	}
}

// A producer restarted on a full disk opens its spool and drains the
// backlog; Appends wait for space to reserve sequences, then go on.
func TestOpenOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	appendN(t, s, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f := &faultFS{}
	f.noSpace.Store(true)
	c, err := Open(Options{Dir: dir, fs: f})
	if err != nil {
		t.Fatalf("Open on a full disk: %v", err)
	}
	defer c.Close()
	if n := len(replayAll(t, c)); n != 10 {
		t.Fatalf("replayed %d records on a full disk, want 10", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := c.Append(ctx, rec(10)); !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk: %v, want ErrFull wrapping ENOSPC", err)
	}
	f.noSpace.Store(false)
	seq, err := c.Append(context.Background(), rec(10))
	if err != nil {
		t.Fatalf("Append once the disk has room: %v", err)
	}
	if seq < 10 {
		t.Fatalf("sequence %d given again", seq)
	}
}

// Sequences near the top of the sequence space (a crafted or damaged
// segment name, position file) are damage: Open ignores them, so that
// the next sequence plus a reservation never wraps, and Append neither
// spins nor ignores its context.
func TestSequencesNearTheTopAreDamage(t *testing.T) {
	top := uint64(18446744073709551000)
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		check func(t *testing.T, r Recovery)
	}{
		{"segment name", func(t *testing.T, dir string) {
			if err := os.WriteFile(segName(dir, top), []byte("abc"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r Recovery) {
			if r.DamagedRegions != 1 || r.SkippedBytes != 3 || r.Segments != 0 {
				t.Errorf("recovery %+v, want the segment counted as one damaged region of 3 bytes, not read", r)
			}
		}},
		{"position reserved", func(t *testing.T, dir string) {
			s := mustOpen(t, Options{Dir: dir})
			appendN(t, s, 0, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, positionFile), encodePosition(0, top, nil, nil), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, r Recovery) {
			if !r.PositionLost || r.Unacked != 3 {
				t.Errorf("recovery %+v, want the position lost and 3 records to replay", r)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			s := mustOpen(t, Options{Dir: dir})
			defer s.Close()
			c.check(t, s.Recovery())
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			var seq uint64
			go func() {
				var err error
				seq, err = s.Append(ctx, rec(1))
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil || seq > seqLimit {
					t.Fatalf("Append: %d, %v; want a sequence below %d", seq, err, uint64(seqLimit))
				}
			case <-time.After(5 * time.Second):
				s.mu.Lock()
				s.failLocked(os.ErrClosed) // let it out
				s.mu.Unlock()
				<-done
				t.Fatalf("Append still running 5 s after it started, its context ended after 500 ms")
			}
		})
	}
}

// Resynchronising over crafted damage (a candidate every 32 bytes, each
// claiming the rest of the file, so that each would cost a CRC over it)
// stays about linear; a large entry after ordinary damage is still found.
func TestResyncOverCraftedDamageIsBounded(t *testing.T) {
	cases := []struct {
		name    string
		damage  int  // bytes of damage between the two entries
		crafted bool // candidates every 32 bytes
		value   int  // the second entry's value size
	}{
		{"crafted 4 MiB", 4 << 20, true, 10},
		{"large entry after damage", 100, false, 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			seg := appendEntry(nil, 0, &Record{Topic: "t", Value: []byte("first")})
			second := appendEntry(nil, 1, &Record{Topic: "t", Value: make([]byte, c.value)})
			size := len(seg) + c.damage + len(second)
			damage := make([]byte, c.damage)
			for i := range damage {
				damage[i] = 0xff
			}
			for o := 0; c.crafted && o+33 <= len(damage); o += 32 {
				binary.BigEndian.PutUint32(damage[o:], uint32(size-len(seg)-o-entryHeaderLen))
				damage[o+entryHeaderLen] = entryVersion
				binary.BigEndian.PutUint64(damage[o+entryHeaderLen+1:], 1)
			}
			seg = append(append(seg, damage...), second...)
			if err := os.WriteFile(segName(dir, 0), seg, 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			s := mustOpen(t, Options{Dir: dir})
			took := time.Since(start)
			defer s.Close()
			if r := s.Recovery(); r.Unacked != 2 || r.DamagedRegions != 1 || r.SkippedBytes != int64(c.damage) {
				t.Fatalf("recovery %+v, want both entries found across one damaged region of %d bytes", r, c.damage)
			}
			if took > 5*time.Second {
				t.Fatalf("Open took %v over %d bytes of damage", took, c.damage)
			}
			t.Logf("Open took %v", took)
		})
	}
}

// A Write that waited for the position writer while Close ran does not
// write the position file after Close wrote the last one (and released
// the directory): its maintenance step finds the spool closed.
func TestNoPositionWriteAfterClose(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	appendN(t, s, 0, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, positionFile))
	if err != nil {
		t.Fatal(err)
	}
	writes := s.Metrics().PositionWrites
	if err := s.step(false, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("a maintenance step after Close: %v, want ErrClosed", err)
	}
	after, err := os.ReadFile(filepath.Join(dir, positionFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Metrics().PositionWrites; got != writes || string(after) != string(before) {
		t.Fatalf("the position file was written after Close (%d writes, want %d)", got, writes)
	}
}

// A damaged or missing position file loses the reservation: the sequences
// then jump past what the log shows was given by a reservation's reach,
// so that those a power loss took from the log are not given again.
func TestSequencesNeverReusedWithoutThePosition(t *testing.T) {
	for _, lose := range []string{"damaged", "missing"} {
		t.Run(lose, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, Options{Dir: dir})
			appendN(t, s, 0, 10)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The power loss took the last five records, and the position.
			b, err := os.ReadFile(segName(dir, 0))
			if err != nil {
				t.Fatal(err)
			}
			sr := newSegmentReader(bytes.NewReader(b), int64(len(b)), 0)
			var cut int64
			for range 5 {
				_, _, _, _ = sr.next()
				cut = sr.off
			}
			if err := os.WriteFile(segName(dir, 0), b[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			pos := filepath.Join(dir, positionFile)
			if lose == "damaged" {
				err = os.WriteFile(pos, []byte("SPOS garbage"), 0o644)
			} else {
				err = os.Remove(pos)
			}
			if err != nil {
				t.Fatal(err)
			}
			c := mustOpen(t, Options{Dir: dir})
			defer c.Close()
			if r := c.Recovery(); !r.PositionLost || r.Unacked != 5 {
				t.Fatalf("recovery %+v, want the position lost and 5 records", r)
			}
			seq, err := c.Append(context.Background(), rec(10))
			if err != nil {
				t.Fatal(err)
			}
			if seq < 10 {
				t.Fatalf("without the position the next record got sequence %d, given before the crash", seq)
			}
		})
	}
}

// Damage at the end of an earlier segment (no valid entry after it in
// that segment) loses its records: they count in SkippedRecords, and the
// tail is truncated so that the next Open does not count it again.
func TestEarlierSegmentBadTailCountedOnce(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 1 << 10, MaxBytes: 1 << 20, SyncInterval: time.Hour}
	s := mustOpen(t, o)
	appendN(t, s, 0, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Damage the last two entries of the first segment.
	sr := newSegmentReader(bytes.NewReader(b), int64(len(b)), 0)
	var offs []int64
	for {
		_, off, ok, _ := sr.next()
		if !ok {
			break
		}
		offs = append(offs, off)
	}
	cut := offs[len(offs)-2]
	b[cut+entryHeaderLen+3] ^= 0x40
	b[offs[len(offs)-1]+entryHeaderLen+3] ^= 0x40
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, want := range []Recovery{
		{SkippedRecords: 2, TruncatedBytes: int64(len(b)) - cut},
		{},
	} {
		c := mustOpen(t, o)
		r := c.Recovery()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if r.SkippedRecords != want.SkippedRecords || r.TruncatedBytes != want.TruncatedBytes || r.Unacked != 48 {
			t.Fatalf("Open %d: recovery %+v, want %d records lost, %d bytes truncated, 48 to replay", i+1, r, want.SkippedRecords, want.TruncatedBytes)
		}
	}
}

// A directory where the spool keeps a file it replaces fails Open with an
// error naming it (the spool does not delete what someone put there).
func TestOpenRefusesADirectoryInPlaceOfAFile(t *testing.T) {
	for _, name := range []string{positionFile, positionFile + ".tmp", idFile, idFile + ".tmp"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, Options{Dir: dir})
			appendN(t, s, 0, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			c, err := Open(Options{Dir: dir})
			if err == nil {
				c.Close()
				t.Fatalf("Open with a directory %s: no error", name)
			}
			if want := p + " is a directory, where the spool keeps a file of its own: move it away"; !strings.Contains(err.Error(), want) {
				t.Fatalf("Open with a directory %s: %v, want it to say %q", name, err, want)
			}
			if _, err := os.Stat(filepath.Join(p, "sub")); err != nil {
				t.Fatalf("the directory was touched: %v", err)
			}
		})
	}
}
