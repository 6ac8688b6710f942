package spool_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/spool"
)

// TestFaultHookSeesEveryOperation: a hook registered with
// internal/spoolfault is called at each named file operation of a spool
// (the crash test on real Kafka kills the process there), a segment write
// is torn at the hook (half of it on disk), and the position file is not
// yet renamed when PositionRename fires.
func TestFaultHookSeesEveryOperation(t *testing.T) {
	entrySize := measureEntrySize(t)
	dir := filepath.Join(t.TempDir(), "spool")
	faults, unregister := spoolfault.Register(dir)
	defer unregister()
	var mu sync.Mutex
	seen := map[spoolfault.Op]int{}
	tornWrites, renameBeforeMove := 0, 0
	faults.SetHook(func(op spoolfault.Op, name string) {
		mu.Lock()
		defer mu.Unlock()
		seen[op]++
		switch op {
		case spoolfault.SegmentWrite:
			// Every entry here is 600+ bytes: half written is not a
			// whole number of entries of the sizes written so far.
			if fi, err := os.Stat(name); err == nil && fi.Size()%entrySize != 0 {
				tornWrites++
			}
		case spoolfault.PositionRename:
			if _, err := os.Stat(name); err == nil { // position.tmp still there
				renameBeforeMove++
			}
		}
	})

	ctx := context.Background()
	open := func() *spool.Spool {
		s, err := spool.Open(spool.Options{Dir: dir, SyncInterval: time.Millisecond, SegmentBytes: 4 << 10, MaxBytes: 1 << 20})
		require.NoError(t, err)
		return s
	}
	s := open()
	var seqs []uint64
	for range 40 {
		seq, err := s.Append(ctx, &spool.Record{Topic: "t", Partition: 0, Value: make([]byte, 600)})
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	for _, seq := range seqs[:30] {
		s.Ack(seq)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[spoolfault.SegmentRemove] > 0 && seen[spoolfault.PositionRename] > 0
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, s.Close())

	s = open() // Open's scan and a replay read the segments
	n := 0
	for _, err := range s.Unacked() {
		require.NoError(t, err)
		n++
	}
	require.NoError(t, s.Close())
	assert.Equal(t, 10, n, "unacknowledged records after the reopen")

	mu.Lock()
	defer mu.Unlock()
	for _, op := range spoolfault.Ops {
		assert.Positive(t, seen[op], "the hook never saw %s", op)
	}
	assert.Equal(t, seen[spoolfault.SegmentWrite], tornWrites, "segment writes whose first half alone was on disk at the hook")
	assert.Equal(t, seen[spoolfault.PositionRename], renameBeforeMove, "position renames hooked before the move")
}

// measureEntrySize returns the size on disk of one entry of a record
// with a 600-byte value, measured rather than assumed from the format.
func measureEntrySize(t *testing.T) int64 {
	dir := t.TempDir()
	s, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	_, err = s.Append(context.Background(), &spool.Record{Topic: "t", Partition: 0, Value: make([]byte, 600)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".seg" {
			fi, err := e.Info()
			require.NoError(t, err)
			if fi.Size() > 0 {
				return fi.Size()
			}
		}
	}
	t.Fatal("no segment written")
	return 0
}
