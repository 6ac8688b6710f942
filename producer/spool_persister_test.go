package producer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/spool"
)

// A Future queued on the persister after its last fsync (here: its
// goroutine had already exited) has Persisted closed by stop, whose final
// fsync covers it, as spool.Close's would.
func TestSpoolPersisterStopClosesQueuedPersisted(t *testing.T) {
	sp, err := spool.Open(spool.Options{Dir: t.TempDir(), Sync: spool.SyncAlways})
	require.NoError(t, err)
	defer sp.Close()
	ps := newPersister(sp, spool.SyncAlways)
	close(ps.done) // the goroutine ended before the records below were queued
	var chs []chan struct{}
	for range 3 {
		seq, err := sp.Write(context.Background(), &spool.Record{Topic: "t", Value: []byte("x")})
		require.NoError(t, err)
		ch := make(chan struct{})
		ps.add(seq, ch)
		chs = append(chs, ch)
	}
	ps.stop()
	for i, ch := range chs {
		select {
		case <-ch:
		default:
			t.Fatalf("Persisted of record %d still open after stop", i)
		}
	}
	require.Equal(t, uint64(3), sp.Persisted())
}
