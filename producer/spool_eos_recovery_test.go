package producer

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// eosCrashAfterCommit: producer A on dirA sends warm (committed and
// acked), then calls between, then sends 5 more records; once the
// transaction carrying those committed, before its acks to the spool,
// dirA is copied to dirB (what a crash there leaves). A is then closed.
// It returns dirB.
func eosCrashAfterCommit(t *testing.T, c *testbroker.Cluster, between func()) string {
	t.Helper()
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	var armed, copied atomic.Bool
	eosTestHook = func(stage string) {
		if stage == "committed" && armed.Load() && copied.CompareAndSwap(false, true) {
			copyDir(t, dirA, dirB)
		}
	}
	t.Cleanup(func() { eosTestHook = nil })
	a := eosProducer(t, c, dirA, func(cfg *Config) { cfg.Spool.CommitInterval = 50 * time.Millisecond })
	waitAll(t, []*Future{a.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	if between != nil {
		between()
	}
	armed.Store(true)
	var fs []*Future
	for i := range 5 {
		fs = append(fs, a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("r", i))}))
	}
	waitAll(t, fs)
	require.True(t, copied.Load())
	require.NoError(t, a.Close(context.Background()))
	eosTestHook = nil
	return dirB
}

// assertCommittedOnce fails for each value of topic t's partition 0 that
// read_committed sees more than once.
func assertCommittedOnce(t *testing.T, c *testbroker.Cluster, want int) {
	t.Helper()
	values, _ := committedRecords(t, c, "t", 0)
	seen := map[string]int{}
	for _, v := range values {
		seen[v]++
	}
	for v, k := range seen {
		assert.Equal(t, 1, k, "record %s committed %d times (a duplicate)", v, k)
	}
	assert.Len(t, seen, want, "records committed: %v", values)
}

// TestSpoolExactlyOnceProgressReadWaitsForOtherTransactions: spools share
// the progress topic's partition; another producer's transaction open on
// it holds the last stable offset below this spool's last committed
// progress record. The restart must read past it (waiting for the other
// transaction to end), not take an older progress and send committed
// records again (issue 34 review, H1).
func TestSpoolExactlyOnceProgressReadWaitsForOtherTransactions(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var other *Producer
	dirB := eosCrashAfterCommit(t, c, func() {
		other = newProducer(t, c, Config{TransactionalID: "samsa-spool-other"})
		require.NoError(t, other.BeginTransaction())
		f := other.Send(context.Background(), &Record{Topic: DefaultSpoolProgressTopic, Key: []byte("other"), Value: encodeProgress(7)})
		require.NoError(t, other.Flush(context.Background()))
		waitAll(t, []*Future{f})
	})
	b := eosProducer(t, c, dirB, nil)
	after := b.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})
	time.Sleep(300 * time.Millisecond)
	select {
	case <-after.Done():
		_, _, err := after.Result()
		t.Fatalf("the restart completed a Send while the progress read was blocked by another transaction: %v", err)
	default:
	}
	require.NoError(t, other.CommitTransaction(context.Background()))
	waitAll(t, []*Future{after})
	assert.EqualValues(t, 6, b.SpoolExactlyOnceMetrics().DuplicatesSkipped, "warm and r0..r4 were committed by A")
	require.NoError(t, b.Close(context.Background()))
	assertCommittedOnce(t, c, 7)
}

// TestSpoolExactlyOnceProgressReadRetriesEmptyAnswers: Fetch answers
// without records below the end (as Kafka answers a throttled fetch,
// KIP-219) are fetched again; they never end the progress read early
// (issue 34 review, H2).
func TestSpoolExactlyOnceProgressReadRetriesEmptyAnswers(t *testing.T) {
	cases := []struct {
		name     string
		times    int
		throttle int32
	}{
		{"one throttled answer", 1, 100},
		{"three unthrottled empty answers", 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dirB := eosCrashAfterCommit(t, c, nil)
			c.Intercept(testbroker.Interceptor{Keys: []int16{1}, Times: tc.times, After: true,
				Rewrite: func(resp kmsg.Response) {
					r := resp.(*kmsg.FetchResponse)
					r.ThrottleMillis = tc.throttle
					for i := range r.Topics {
						for j := range r.Topics[i].Partitions {
							r.Topics[i].Partitions[j].RecordBatches = nil
						}
					}
				}})
			b := eosProducer(t, c, dirB, nil)
			waitAll(t, []*Future{b.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})})
			assert.EqualValues(t, 6, b.SpoolExactlyOnceMetrics().DuplicatesSkipped, "warm and r0..r4 were committed by A")
			require.NoError(t, b.Close(context.Background()))
			assertCommittedOnce(t, c, 7)
		})
	}
}
