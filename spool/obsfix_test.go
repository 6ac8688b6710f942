package spool

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestOnUsageRunsWithoutTheSpoolsLocks: the OnUsage call after a deletion
// of acknowledged segments comes with no lock of the spool held, as its
// doc says: a callback may take maintMu (here TryLock) and Write to the
// spool. Before, step called it with maintMu held: a callback whose Write
// needed a reservation deadlocked, and a slow one stalled the loop.
func TestOnUsageRunsWithoutTheSpoolsLocks(t *testing.T) {
	var (
		s         *Spool
		mu        sync.Mutex
		last      int64
		shrank    bool
		free      bool
		writeErr  error
		inWrite   bool
		afterShrk = make(chan struct{})
	)
	s = mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 512, SyncInterval: 5 * time.Millisecond,
		OnUsage: func(b int64) {
			mu.Lock()
			grew := b >= last
			last = b
			if grew || shrank || inWrite {
				mu.Unlock()
				return
			}
			shrank, inWrite = true, true
			mu.Unlock()
			ok := s.maintMu.TryLock()
			if ok {
				s.maintMu.Unlock()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := s.Write(ctx, rec(99))
			cancel()
			mu.Lock()
			free, writeErr, inWrite = ok, err, false
			mu.Unlock()
			close(afterShrk)
		}})
	defer s.Close()
	for _, q := range appendN(t, s, 0, 20) {
		s.Ack(q)
	}
	select {
	case <-afterShrk:
	case <-time.After(10 * time.Second):
		t.Fatal("no OnUsage call after the acknowledged segments' deletion")
	}
	mu.Lock()
	defer mu.Unlock()
	if !free {
		t.Fatal("OnUsage called with maintMu held")
	}
	if writeErr != nil {
		t.Fatalf("Write from OnUsage: %v", writeErr)
	}
}

// TestAckAfterFailureReportsFalse: once the spool failed (an fsync
// failed), it writes no position again, so an ack cannot take a record
// out of the log: Ack reports false, and the next Open replays the
// record. Before, Ack reported true, and the producer failed such a
// record as "not sent again" although the next New sent it.
func TestAckAfterFailureReportsFalse(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, Options{Dir: dir, Sync: SyncAlways, fs: ffs})
	seqs := appendN(t, s, 0, 2)
	if !s.Ack(seqs[0]) {
		t.Fatal("Ack on a working spool reported false")
	}
	seq, err := s.Write(context.Background(), rec(2))
	if err != nil {
		t.Fatal(err)
	}
	eio := error(syscall.EIO)
	ffs.syncErr.Store(&eio)
	if _, err := s.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync with a failing disk: %v, want ErrFailed", err)
	}
	if s.Ack(seq) {
		t.Fatal("Ack on a failed spool reported true: the record stays in the log")
	}
	ffs.syncErr.Store(nil)
	_ = s.Close()
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	var got []string
	for e, err := range s.Unacked() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Value))
	}
	if len(got) == 0 || got[len(got)-1] != string(rec(2).Value) {
		t.Fatalf("replayed %q: want the record whose ack came after the failure last", got)
	}
}
