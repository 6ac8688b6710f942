package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// holdWrites makes the segment writes wait until the returned release is
// called (the writer is then busy: a slow disk).
func holdWrites(ffs *faultFS) (release func()) {
	g := make(chan struct{})
	ffs.gate.Store(&g)
	var once sync.Once
	return func() {
		once.Do(func() {
			ffs.gate.CompareAndSwap(&g, nil)
			close(g)
		})
	}
}

// waitWrites waits until the file system saw n segment writes begin.
func waitWrites(t *testing.T, ffs *faultFS, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ffs.writes.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d segment writes after 5 s, want %d", ffs.writes.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Writes are grouped: while one write(2) runs the next Writes fill the
// buffer, and the writer writes them with one write(2) per group (and per
// segment roll). One goroutine or many, the file holds every sequence in
// order, each with the record its Write was given, and Written and
// Persisted are never ahead of the file. Before the write buffer each
// Write made its own write(2).
func TestWritesAreGroupedInSequenceOrder(t *testing.T) {
	cases := []struct {
		name    string
		writers int
	}{
		{"one goroutine", 1},
		{"eight goroutines", 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			o := Options{Dir: dir, Sync: SyncInterval, SyncInterval: time.Hour, SegmentBytes: 4 << 10, MaxBytes: 64 << 20, fs: ffs}
			s := mustOpen(t, o)
			release := holdWrites(ffs)
			defer release()
			const each = 200
			total := tc.writers * each
			var mu sync.Mutex
			bySeq := map[uint64]int{} // sequence → record number
			var wg sync.WaitGroup
			errs := make(chan error, tc.writers)
			for w := range tc.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var last uint64
					for k := range each {
						i := w*each + k
						seq, err := s.Write(context.Background(), rec(i))
						if err != nil {
							errs <- err
							return
						}
						if k > 0 && seq <= last {
							errs <- fmt.Errorf("writer %d: sequence %d after %d", w, seq, last)
							return
						}
						last = seq
						mu.Lock()
						bySeq[seq] = i
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// The first group is held in its write(2): nothing is in the
			// file yet, and nothing is said to be.
			if w, p := s.Written(), s.Persisted(); w != 0 || p != 0 {
				t.Fatalf("Written %d, Persisted %d while the first write(2) is held, want 0", w, p)
			}
			release()
			if bound, err := s.Flush(); err != nil || bound != uint64(total) {
				t.Fatalf("Flush = %d, %v; want %d", bound, err, total)
			}
			if n := ffs.writes.Load(); n > int64(total)/8 {
				t.Fatalf("%d write(2)s for %d records, want them grouped", n, total)
			} else {
				t.Logf("%d write(2)s for %d records", n, total)
			}
			var got []uint64
			for e, err := range s.Entries(0, uint64(total)) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, e.Seq)
				sameRecord(t, rec(bySeq[e.Seq]), e.Record)
			}
			if len(got) != total || !slices.IsSorted(got) || got[0] != 0 || got[total-1] != uint64(total-1) {
				t.Fatalf("the file holds %d sequences (%v...), want 0..%d in order", len(got), got[:min(len(got), 5)], total-1)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs := segFiles(t, dir)
			slices.Sort(segs)
			for _, name := range segs[:len(segs)-1] {
				fi, err := os.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > o.SegmentBytes || fi.Size() < o.SegmentBytes-200 {
					t.Fatalf("segment %s holds %d bytes, want it full (%d)", filepath.Base(name), fi.Size(), o.SegmentBytes)
				}
			}
			s = mustOpen(t, Options{Dir: dir})
			defer s.Close()
			if n := len(replayAll(t, s)); n != total {
				t.Fatalf("reopened with %d records, want %d", n, total)
			}
		})
	}
}

// A failed write of a group stops the spool: no record of the group (nor
// of those buffered after it) is reported written or persisted, Flush,
// Sync, Write and Close say ErrFailed, and a reopen has exactly the
// records written before.
func TestFailedGroupWriteFailsEveryRecordOfIt(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncNone, SyncInterval, SyncAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			s := mustOpen(t, Options{Dir: dir, Sync: policy, SyncInterval: time.Hour, fs: ffs})
			appendN(t, s, 0, 3)
			release1 := holdWrites(ffs)
			w0 := ffs.writes.Load()
			if _, err := s.Write(context.Background(), rec(3)); err != nil {
				t.Fatal(err)
			}
			waitWrites(t, ffs, w0+1) // the writer holds [3]
			for i := 4; i < 10; i++ {
				if _, err := s.Write(context.Background(), rec(i)); err != nil {
					t.Fatal(err)
				}
			}
			// [3] goes through; the group [4..9] is held, then fails.
			release2 := holdWrites(ffs)
			defer release2()
			release1()
			waitWrites(t, ffs, w0+2)
			eio := error(syscall.EIO)
			ffs.writeErr.Store(&eio)
			release2()
			_, err := s.Flush()
			if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Flush after a failed group write: %v, want ErrFailed wrapping EIO", err)
			}
			if w := s.Written(); w != 4 {
				t.Fatalf("Written = %d after the group [4, 10) failed, want 4", w)
			}
			if p := s.Persisted(); p > 4 {
				t.Fatalf("Persisted = %d after the group [4, 10) failed, want at most 4", p)
			}
			if _, err := s.Sync(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Sync: %v, want ErrFailed", err)
			}
			if _, err := s.Write(context.Background(), rec(10)); !errors.Is(err, ErrFailed) {
				t.Fatalf("Write: %v, want ErrFailed", err)
			}
			if err := s.Close(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Close: %v, want ErrFailed", err)
			}
			ffs.writeErr.Store(nil)
			s = mustOpen(t, Options{Dir: dir})
			defer s.Close()
			got := replayAll(t, s)
			if len(got) != 4 {
				t.Fatalf("reopened with %d records, want the 4 written", len(got))
			}
			for i, e := range got {
				sameRecord(t, rec(i), e.Record)
			}
			if r := s.Recovery(); r.DamagedRegions != 0 || r.TruncatedBytes != 0 {
				t.Fatalf("the failed write left damage: %+v", r)
			}
		})
	}
}

