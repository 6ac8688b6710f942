package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(lockChildEnv) != "" {
		os.Exit(lockChild())
	}
	goleak.VerifyTestMain(m)
}

// rec is the record number i of the tests: its bytes say its number.
func rec(i int) *Record {
	r := &Record{
		Topic:     fmt.Sprintf("topic-%d", i%3),
		Partition: int32(i%5) - 1,
		Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
		Key:       []byte(fmt.Sprintf("key-%d", i)),
		Value:     bytes.Repeat([]byte{byte(i)}, 10+i%50),
	}
	if i%4 == 0 {
		r.Key = nil
	}
	if i%3 == 0 {
		r.Headers = []Header{{Key: "h", Value: []byte(fmt.Sprint(i))}, {Key: "nil"}}
	}
	return r
}

func sameRecord(t *testing.T, want *Record, got Record) {
	t.Helper()
	if want.Topic != got.Topic || want.Partition != got.Partition || !want.Timestamp.Equal(got.Timestamp) ||
		!bytes.Equal(want.Key, got.Key) || (want.Key == nil) != (got.Key == nil) || !bytes.Equal(want.Value, got.Value) ||
		len(want.Headers) != len(got.Headers) {
		t.Fatalf("record differs:\nwant %+v\n got %+v", *want, got)
	}
	for i := range want.Headers {
		if want.Headers[i].Key != got.Headers[i].Key || !bytes.Equal(want.Headers[i].Value, got.Headers[i].Value) ||
			(want.Headers[i].Value == nil) != (got.Headers[i].Value == nil) {
			t.Fatalf("header %d differs: want %+v got %+v", i, want.Headers[i], got.Headers[i])
		}
	}
}

