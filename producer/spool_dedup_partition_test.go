package producer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// A record written while its topic's partitions were unknown (-1) is
// replayed through the partitioner: after a crash that lost its ack, the
// copy can land on another partition: spool.Deduper, fed all partitions,
// still drops it (it knows a spool ID's sequences across partitions).
func TestSpoolReplayOfParkedRecordDedupedAcrossPartitions(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 8))
	dir := t.TempDir()
	a := spoolProducer(t, c, dir, func(cfg *Config) { cfg.Spool.SyncInterval = time.Hour })
	var fs []*Future
	for i := range 20 {
		f := a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("v", i))})
		<-f.Persisted()
		fs = append(fs, f)
	}
	waitAll(t, fs)
	// "crash": copy the directory as it is on disk now (acks not yet in the position file).
	dir2 := t.TempDir()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir2, e.Name()), b, 0o644))
	}
	done := make(chan struct{}, 100)
	b := spoolProducer(t, c, dir2, func(cfg *Config) {
		cfg.Spool.RecoveryHook = func(uint64, RecordMetadata, error) { done <- struct{}{} }
	})
	for range 20 {
		<-done
	}
	require.NoError(t, b.Flush(context.Background()))
	var d spool.Deduper
	unique, total := 0, 0
	for part := range int32(8) {
		recs, err := c.Records("t", part)
		require.NoError(t, err)
		for _, r := range recs {
			total++
			var hv []byte
			for _, h := range r.Headers {
				if h.Key == spool.HeaderKey {
					hv = h.Value
				}
			}
			dup, err := d.Duplicate("t", part, hv)
			require.NoError(t, err)
			if !dup {
				unique++
			}
		}
	}
	require.Greater(t, total, 20, "the crash left no copies: the test proves nothing")
	require.Equal(t, 20, unique)
}
