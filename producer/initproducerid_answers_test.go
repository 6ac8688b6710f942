package producer

import (
	"strconv"
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
// InitProducerId (the idempotent producer's; the transactional one,
// txnClient.initProducerID, retries inside its request and the record
// expires without that cause). It used to be taken as success: the
// producer asked again at once, about 28 000 requests a second.
func TestInitProducerIDAnswerWithoutIDIsRetriedWithBackoff(t *testing.T) {
	for _, txnID := range []string{"", "tx"} {
		t.Run("transactional="+strconv.FormatBool(txnID != ""), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			var inits atomic.Int32
			c.Intercept(testbroker.Interceptor{Keys: []int16{22}, After: true, Rewrite: func(resp kmsg.Response) {
				inits.Add(1)
				r := resp.(*kmsg.InitProducerIDResponse)
				r.ErrorCode, r.ProducerID, r.ProducerEpoch = 0, -1, -1
			}})
			p := newProducer(t, c, Config{TransactionalID: txnID, DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
				RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond})
			if txnID != "" {
				require.NoError(t, p.BeginTransaction())
			}
			err := sendTo(t, p, "t", 0, 10*time.Second)
			t.Logf("record failed with: %v", err)
			n := inits.Load()
			// With a 100-200 ms backoff, one second allows about 8 attempts.
			require.LessOrEqual(t, n, int32(20), "%d InitProducerId requests in about a second", n)
			if txnID == "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), "InitProducerId", "the record's error names the cause")
			}
		})
	}
}