func mustOpen(t *testing.T, o Options) *Spool {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func appendN(t *testing.T, s *Spool, from, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := from; i < from+n; i++ {
		seq, err := s.Append(context.Background(), rec(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func replayAll(t *testing.T, s *Spool) []Entry {
	t.Helper()
	var out []Entry
	for e, err := range s.Unacked() {
		if err != nil {
			t.Fatalf("Unacked: %v", err)
		}
		out = append(out, e)
	}
	return out
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Records appended come back after a reopen, in order, equal, under each
// sync policy, and new sequences continue after the old ones.
func TestReopenReplaysInOrder(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncNone, SyncInterval, SyncAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, Options{Dir: dir, Sync: policy, SegmentBytes: 1 << 10, MaxBytes: 1 << 20})
			seqs := appendN(t, s, 0, 100)
			for i, seq := range seqs {
				if seq != uint64(i) {
					t.Fatalf("sequence %d is %d", i, seq)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := s.Append(context.Background(), rec(0)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close: %v, want ErrClosed", err)
			}
			if n := len(segFiles(t, dir)); n < 3 {
				t.Fatalf("%d segments, want the log rolled at 1 KiB", n)
			}
			s = mustOpen(t, Options{Dir: dir, Sync: policy, SegmentBytes: 1 << 10, MaxBytes: 1 << 20})
			defer s.Close()
			got := replayAll(t, s)
			if len(got) != 100 {
				t.Fatalf("replayed %d, want 100", len(got))
			}
			for i, e := range got {
				if e.Seq != uint64(i) {
					t.Fatalf("entry %d has sequence %d", i, e.Seq)
				}
				sameRecord(t, rec(i), e.Record)
			}
			r := s.Recovery()
			if r.Unacked != 100 || r.DamagedRegions != 0 || r.TruncatedBytes != 0 || r.PositionLost || r.NewID {
				t.Fatalf("recovery %+v", r)
			}
			if seq, err := s.Append(context.Background(), rec(100)); err != nil || seq != 100 {
				t.Fatalf("Append after reopen: %d, %v; want 100", seq, err)
			}
			if m := s.Metrics(); m.Replayed != 100 || m.Unacked != 101 {
				t.Fatalf("metrics %+v", m)
			}
		})
	}
}

// Acks out of order keep every segment holding an unacknowledged record;
// the segments wholly below the contiguous position go; acks above the
// position are kept across a reopen (not replayed).
func TestOutOfOrderAcksDeleteOnlyBelowContiguousPosition(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 512, MaxBytes: 1 << 20, SyncInterval: time.Hour}
	s := mustOpen(t, o)
	appendN(t, s, 0, 200)
	segsBefore := len(segFiles(t, dir))
	order := rand.Perm(200)
	for _, i := range order {
		if i != 7 && i%10 != 3 {
			s.Ack(uint64(i))
		}
	}
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir)); n != segsBefore {
		t.Fatalf("%d segments of %d left with 7 unacknowledged, want all", n, segsBefore)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	got := replayAll(t, s)
	var want []uint64
	for i := range 200 {
		if i == 7 || i%10 == 3 {
			want = append(want, uint64(i))
		}
	}
	var gotSeqs []uint64
	for _, e := range got {
		gotSeqs = append(gotSeqs, e.Seq)
	}
	if !slices.Equal(gotSeqs, want) {
		t.Fatalf("replayed %v, want %v", gotSeqs, want)
	}
	for _, q := range want {
		s.Ack(q)
	}
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments left with everything acknowledged, want the active one", n)
	}
	if m := s.Metrics(); m.Unacked != 0 || m.OldestUnacked != 0 || m.DeletedSegments == 0 {
		t.Fatalf("metrics %+v", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	defer s.Close()
	if got := replayAll(t, s); len(got) != 0 {
		t.Fatalf("replayed %d after every ack, want 0", len(got))
	}
	if seq, _ := s.Append(context.Background(), rec(1)); seq != 200 {
		t.Fatalf("next sequence %d after deleting every old segment, want 200", seq)
	}
}

// The acknowledged set against a map, through single acks in any order,
// short and long ranges (skips), and a position file round trip.
func TestAckSetMatchesAMap(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 300, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a := newAckSet(0)
			seen := map[uint64]bool{}
			check := func(what string) {
				t.Helper()
				var below uint64
				for seen[below] {
					below++
				}
				above := 0
				for q := range seen {
					if q > below {
						above++
					}
				}
				if a.below != below || a.count() != above {
					t.Fatalf("after %s: below %d, %d above; want %d, %d", what, a.below, a.count(), below, above)
				}
			}
			for _, i := range rand.Perm(n) {
				switch rand.IntN(20) {
				case 0, 1, 2, 3, 4:
					continue
				case 5:
					lo := uint64(rand.IntN(n + 10))
					hi := lo + uint64(rand.IntN(3*skipMin))
					a.addRange(lo, hi)
					for q := lo; q < hi; q++ {
						seen[q] = true
					}
					check(fmt.Sprintf("addRange(%d, %d)", lo, hi))
					continue
				}
				seq := uint64(i)
				if a.add(seq) == seen[seq] {
					t.Fatalf("add(%d) said new=%v, already seen %v", seq, !seen[seq], seen[seq])
				}
				seen[seq] = true
				check(fmt.Sprintf("add(%d)", seq))
			}
			domain := uint64(n + 4*skipMin)
			for q := range domain {
				if a.has(q) != seen[q] {
					t.Fatalf("has(%d) = %v", q, a.has(q))
				}
			}
			b, reserved, err := decodePosition(func() []byte {
				skips, words := a.snapshot()
				return encodePosition(a.below, 1<<40, skips, words)
			}(), uint64(n+1))
			if err != nil || reserved != 1<<40 {
				t.Fatalf("position round trip: reserved %d, %v", reserved, err)
			}
			for q := range domain {
				if b.has(q) != seen[q] {
					t.Fatalf("after a position round trip has(%d) = %v", q, b.has(q))
				}
			}
		})
	}
}

