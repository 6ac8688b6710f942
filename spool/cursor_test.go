package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
)

// openFaultFS fails opening a file for reading while failOpen is set.
type openFaultFS struct {
	osFS
	failOpen atomic.Bool
}

func (f *openFaultFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	if flag == os.O_RDONLY && f.failOpen.Load() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EIO}
	}
	return f.osFS.OpenFile(name, flag, perm)
}

// TestCursorReadsTheLiveLog reads records back by sequence while they are
// written, across segment rolls, forward with gaps, backward, and past
// deleted segments.
func TestCursorReadsTheLiveLog(t *testing.T) {
	ffs := &openFaultFS{}
	s := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 2 << 10, MaxBytes: 1 << 20, fs: ffs})
	defer s.Close()
	c := s.NewCursor()
	defer c.Close()
	if _, _, err := c.Read(0); !errors.Is(err, ErrNotWritten) {
		t.Fatalf("Read before any write: %v, want ErrNotWritten", err)
	}
	var seqs []uint64
	for i := 0; i < 200; i++ {
		seq, err := s.Write(context.Background(), rec(i))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
		if i%3 == 0 { // follow the log as it grows, skipping some
			if _, _, err := c.Read(seq); err != nil && !errors.Is(err, ErrNotWritten) {
				t.Fatalf("Read(%d) before Flush: %v, want ErrNotWritten or the record", seq, err)
			}
			if got, err := s.Flush(); err != nil || got != seq+1 {
				t.Fatalf("Flush after writing %d = %d, %v", seq, got, err)
			}
			e, ok, err := c.Read(seq)
			if err != nil || !ok {
				t.Fatalf("Read(%d) of the live log: ok %v, %v", seq, ok, err)
			}
			sameRecord(t, rec(i), e.Record)
		}
	}
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	segs := len(s.segs)
	s.mu.Unlock()
	if segs < 3 {
		t.Fatalf("%d segments: the test needs rolls", segs)
	}
	// Backward: every one again, in order, then one behind.
	for _, i := range []int{5, 100, 7, 199, 0} {
		e, ok, err := c.Read(seqs[i])
		if err != nil || !ok || e.Seq != seqs[i] {
			t.Fatalf("Read(%d): %v %v %v", seqs[i], e.Seq, ok, err)
		}
		sameRecord(t, rec(i), e.Record)
	}
	// A read that fails is an error, and the next succeeds.
	ffs.failOpen.Store(true)
	if _, _, err := c.Read(seqs[150]); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Read with a failing open: %v, want EIO", err)
	}
	ffs.failOpen.Store(false)
	if e, ok, err := c.Read(seqs[150]); err != nil || !ok {
		t.Fatalf("Read after the fault: %v %v", ok, err)
	} else {
		sameRecord(t, rec(150), e.Record)
	}
	// Acknowledge the first half: their segments go, and are not found.
	for _, q := range seqs[:100] {
		s.Ack(q)
	}
	if err := s.maintain(false); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Read(seqs[0]); err != nil || ok {
		t.Fatalf("Read of a deleted segment's record: ok %v, %v", ok, err)
	}
	if e, ok, err := c.Read(seqs[199]); err != nil || !ok {
		t.Fatalf("Read after the deletion: %v %v", ok, err)
	} else {
		sameRecord(t, rec(199), e.Record)
	}
	s.Close()
	if _, _, err := c.Read(seqs[199]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
}
