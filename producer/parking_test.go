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
	// Parked for 1.5 s of a 2 s DeliveryTimeout: counted, the record fails
	// at 2 s; given a fresh DeliveryTimeout when it moves, at 3.5 s or
	// later. The bound below lies between, with a second of slack for a
	// loaded machine.
	const dt, parked = 2 * time.Second, 1500 * time.Millisecond
	p := newProducer(t, c, Config{Linger: -1, RequestTimeout: 300 * time.Millisecond, DeliveryTimeout: dt})
	start := time.Now()
	f := p.Send(context.Background(), &Record{Topic: "later", Value: []byte("v")})
	time.Sleep(parked)
	require.NoError(t, c.CreateTopic("later", 1))
	select {
	case <-f.Done():
	case <-time.After(3 * dt):
		t.Fatal("no outcome after three DeliveryTimeouts")
	}
	took := time.Since(start)
	_, err := f.Wait(context.Background())
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, took, dt+time.Second, "the record failed %v after Send, DeliveryTimeout is %v", took, dt)
}