func TestLockRefusesASecondOpen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if out, err := runLockChild(dir); err == nil || !bytes.Contains(out, []byte("locked")) {
		t.Fatalf("child process Open while held: %v %s, want refused as locked", err, out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := runLockChild(dir); err != nil {
		t.Fatalf("child process Open after Close: %v %s", err, out)
	}
	s = mustOpen(t, Options{Dir: dir})
	s.Close()
}

// An fsync failure stops the spool: the Append it was for fails, every
// later one fails, and a reopen has every record an Append returned for.
func TestFsyncFailureStopsTheSpool(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncAlways, SyncInterval} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			s := mustOpen(t, Options{Dir: dir, Sync: policy, SyncInterval: 5 * time.Millisecond, fs: ffs})
			appendN(t, s, 0, 10)
			eio := error(syscall.EIO)
			ffs.syncErr.Store(&eio)
			var err error
			deadline := time.Now().Add(5 * time.Second)
			for i := 10; err == nil && time.Now().Before(deadline); i++ {
				_, err = s.Append(context.Background(), rec(i))
				if policy == SyncInterval {
					time.Sleep(time.Millisecond)
				}
			}
			if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Append after a failed fsync: %v, want ErrFailed wrapping EIO", err)
			}
			if _, err := s.Append(context.Background(), rec(0)); !errors.Is(err, ErrFailed) {
				t.Fatalf("later Append: %v, want ErrFailed", err)
			}
			if m := s.Metrics(); !errors.Is(m.Failed, syscall.EIO) {
				t.Fatalf("Metrics().Failed = %v", m.Failed)
			}
			if err := s.Close(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Close: %v, want ErrFailed", err)
			}
			ffs.syncErr.Store(nil)
			s = mustOpen(t, Options{Dir: dir, Sync: policy})
			defer s.Close()
			got := replayAll(t, s)
			if len(got) < 10 {
				t.Fatalf("reopened with %d records, want the 10 persisted", len(got))
			}
			for i, e := range got[:10] {
				sameRecord(t, rec(i), e.Record)
			}
		})
	}
}

// A full disk makes Append wait and fail with ErrFull wrapping ENOSPC,
// leaves no damage in the log, and appends go on once space is free.
func TestNoSpaceThenRecovery(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: dir, fs: ffs})
	appendN(t, s, 0, 5)
	ffs.noSpace.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	seq, err := s.Append(ctx, rec(5))
	cancel()
	if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append on a full disk: %v, want ErrFull wrapping ENOSPC and the deadline", err)
	}
	// The record entered the write buffer before the writer found the
	// disk full: Append says its sequence, and it is written once there
	// is room (before the records appended after it).
	if seq != 5 {
		t.Fatalf("Append on a full disk returned sequence %d, want 5 (the record waits in the buffer)", seq)
	}
	if p := s.Persisted(); p != 5 {
		t.Fatalf("Persisted = %d on a full disk, want 5", p)
	}
	if _, err := s.Flush(); !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Flush on a full disk: %v, want ErrFull wrapping ENOSPC", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), rec(5))
		done <- err
	}()
	time.Sleep(80 * time.Millisecond)
	ffs.noSpace.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("Append once space is free: %v", err)
	}
	appendN(t, s, 6, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	got := replayAll(t, s)
	want := []int{0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9}
	if len(got) != len(want) {
		t.Fatalf("replayed %d, want %d", len(got), len(want))
	}
	for k, e := range got {
		sameRecord(t, rec(want[k]), e.Record)
	}
	if r := s.Recovery(); r.DamagedRegions != 0 || r.TruncatedBytes != 0 {
		t.Fatalf("the partial writes left damage: %+v", r)
	}
}

