package producer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Tests of splitting a batch the broker finds too large
// (MESSAGE_TOO_LARGE); TestTooLargeBatchesAreSplit is in idempotence_test.go.

// TestSplitHalvesExpireAfterDeliveryTimeout: the halves of a batch split
// after MESSAGE_TOO_LARGE are not in expireQ (the original batch's entry dies
// with its generation), so when their broker becomes unreachable nothing
// expires them: their futures must still fail with ErrDeliveryTimeout.
func TestSplitHalvesExpireAfterDeliveryTimeout(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("split", 1))
	p := newProducer(t, c, Config{
		Linger: 50 * time.Millisecond, RequestTimeout: 300 * time.Millisecond,
		DeliveryTimeout: time.Second, RetryBackoff: 200 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond,
	})
	var produces atomic.Int32
	count := func(int32, kmsg.Request) bool { produces.Add(1); return false }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: count})
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 10}) // MESSAGE_TOO_LARGE: split
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, ErrorCode: 19})           // NOT_ENOUGH_REPLICAS: retry with backoff
	var fs []*Future
	for i := range 10 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "split", Value: []byte(fmt.Sprint(i))}))
	}
	require.True(t, waitFor(5*time.Second, func() bool { return produces.Load() >= 2 }), "the halves were sent")
	require.NoError(t, c.StopBroker(0)) // the only broker: no dial, no metadata, no answer from now on
	for i, f := range fs {
		select {
		case <-f.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d: not completed 5s after its 1s DeliveryTimeout", i)
		}
		_, err := f.Wait(context.Background())
		require.ErrorIs(t, err, ErrDeliveryTimeout, "record %d", i)
	}
}

// TestSplitSucceedsWithAFullPool: a full buffer pool is the normal state
// under back-pressure (Send waits in MaxBlock); a batch the broker finds too
// large must still be split and delivered then, not failed with
// MESSAGE_TOO_LARGE because split could not take pool memory at once (the
// Java client builds split batches outside the pool).
func TestSplitSucceedsWithAFullPool(t *testing.T) {
	c := newCluster(t, testbroker.Config{MaxMessageBytes: 3000})
	require.NoError(t, c.CreateTopic("split", 1))
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, Linger: time.Millisecond, MaxInFlight: 1})
	var fs []*Future
	for i := range 2000 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "split", Value: []byte(fmt.Sprintf("%04d-%0100d", i, 0))}))
	}
	waitAll(t, fs)
}
