package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestEntryRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
	}{
		{"empty", Record{}},
		{"unassigned partition", Record{Topic: "t", Partition: -1, Value: []byte("v")}},
		{"nil and empty key", Record{Topic: "t", Key: []byte{}, Value: nil}},
		{"timestamp", Record{Topic: "t", Timestamp: time.UnixMilli(1_700_000_000_123)}},
		{"epoch is not the zero time", Record{Topic: "t", Timestamp: time.UnixMilli(0)}},
		{"before 1970", Record{Topic: "t", Timestamp: time.UnixMilli(-5)}},
		{"headers", Record{Topic: "t", Partition: 7, Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "b", Value: []byte{}}}}},
		{"large value", Record{Topic: "t", Value: bytes.Repeat([]byte("x"), 70000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := appendEntry(nil, 42, &tc.rec)
			if len(b) != entryLen(&tc.rec) {
				t.Fatalf("encoded %d bytes, entryLen says %d", len(b), entryLen(&tc.rec))
			}
			sr := newSegmentReader(bytes.NewReader(b), int64(len(b)), 42)
			body, _, ok, err := sr.next()
			if err != nil || !ok {
				t.Fatalf("read back: %v %v", ok, err)
			}
			e, err := decodeBody(body, true)
			if err != nil || e.Seq != 42 {
				t.Fatalf("decode: %+v %v", e, err)
			}
			sameRecord(t, &tc.rec, e.Record)
		})
	}
}

// writeSegment makes a spool directory with n records of rec(i) in one
// segment, and returns the directory, the segment's bytes and the end
// offset of each entry.
func writeSegment(t *testing.T, n int) (string, []byte, []int64) {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, Sync: SyncNone})
	appendN(t, s, 0, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("%d segments", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	var ends []int64
	for i := range n {
		ends = append(ends, int64(len(appendEntry(nil, uint64(i), rec(i)))))
		if i > 0 {
			ends[i] += ends[i-1]
		}
	}
	if ends[n-1] != int64(len(b)) {
		t.Fatalf("segment of %d bytes, entries end at %d", len(b), ends[n-1])
	}
	return dir, b, ends
}

// A segment cut at any byte of its last entries (a torn write) opens, with
// every entry before the cut intact, the cut one truncated and counted,
// and appends go on after it.
func TestTornTailAtEveryOffset(t *testing.T) {
	const n = 12
	dir, seg, ends := writeSegment(t, n)
	segPath := segFiles(t, dir)[0]
	id, err := os.ReadFile(filepath.Join(dir, idFile))
	if err != nil {
		t.Fatal(err)
	}
	for cut := ends[n-4]; cut <= ends[n-1]; cut++ {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(segPath)), seg[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, idFile), id, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Dir: d, Sync: SyncNone})
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		whole := 0
		for whole < n && ends[whole] <= cut {
			whole++
		}
		got := replayAll(t, s)
		if len(got) != whole {
			t.Fatalf("cut at %d: replayed %d, want the %d whole entries", cut, len(got), whole)
		}
		for i, e := range got {
			sameRecord(t, rec(i), e.Record)
		}
		r := s.Recovery()
		if r.TruncatedBytes != cut-ends[whole-1] || r.DamagedRegions != 0 {
			t.Fatalf("cut at %d: recovery %+v, want %d bytes truncated", cut, r, cut-ends[whole-1])
		}
		if _, err := s.Append(context.Background(), rec(99)); err != nil {
			t.Fatalf("cut at %d: Append: %v", cut, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, Options{Dir: d, Sync: SyncNone})
		if got := replayAll(t, s); len(got) != whole+1 || !bytes.Equal(got[whole].Value, rec(99).Value) {
			t.Fatalf("cut at %d: after an append and a reopen, %d entries", cut, len(got))
		}
		if r := s.Recovery(); r.TruncatedBytes != 0 || r.DamagedRegions != 0 {
			t.Fatalf("cut at %d: the append after the truncation left damage: %+v", cut, r)
		}
		s.Close()
	}
}