// At MaxBytes Append waits for acks to free a segment, up to its context.
func TestMaxBytesWaitsForAcks(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, SegmentBytes: 1 << 10, MaxBytes: 4 << 10, SyncInterval: 10 * time.Millisecond})
	defer s.Close()
	var seqs []uint64
	r := &Record{Topic: "t", Value: make([]byte, 300)}
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		seq, err := s.Append(ctx, r)
		cancel()
		if errors.Is(err, ErrFull) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ErrFull without the context's error: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
		if i > 1000 {
			t.Fatal("MaxBytes never reached")
		}
	}
	if m := s.Metrics(); m.Bytes > 4<<10 {
		t.Fatalf("%d bytes on disk, above MaxBytes", m.Bytes)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), r)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Append did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	for _, q := range seqs {
		s.Ack(q)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Append still waiting after every record was acknowledged")
	}
	if _, err := s.Append(context.Background(), &Record{Value: make([]byte, 5<<10)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a record above MaxBytes: %v, want ErrTooLarge", err)
	}
}

// Under SyncAlways, concurrent appenders share fsyncs: with a 2 ms
// fsync, the 31 other appenders queue behind each one.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	ffs.syncDelay.Store(int64(2 * time.Millisecond))
	s := mustOpen(t, Options{Dir: dir, Sync: SyncAlways, SyncInterval: time.Hour, fs: ffs})
	const writers, each = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Append(context.Background(), rec(w*each+i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := s.Metrics()
	if m.Fsyncs == 0 || m.Fsyncs > writers*each/8 {
		t.Fatalf("%d fsyncs for %d appends by %d goroutines, want far fewer", m.Fsyncs, writers*each, writers)
	}
	if m.FsyncMax < 2*time.Millisecond || m.FsyncTime < time.Duration(m.Fsyncs)*2*time.Millisecond {
		t.Fatalf("fsync time: longest %v, total %v for %d fsyncs of at least 2 ms", m.FsyncMax, m.FsyncTime, m.Fsyncs)
	}
	t.Logf("%d appends, %d fsyncs", writers*each, m.Fsyncs)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if n := len(replayAll(t, s)); n != writers*each {
		t.Fatalf("replayed %d, want %d", n, writers*each)
	}
}

func TestOpenValidatesOptions(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		o    Options
	}{
		{"no dir", Options{}},
		{"bad policy", Options{Dir: dir, Sync: 7}},
		{"negative max", Options{Dir: dir, MaxBytes: -1}},
		{"segment above max", Options{Dir: dir, MaxBytes: 10, SegmentBytes: 20}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Open(tc.o); err == nil {
				s.Close()
				t.Fatal("Open accepted it")
			}
		})
	}
}

