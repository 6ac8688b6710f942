package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// A batch of transaction N expires in flight; Abort(N) sends EndTxn while
// the Produce is still in flight; transaction N+1 adds the same partition
// with the same epoch; the late Produce then lands in N+1 and commits.
func TestTxnLateProduceStaysOutOfNextTxn(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var produces atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 19}) // NOT_ENOUGH_REPLICAS: retried
	second := func(int32, kmsg.Request) bool { return produces.Add(1) == 1 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Match: second, Delay: 900 * time.Millisecond})
	p := newProducer(t, c, Config{TransactionalID: "tx", Linger: -1, RequestTimeout: time.Second, DeliveryTimeout: time.Second,
		RetryBackoff: 400 * time.Millisecond, RetryBackoffMax: 400 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted-N")}).Wait(ctx)
	t.Logf("N's record: %v", err)
	require.Error(t, err)
	t.Logf("abort: %v", p.AbortTransaction(ctx))
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("committed-N+1")}).Wait(ctx)
	t.Logf("N+1's record: %v", err)
	t.Logf("commit: %v", p.CommitTransaction(ctx))
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	for _, r := range recs {
		t.Logf("offset %d value %q control %v key %x epoch %d seq %d", r.Offset, r.Value, r.Control, r.Key, r.ProducerEpoch, r.Sequence)
	}
	aborted := -1
	for i, r := range recs {
		if string(r.Value) == "aborted-N" && !r.Control {
			aborted = i
		}
		if aborted >= 0 && r.Control {
			require.Equal(t, byte(0), r.Key[len(r.Key)-1], "the record of aborted transaction N was committed by N+1's marker")
			break
		}
	}
}