// Random bit flips: Open never fails, every entry whose bytes were not
// touched comes back, and no damaged entry is taken for a record.
func TestRandomBitFlips(t *testing.T) {
	const n = 40
	dir, seg, ends := writeSegment(t, n)
	segPath := segFiles(t, dir)[0]
	for trial := range 60 {
		b := bytes.Clone(seg)
		hit := map[int]bool{}
		for range 1 + trial%4 {
			off := rand.IntN(len(b))
			b[off] ^= 1 << rand.IntN(8)
			i := 0
			for ends[i] <= int64(off) {
				i++
			}
			hit[i] = true
		}
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(segPath)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Dir: d, Sync: SyncNone})
		if err != nil {
			t.Fatalf("trial %d: Open: %v", trial, err)
		}
		got := map[uint64]Entry{}
		for _, e := range replayAll(t, s) {
			got[e.Seq] = e
		}
		for i := range n {
			e, ok := got[uint64(i)]
			if hit[i] {
				if ok {
					t.Fatalf("trial %d: the damaged entry %d was read back", trial, i)
				}
				continue
			}
			if !ok {
				t.Fatalf("trial %d: intact entry %d lost; flipped %v; recovery %+v", trial, i, hit, s.Recovery())
			}
			sameRecord(t, rec(i), e.Record)
		}
		r := s.Recovery()
		if r.DamagedRegions == 0 && r.TruncatedBytes == 0 {
			t.Fatalf("trial %d: damage not reported: %+v", trial, r)
		}
		if !hit[n-1] && r.SkippedRecords != uint64(len(hit)) {
			t.Fatalf("trial %d: %d records skipped, want %d", trial, r.SkippedRecords, len(hit))
		}
		s.Close()
	}
}

// FuzzSegmentReader: any bytes are read without a panic and in bounded
// time; what is returned is valid entries in increasing sequence order.
func FuzzSegmentReader(f *testing.F) {
	var seg []byte
	for i := range 4 {
		seg = appendEntry(seg, uint64(i), rec(i))
	}
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	broken := bytes.Clone(seg)
	broken[20] ^= 0xff
	f.Add(broken)
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		sr := newSegmentReader(bytes.NewReader(b), int64(len(b)), 0)
		var last uint64
		steps := 0
		for {
			body, off, ok, err := sr.next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if steps++; steps > len(b) {
				t.Fatal("more entries than bytes")
			}
			e, err := decodeBody(body, true)
			if err != nil {
				t.Fatalf("returned an invalid body: %v", err)
			}
			if steps > 1 && e.Seq <= last {
				t.Fatalf("sequence %d after %d", e.Seq, last)
			}
			last = e.Seq
			l := binary.BigEndian.Uint32(b[off:])
			if int(l) != len(body) {
				t.Fatalf("body of %d bytes at %d, length says %d", len(body), off, l)
			}
			again := appendEntry(nil, e.Seq, &e.Record)
			if !bytes.Equal(again, b[off:off+entryHeaderLen+int64(len(body))]) {
				t.Fatal("an entry read back does not encode to its bytes")
			}
		}
		if sr.tailOff > int64(len(b)) || sr.skipped > int64(len(b)) {
			t.Fatalf("counted %d skipped, tail at %d, of %d bytes", sr.skipped, sr.tailOff, len(b))
		}
	})
}