func TestParseSyncPolicy(t *testing.T) {
	for _, p := range []SyncPolicy{SyncNone, SyncInterval, SyncAlways} {
		got, err := ParseSyncPolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParseSyncPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseSyncPolicy("sometimes"); err == nil {
		t.Fatal("accepted sometimes")
	}
}

func TestMetricsOldestUnacked(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	defer s.Close()
	appendN(t, s, 0, 3)
	time.Sleep(20 * time.Millisecond)
	m := s.Metrics()
	if m.OldestUnacked < 20*time.Millisecond || m.Unacked != 3 || m.Appended != 3 || m.Bytes == 0 {
		t.Fatalf("metrics %+v", m)
	}
	for q := range uint64(3) {
		s.Ack(q)
	}
	if m := s.Metrics(); m.OldestUnacked != 0 || m.Unacked != 0 || m.Acked != 3 {
		t.Fatalf("metrics after acks %+v", m)
	}
}

// copyDir copies the files of a spool's directory, as a crash would leave
// them (the lock file aside).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == lockFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A power loss can lose records whose Append returned (SyncInterval) and
// which the producer may have sent: their sequences must never be given
// to new records, or a consumer's Deduper would drop those as copies.
func TestSequencesNeverReusedAfterACrash(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	appendN(t, s, 0, 10)
	copyDir(t, dir, crashed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The power loss took the last five records.
	segs := segFiles(t, crashed)
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	sr := newSegmentReader(bytes.NewReader(b), int64(len(b)), 0)
	var cut int64
	for range 5 {
		_, _, _, _ = sr.next()
		cut = sr.off
	}
	if err := os.WriteFile(segs[0], b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, Options{Dir: crashed})
	defer c.Close()
	if n := len(replayAll(t, c)); n != 5 {
		t.Fatalf("replayed %d, want the 5 left", n)
	}
	seq, err := c.Append(context.Background(), rec(10))
	if err != nil {
		t.Fatal(err)
	}
	if seq < 10 {
		t.Fatalf("after the crash the next record got sequence %d, given before the crash", seq)
	}
	// The acks after the jump survive a reopen: the position file's runs
	// reach past the sequences the log holds.
	got := replayAll(t, c)
	for _, e := range got[:3] {
		c.Ack(e.Seq)
	}
	c.Ack(seq)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, Options{Dir: crashed})
	defer c.Close()
	if r := c.Recovery(); r.PositionLost || r.Unacked != 2 {
		t.Fatalf("reopened after acks past the jump: %+v, want the position kept and 2 records unacknowledged", r)
	}

	// A clean Close gives the sequences on without a jump.
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if seq, _ := s.Append(context.Background(), rec(10)); seq != 10 {
		t.Fatalf("after a clean Close the next sequence is %d, want 10", seq)
	}
}

// Sequences absent from the log after a crash (lost to damage, or jumped
// over) never get an ack: Open counts them acknowledged, or the contiguous
// position would stop there and no segment would ever be deleted again.
func TestSegmentsFreedPastLostSequences(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 1 << 10, MaxBytes: 1 << 20, SyncInterval: time.Hour}
	s := mustOpen(t, o)
	appendN(t, s, 0, 50)
	copyDir(t, dir, crashed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, crashed)
	b, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0x10 // damage the second segment's first entry
	if err := os.WriteFile(segs[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Dir = crashed
	c := mustOpen(t, o)
	defer c.Close()
	if r := c.Recovery(); r.DamagedRegions != 1 || r.SkippedRecords != 1 {
		t.Fatalf("recovery %+v, want one damaged region, one record lost", r)
	}
	for e, err := range c.Unacked() {
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(e.Seq)
	}
	for i := range 20 {
		seq, err := c.Append(context.Background(), rec(i))
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(seq)
	}
	if err := c.maintain(false); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, crashed)); n != 1 {
		t.Fatalf("%d segments left with every record acknowledged, want the active one", n)
	}
	if m := c.Metrics(); m.Unacked != 0 {
		t.Fatalf("%d unacknowledged, want 0", m.Unacked)
	}
}

// Write returns before the write to the file (and before SyncAlways'
// fsync); Persisted says what is in the file (under SyncAlways: what an
// fsync covered), never more than Written, and Sync moves it.
func TestWriteThenSync(t *testing.T) {
	cases := []struct {
		policy       SyncPolicy
		beforeSync   uint64 // the most Persisted may be after two Writes
		fsyncsBySync uint64
	}{
		{SyncAlways, 0, 1},
		{SyncInterval, 2, 1},
		{SyncNone, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.policy.String(), func(t *testing.T) {
			s := mustOpen(t, Options{Dir: t.TempDir(), Sync: tc.policy, SyncInterval: time.Hour})
			defer s.Close()
			for i := range 2 {
				if _, err := s.Write(context.Background(), rec(i)); err != nil {
					t.Fatal(err)
				}
			}
			if got, w := s.Persisted(), s.Written(); got > tc.beforeSync || got > w {
				t.Fatalf("Persisted after two Writes = %d (Written %d), want at most %d and Written", got, w, tc.beforeSync)
			}
			before := s.Metrics().Fsyncs
			bound, err := s.Sync()
			if err != nil || bound != 2 {
				t.Fatalf("Sync = %d, %v; want 2", bound, err)
			}
			if n := s.Metrics().Fsyncs - before; n != tc.fsyncsBySync {
				t.Fatalf("Sync made %d fsyncs, want %d", n, tc.fsyncsBySync)
			}
		})
	}
}

