package interop

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaTopicAuthorizationFailed: on the 1-node cluster started with
// -acl, User:ANONYMOUS (the PLAINTEXT listener) may not write
// SAMSA_KAFKA_DENIED_TOPIC. Its records must fail at once, well before
// DeliveryTimeout, with TOPIC_AUTHORIZATION_FAILED as a *KafkaError that is
// not retriable, not wrapped in ErrDeliveryTimeout (the producer did not
// keep retrying) and not ErrOutcomeUnknown (nothing was written). A record
// for another topic, sent by the same producer at the same time, is still
// delivered.
func TestRealKafkaTopicAuthorizationFailed(t *testing.T) {
	c := realKafka(t)
	denied := realEnv(t, "SAMSA_KAFKA_DENIED_TOPIC", "the 1-node cluster was started without -acl")
	const n = 50
	const deliveryTimeout = 40 * time.Second
	allowed := uniqueTopic("samsa-allowed")
	c.createTopic(t, allowed, 1, 1, nil)
	p := newSamsaProducer(t, c.addrs, producer.Config{DeliveryTimeout: deliveryTimeout})
	ctx := testContext(t)
	start := time.Now()
	futs := make([]*producer.Future, n)
	for i, r := range makeSamsaRecords(denied, n) {
		futs[i] = p.Send(ctx, r)
	}
	ok := p.Send(ctx, &producer.Record{Topic: allowed, Value: []byte("allowed")})
	for i, f := range futs {
		_, err := f.Wait(ctx)
		elapsed := time.Since(start)
		require.Error(t, err, "record %d for %s was delivered", i, denied)
		if i == 0 {
			t.Logf("the first record failed after %v: %v", elapsed.Round(time.Millisecond), err)
		}
		require.Less(t, elapsed, deliveryTimeout/4, "record %d failed only after %v", i, elapsed)
		var ke *producer.KafkaError
		require.True(t, errors.As(err, &ke), "record %d: %v is not a *producer.KafkaError", i, err)
		assert.Equal(t, int16(29), ke.Code, "record %d: %v", i, err)
		assert.Equal(t, "TOPIC_AUTHORIZATION_FAILED", ke.Name)
		assert.False(t, producer.IsRetriable(err), "record %d: %v is retriable", i, err)
		assert.NotErrorIs(t, err, producer.ErrDeliveryTimeout, "record %d", i)
		assert.NotErrorIs(t, err, producer.ErrOutcomeUnknown, "record %d", i)
		assert.Contains(t, err.Error(), denied, "record %d's error does not name the topic", i)
	}
	_, err := ok.Wait(ctx)
	require.NoError(t, err, "the record for %s", allowed)
	require.NoError(t, p.Close(ctx))
}
