package interop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/spool"
)

// TestSamsaSpoolExactlyOnce runs the spool's exactly-once mode against
// kfake and the test broker (both transaction versions): a producer
// commits records; a copy of its directory taken before its acks reached
// the position file (what a crash right after the commits leaves) is
// opened by a second producer, which fences the first, finds the records
// committed (duplicates skipped) and does not send them again; a
// read_committed kgo consumer then sees every record exactly once.
func TestSamsaSpoolExactlyOnce(t *testing.T) {
	for _, cl := range txnClusters {
		t.Run(cl.name, func(t *testing.T) { testSamsaSpoolExactlyOnce(t, cl) })
	}
}

// TestRealKafkaSpoolExactlyOnce is TestSamsaSpoolExactlyOnce against
// Apache Kafka (at the cluster's transaction.version; skipped without
// one, see realkafka_helpers_test.go).
func TestRealKafkaSpoolExactlyOnce(t *testing.T) {
	c := realKafka(t)
	testSamsaSpoolExactlyOnce(t, realKafkaTxn(t, c, nil))
}

func testSamsaSpoolExactlyOnce(t *testing.T, cl txnCluster) {
	topic := cl.unique("spool-eos")
	addrs := cl.start(t, topic)
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	progress := cl.unique("samsa-spool-progress") // one topic for both producers
	cfg := func(dir string) producer.Config {
		return producer.Config{Linger: 2 * time.Millisecond, Spool: &producer.SpoolConfig{
			Dir: dir, Sync: spool.SyncNone,
			// The acks stay out of the position file until
			// Close: the copy sees the records unacknowledged.
			SyncInterval:   time.Hour,
			ExactlyOnce:    true,
			ProgressTopic:  progress,
			CommitInterval: 10 * time.Millisecond,
		}}
	}
	a := cl.producer(t, addrs, cfg(dirA))
	const n = 100
	var committed []string
	fs := make([]*producer.Future, n)
	for i := range fs {
		v := fmt.Sprintf("t0-%d", i)
		committed = append(committed, v)
		fs[i] = a.Send(context.Background(), &producer.Record{Topic: topic, Key: []byte{byte(i % 7)}, Value: []byte(v)})
	}
	ctx := testContext(t)
	for i, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
	}
	copyDirFiles(t, dirA, dirB)
	require.NoError(t, a.Close(ctx))

	b := cl.producer(t, addrs, cfg(dirB))
	for i := range 50 {
		v := fmt.Sprintf("t1-%d", i)
		committed = append(committed, v)
		_, err := b.Send(context.Background(), &producer.Record{Topic: topic, Key: []byte{byte(i % 7)}, Value: []byte(v)}).Wait(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(n), b.SpoolExactlyOnceMetrics().DuplicatesSkipped, "the copy's records were committed: skipped")
	require.NoError(t, b.Close(ctx))
	requireCommitted(t, readValues(t, addrs, topic, len(committed), kgo.ReadCommitted()), committed)
}

// copyDirFiles copies the regular files of src into a new directory dst.
func copyDirFiles(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(dst, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		in.Close()
		require.NoError(t, out.Close())
	}
}