// Entries reads a range of sequences, across segments, skipping acks;
// Recovery.Backlog says per partition what Open found.
func TestEntriesAndBacklog(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 512, MaxBytes: 1 << 20}
	s := mustOpen(t, o)
	appendN(t, s, 0, 60)
	s.Ack(31)
	var got []uint64
	for e, err := range s.Entries(25, 40) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Seq)
	}
	var want []uint64
	for q := uint64(25); q < 40; q++ {
		if q != 31 {
			want = append(want, q)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Entries(25, 40) = %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	defer s.Close()
	type key struct {
		topic string
		part  int32
	}
	wantB := map[key]*Backlog{}
	for i := range 60 {
		if i == 31 {
			continue
		}
		r := rec(i)
		b := wantB[key{r.Topic, r.Partition}]
		if b == nil {
			b = &Backlog{Topic: r.Topic, Partition: r.Partition, FirstSeq: uint64(i)}
			wantB[key{r.Topic, r.Partition}] = b
		}
		b.Records++
		b.LastSeq = uint64(i)
	}
	backlog := s.Recovery().Backlog
	if len(backlog) != len(wantB) {
		t.Fatalf("%d partitions in the backlog, want %d", len(backlog), len(wantB))
	}
	for _, b := range backlog {
		if w := wantB[key{b.Topic, b.Partition}]; w == nil || *w != b {
			t.Fatalf("backlog %+v, want %+v", b, w)
		}
	}
}

// Appenders that find the segment full together roll it once: each
// segment but the last is full (it used to roll again for every one of
// them, into segments of one entry).
func TestConcurrentAppendersRollOnce(t *testing.T) {
	dir := t.TempDir()
	const segBytes = 8 << 10
	s := mustOpen(t, Options{Dir: dir, Sync: SyncNone, SegmentBytes: segBytes, MaxBytes: 64 << 20})
	r := &Record{Topic: "t", Value: make([]byte, 1000)}
	size := int64(entryLen(r))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := s.Append(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
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
		if fi.Size()+size <= segBytes {
			t.Fatalf("segment %s rolled at %d bytes, with room for another %d-byte entry under %d", filepath.Base(name), fi.Size(), size, segBytes)
		}
	}
}

// On a full disk, with every record acknowledged but the active segment
// holding the space, Append rolls it so that it can be deleted, instead of
// waiting for a deletion that could never come.
func TestFullDiskRollsToFreeTheActiveSegment(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: dir, SyncInterval: 10 * time.Millisecond, fs: ffs})
	defer s.Close()
	for _, q := range appendN(t, s, 0, 20) {
		s.Ack(q)
	}
	ffs.freeOnRemove.Store(true)
	ffs.noSpace.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Append(ctx, rec(20)); err != nil {
		t.Fatalf("Append on a full disk with everything acknowledged: %v", err)
	}
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments, want the old active one deleted", n)
	}
}

// A position file that cannot be written for lack of space does not stop
// the spool: acknowledged segments are deleted all the same, and the
// position is written once there is room.
func TestPositionWriteWithoutSpaceOnlyWaits(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: dir, SegmentBytes: 1 << 10, MaxBytes: 1 << 20, SyncInterval: time.Hour, fs: ffs})
	defer s.Close()
	seqs := appendN(t, s, 0, 40)
	for _, q := range seqs {
		s.Ack(q)
	}
	ffs.noSpace.Store(true)
	if err := s.maintain(false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("maintain with a full disk: %v, want ENOSPC", err)
	}
	if m := s.Metrics(); m.Failed != nil || m.Segments != 1 {
		t.Fatalf("after a position write without space: failed %v, %d segments; want running, the active one left", m.Failed, m.Segments)
	}
	ffs.noSpace.Store(false)
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), rec(1)); err != nil {
		t.Fatal(err)
	}
}

