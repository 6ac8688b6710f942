package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Tests of parked records (sent before their topic's partitions were
// known) beyond memory (parking_memory_test.go) and order
// (TestParkedRecordsKeepSendOrder in producer_test.go).

// TestDeliveryTimeoutCountsParkedTime: DeliveryTimeout bounds the time from
// Send to the outcome; a record that waited parked for its topic must not
// get a fresh DeliveryTimeout when it moves into a batch.
func TestDeliveryTimeoutCountsParkedTime(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true}) // no Produce is ever answered
	const dt = time.Second
	p := newProducer(t, c, Config{Linger: -1, RequestTimeout: 300 * time.Millisecond, DeliveryTimeout: dt})
	start := time.Now()
	f := p.Send(context.Background(), &Record{Topic: "later", Value: []byte("v")})
	time.Sleep(700 * time.Millisecond)
	require.NoError(t, c.CreateTopic("later", 1))
	select {
	case <-f.Done():
	case <-time.After(3 * dt):
		t.Fatal("no outcome after three DeliveryTimeouts")
	}
	took := time.Since(start)
	_, err := f.Wait(context.Background())
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, took, dt+400*time.Millisecond, "the record failed %v after Send, DeliveryTimeout is %v", took, dt)
}
