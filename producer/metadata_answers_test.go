package producer

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestHugeProduceThrottleFailsAtDeliveryTimeout: a Produce answer with
// throttle_time_ms = MaxInt32 holds the connection's later writes (KIP-219,
// honoured as Java does); the records behind it fail with
// ErrDeliveryTimeout at their deadline, not in 24 days, and Close returns
// within its context.
func TestHugeProduceThrottleFailsAtDeliveryTimeout(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		resp.(*kmsg.ProduceResponse).ThrottleMillis = math.MaxInt32
	}})
	const delivery = 2 * time.Second
	p := newProducer(t, c, Config{DeliveryTimeout: delivery, RequestTimeout: time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second), "the throttled answer itself")
	start := time.Now()
	err := sendTo(t, p, "t", 0, 10*time.Second)
	took := time.Since(start)
	t.Logf("after %v: %v", took, err)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, took, delivery+2*time.Second)
	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	cerr := p.Close(ctx)
	took = time.Since(start)
	t.Logf("Close after %v: %v", took, cerr)
	require.Less(t, took, 3*time.Second, "Close is bounded by its context")
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	_, err = f.Wait(wctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the record buffered at Close completes: %v", err)
}