// Under SyncAlways the spool's goroutine fsyncs every SyncInterval what
// Write wrote and no Sync covered: a backstop, so that a record is not
// left unsynced for ever when its writer never calls Sync.
func TestSyncAlwaysBackstopFsyncsWrites(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), Sync: SyncAlways, SyncInterval: 10 * time.Millisecond})
	defer s.Close()
	for i := range 3 {
		if _, err := s.Write(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Persisted() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Persisted = %d 5 s after three Writes, want 3 (SyncInterval 10 ms)", s.Persisted())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Write with an ended context (the producer's first, non-waiting try)
// that has to extend the sequence reservation succeeds when the
// reservation moved: ErrFull only when it could not (the top of the
// sequence space).
func TestEndedCtxWriteExtendsTheReservation(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), Sync: SyncNone, SyncInterval: time.Hour})
	defer s.Close()
	s.mu.Lock()
	s.reserved = s.next // the next Write must reserve
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 3 {
		if _, err := s.Write(ctx, rec(i)); err != nil {
			t.Fatalf("Write %d with an ended ctx at the reservation's end: %v", i, err)
		}
	}
}

// TestAckAfterCloseReportsTheRecordKept: an ack that comes once Close
// began cannot reach the position file; Ack says so (false), and the
// next Open replays the record, so a caller can tell its user the record
// stays.
func TestAckAfterCloseReportsTheRecordKept(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := sp.Write(context.Background(), &Record{Topic: "t", Value: []byte("a")})
	b, _ := sp.Write(context.Background(), &Record{Topic: "t", Value: []byte("b")})
	if !sp.Ack(a) {
		t.Fatal("Ack before Close reported false")
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if sp.Ack(b) {
		t.Fatal("Ack after Close reported true")
	}
	sp, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var got []string
	for e, err := range sp.Unacked() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Value))
	}
	if len(got) != 1 || got[0] != "b" {
		t.Fatalf("replayed %q, want [b]", got)
	}
}

// TestOnUsageFollowsTheDisk: OnUsage gets the segment files' bytes after
// each write and after acknowledged segments are deleted, and Usage
// agrees with Metrics; the fsync latencies come from a histogram.
func TestOnUsageFollowsTheDisk(t *testing.T) {
	var mu sync.Mutex
	var calls []int64
	s := mustOpen(t, Options{Dir: t.TempDir(), Sync: SyncAlways, SegmentBytes: 512, SyncInterval: 5 * time.Millisecond,
		OnUsage: func(b int64) {
			mu.Lock()
			calls = append(calls, b)
			mu.Unlock()
		}})
	defer s.Close()
	seqs := appendN(t, s, 0, 20)
	mu.Lock()
	n := len(calls)
	last := calls[n-1]
	mu.Unlock()
	if n != 20 || last != s.Usage() || last != s.Metrics().Bytes || last == 0 {
		t.Fatalf("%d calls, last %d; Usage %d, Metrics().Bytes %d", n, last, s.Usage(), s.Metrics().Bytes)
	}
	if m := s.Metrics(); m.Fsyncs == 0 || m.FsyncP50 <= 0 || m.FsyncP99 < m.FsyncP50 || m.FsyncTime < m.FsyncMax {
		t.Fatalf("fsync metrics %+v", m)
	}
	for _, q := range seqs {
		s.Ack(q)
	}
	latest := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return calls[len(calls)-1]
	}
	deadline := time.Now().Add(5 * time.Second)
	for latest() >= last {
		if time.Now().After(deadline) {
			t.Fatalf("no segment deleted: Usage %d", s.Usage())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := latest(); got != s.Usage() || got != s.Metrics().Bytes {
		t.Fatalf("after the deletion OnUsage got %d (before %d), Metrics().Bytes %d", got, last, s.Metrics().Bytes)
	}
}