// FuzzOpen: Open over arbitrary directory contents (a segment, a
// position file, an id file) never panics; when it opens, the spool
// replays, appends and closes.
func FuzzOpen(f *testing.F) {
	var seg []byte
	for i := range 3 {
		seg = appendEntry(seg, uint64(i), rec(i))
	}
	pos := encodePosition(1, 1<<20, [][2]uint64{{200, 400}}, [][2]uint64{{0, 1 << 5}})
	f.Add(seg, pos, []byte("00112233445566778899aabbccddeeff\n"), uint8(0))
	f.Add(seg[:40], pos[:10], []byte("x"), uint8(3))
	f.Add([]byte{}, []byte{}, []byte{}, uint8(7))
	f.Fuzz(func(t *testing.T, seg, pos, id []byte, first uint8) {
		d := t.TempDir()
		write := func(name string, b []byte) {
			if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(filepath.Base(segName(d, uint64(first))), seg)
		write(filepath.Base(segName(d, uint64(first)+1000)), seg)
		write(positionFile, pos)
		write(idFile, id)
		s, err := Open(Options{Dir: d, Sync: SyncNone, MaxBytes: 1 << 20})
		if err != nil {
			return
		}
		defer s.Close()
		var last uint64
		n := 0
		for e, err := range s.Unacked() {
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 && e.Seq <= last {
				t.Fatalf("sequence %d after %d", e.Seq, last)
			}
			last = e.Seq
			n++
		}
		seq, err := s.Append(context.Background(), rec(1))
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && seq <= last {
			t.Fatalf("appended at %d, not after the replayed %d", seq, last)
		}
	})
}

// A segment's sequences are contiguous: an entry with a valid CRC but a
// sequence out of place (a stale block, garbage that passes) is damage,
// and what follows it in place is read.
func TestReaderRefusesOutOfPlaceSequences(t *testing.T) {
	var seg []byte
	seg = appendEntry(seg, 10, rec(0))
	seg = appendEntry(seg, 11, rec(1))
	stale := len(seg)
	seg = appendEntry(seg, 17, rec(2))
	seg = appendEntry(seg, 12, rec(3))
	sr := newSegmentReader(bytes.NewReader(seg), int64(len(seg)), 10)
	var got []uint64
	for {
		body, _, ok, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		e, _ := decodeBody(body, false)
		got = append(got, e.Seq)
	}
	if len(got) != 3 || got[0] != 10 || got[1] != 11 || got[2] != 12 {
		t.Fatalf("read %v, want 10 11 12", got)
	}
	if sr.damaged != 1 || sr.skipped != int64(len(appendEntry(nil, 17, rec(2)))) || sr.gapRecords != 0 {
		t.Fatalf("damaged %d, skipped %d bytes from %d, %d records lost", sr.damaged, sr.skipped, stale, sr.gapRecords)
	}
}

// Resynchronising over a large garbage region ends, and finds the
// entries after it.
func TestResyncOverGarbage(t *testing.T) {
	var seg []byte
	seg = appendEntry(seg, 0, rec(0))
	garbage := make([]byte, 4<<20)
	for i := range garbage {
		garbage[i] = byte(rand.Uint32())
	}
	seg = append(seg, garbage...)
	seg = appendEntry(seg, 1, rec(1))
	start := time.Now()
	sr := newSegmentReader(bytes.NewReader(seg), int64(len(seg)), 0)
	n := 0
	for {
		_, _, ok, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
	}
	if n != 2 || sr.damaged != 1 || sr.skipped != int64(len(garbage)) {
		t.Fatalf("%d entries, %d regions, %d bytes skipped; want 2, 1, %d", n, sr.damaged, sr.skipped, len(garbage))
	}
	t.Logf("resynchronised over %d bytes in %v", len(garbage), time.Since(start))
}

// A segment shorter than its measured size (a partial write taken back
// while Entries reads the active segment) ends where its data ends: no
// error.
func TestReaderShorterThanMeasured(t *testing.T) {
	var seg []byte
	for i := range 3 {
		seg = appendEntry(seg, uint64(i), rec(i))
	}
	sr := newSegmentReader(bytes.NewReader(seg), int64(len(seg))+500, 0)
	n := 0
	for {
		_, _, ok, err := sr.next()
		if err != nil {
			t.Fatalf("entry %d: %v", n, err)
		}
		if !ok {
			break
		}
		n++
	}
	if n != 3 {
		t.Fatalf("read %d entries, want 3", n)
	}
}
