package interop

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaTransactions runs samsa's transactions against Apache Kafka
// itself: committed and aborted transactions (one aborted after some of
// its records reached the broker), read back by kgo at read_committed
// (exactly the committed records, once each, in Send order per partition)
// and read_uncommitted (every data record written); then a second producer
// with the same transactional id fences the first.
func TestRealKafkaTransactions(t *testing.T) {
	c := realKafka(t)
	topic := uniqueTopic("samsa-txn")
	c.createTopic(t, topic, 3, 1, nil)
	id := uniqueTopic("samsa-txn-id")
	ctx := realContext(t, 3*time.Minute)

	p := newTxnProducer(t, c.addrs, id)
	_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("outside")}).Wait(ctx)
	require.ErrorIs(t, err, producer.ErrNoTransaction, "a record outside a transaction")

	var committed []string
	written := 0
	for i := range 6 {
		require.NoError(t, p.BeginTransaction())
		var futs []*producer.Future
		var vals []string
		for j := range 50 {
			v := fmt.Sprintf("t%d-%d", i, j)
			vals = append(vals, v)
			futs = append(futs, p.Send(ctx, &producer.Record{Topic: topic, Key: []byte(fmt.Sprint(j % 7)), Value: []byte(v)}))
		}
		commit := i%2 == 0
		if commit {
			require.NoError(t, p.CommitTransaction(ctx), "transaction %d", i)
			committed = append(committed, vals...)
		} else {
			if i == 3 {
				_, _ = futs[len(futs)-1].Wait(ctx) // some of it is on the broker before the abort
			}
			require.NoError(t, p.AbortTransaction(ctx), "transaction %d", i)
		}
		for j, f := range futs {
			_, err := f.Wait(ctx)
			switch {
			case commit:
				require.NoError(t, err, "transaction %d record %d", i, j)
			case err != nil:
				require.ErrorIs(t, err, producer.ErrTransactionAborted, "transaction %d record %d", i, j)
			}
			if err == nil {
				written++
			}
		}
	}
	requireCommitted(t, readValues(t, c.addrs, topic, len(committed), kgo.ReadCommitted()), committed)
	total := len(allValues(readValues(t, c.addrs, topic, written, kgo.ReadUncommitted())))
	require.Equal(t, written, total, "read_uncommitted sees every data record written")

	// Fencing: a second producer with the same id takes over.
	commitOne(ctx, t, newTxnProducer(t, c.addrs, id), topic, "t9-0")
	require.NoError(t, p.BeginTransaction())
	zombie := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("t9-1")})
	err = p.CommitTransaction(ctx)
	require.ErrorIs(t, err, producer.ErrProducerFenced)
	require.True(t, producer.IsFatal(err), "fenced is fatal: %v", err)
	_, err = zombie.Wait(ctx)
	require.Error(t, err, "the fenced producer's record")
	got := allValues(readValues(t, c.addrs, topic, len(committed)+1, kgo.ReadCommitted()))
	require.Contains(t, got, "t9-0")
	require.False(t, slices.Contains(got, "t9-1"), "the fenced producer's record is not committed")
}
