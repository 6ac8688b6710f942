package producer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestInitProducerIDAnswerWithoutIDIsRetriedWithBackoff: an InitProducerId
// answer with no error but ProducerId -1 (a buggy broker or proxy) is a
// failed attempt, retried with backoff, and the records' error names
// InitProducerId. It used to be taken as success (handleProducerID): the
// producer asked again at once on every IO loop turn, about 28 000
// requests a second.
func TestInitProducerIDAnswerWithoutIDIsRetriedWithBackoff(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var inits atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, After: true, Rewrite: func(resp kmsg.Response) {
		inits.Add(1)
		r := resp.(*kmsg.InitProducerIDResponse)
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = 0, -1, -1
	}})
	p := newProducer(t, c, Config{DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond})
	err := sendTo(t, p, "t", 0, 10*time.Second)
	require.Error(t, err)
	t.Logf("record failed with: %v", err)
	n := inits.Load()
	// With a 100-200 ms backoff, one second allows about 8 attempts.
	require.LessOrEqual(t, n, int32(20), "%d InitProducerId requests in about a second", n)
	require.Contains(t, err.Error(), "InitProducerId", "the record's error names the cause")
}

// TestTxnInitProducerIDAnswerWithoutIDIsRetriedWithBackoff: the same on
// the transactional path (txnClient.initProducerID, txn_coordinator.go),
// which used to ask again at once, without backoff.
func TestTxnInitProducerIDAnswerWithoutIDIsRetriedWithBackoff(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var inits atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{22}, After: true, Rewrite: func(resp kmsg.Response) {
		inits.Add(1)
		r := resp.(*kmsg.InitProducerIDResponse)
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = 0, -1, -1
	}})
	p := newProducer(t, c, Config{TransactionalID: "tx", DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond})
	require.NoError(t, p.BeginTransaction())
	err := sendTo(t, p, "t", 0, 10*time.Second)
	t.Logf("record: %v", err)
	n := inits.Load()
	require.LessOrEqual(t, n, int32(20), "%d InitProducerId requests in about a second", n)
}