// Acks may come for sequences still in the write buffer (the producer
// appends to memory before the write reaches the file). They count, and
// the position file may say so before the records are in the file: a
// crash then replays the written unacknowledged records, loses none, and
// gives none of the sequences again; without the crash the rest are
// written and replayed but for the acknowledged ones.
func TestAcksOfBufferedSequences(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: dir, Sync: SyncNone, SyncInterval: time.Hour, fs: ffs})
	appendN(t, s, 0, 3)
	release := holdWrites(ffs)
	defer release()
	for i := 3; i < 10; i++ {
		if _, err := s.Write(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []uint64{0, 3, 4, 5} {
		s.Ack(q)
	}
	if !s.Acked(4) || s.Acked(6) {
		t.Fatalf("Acked(4) %v, Acked(6) %v: want an ack of a buffered sequence kept", s.Acked(4), s.Acked(6))
	}
	if w := s.Written(); w != 3 {
		t.Fatalf("Written = %d with the writer held, want 3", w)
	}
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	c := mustOpen(t, Options{Dir: crashed})
	var seqs []uint64
	for _, e := range replayAll(t, c) {
		seqs = append(seqs, e.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 2}) {
		t.Fatalf("after a crash with acks of buffered sequences in the position: replayed %v, want [1 2]", seqs)
	}
	if r := c.Recovery(); r.DamagedRegions != 0 || r.SkippedRecords != 0 {
		t.Fatalf("recovery %+v, want no damage", r)
	}
	if seq, err := c.Append(context.Background(), rec(10)); err != nil || seq < 10 {
		t.Fatalf("Append after the crash = %d, %v; want a sequence never given (10 or more)", seq, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	seqs = seqs[:0]
	for _, e := range replayAll(t, s) {
		seqs = append(seqs, e.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 6, 7, 8, 9}) {
		t.Fatalf("after Close: replayed %v, want [1 2 6 7 8 9]", seqs)
	}
}

// Close writes what the buffer holds (the writer may have stopped with a
// group still buffered); on a full disk it says that the buffered records
// were not written (ErrFull wrapping ENOSPC).
func TestCloseWritesTheBuffer(t *testing.T) {
	cases := []struct {
		name    string
		full    bool
		reopen  int
		wantErr error
	}{
		{"written", false, 100, nil},
		{"disk full", true, 0, syscall.ENOSPC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			s := mustOpen(t, Options{Dir: dir, SyncInterval: time.Hour, fs: ffs})
			ffs.noSpace.Store(tc.full)
			release := holdWrites(ffs)
			defer release()
			for i := range 100 {
				if _, err := s.Write(context.Background(), rec(i)); err != nil {
					t.Fatal(err)
				}
			}
			time.AfterFunc(20*time.Millisecond, release)
			err := s.Close()
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !errors.Is(err, ErrFull)) {
				t.Fatalf("Close = %v, want %v", err, tc.wantErr)
			}
			ffs.noSpace.Store(false)
			s = mustOpen(t, Options{Dir: dir})
			defer s.Close()
			got := replayAll(t, s)
			if len(got) != tc.reopen {
				t.Fatalf("reopened with %d records, want %d", len(got), tc.reopen)
			}
			for i, e := range got {
				sameRecord(t, rec(i), e.Record)
			}
		})
	}
}

// The write buffer is bounded: while the writer is held, Writes stop once
// it holds writeBufBytes (plus the group in the writer's hands), and go
// on when the writer takes it.
func TestWriteBufferIsBounded(t *testing.T) {
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: t.TempDir(), Sync: SyncNone, SyncInterval: time.Hour, fs: ffs})
	defer s.Close()
	release := holdWrites(ffs)
	defer release()
	r := &Record{Topic: "t", Value: make([]byte, 64<<10)}
	const n = 64 // 4 MiB
	var done atomic.Int64
	finished := make(chan error, 1)
	go func() {
		for range n {
			if _, err := s.Write(context.Background(), r); err != nil {
				finished <- err
				return
			}
			done.Add(1)
		}
		finished <- nil
	}()
	// Wait until the Writes stop.
	last := int64(-1)
	for d := done.Load(); d != last; d = done.Load() {
		last = d
		time.Sleep(50 * time.Millisecond)
	}
	s.mu.Lock()
	buffered := s.buffered
	s.mu.Unlock()
	size := int64(entryLen(r))
	if last >= n || buffered > 2*writeBufBytes+size {
		t.Fatalf("%d of %d Writes returned with the writer held, %d bytes buffered; want them waiting at %d bytes", last, n, buffered, 2*writeBufBytes)
	}
	release()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Writes still waiting after the writer was released")
	}
	if bound, err := s.Flush(); err != nil || bound != n {
		t.Fatalf("Flush = %d, %v; want %d", bound, err, n)
	}
}
