package interop

import (
	"testing"
)

// realKafkaTxn is the 1-node Apache Kafka cluster as a txnCluster: topics
// of 3 partitions created in it, and names made unique (the cluster
// outlives a test run).
func realKafkaTxn(t *testing.T) txnCluster {
	c := realKafka(t)
	return txnCluster{
		name: "kafka",
		start: func(t *testing.T, topics ...string) []string {
			for _, topic := range topics {
				c.createTopic(t, topic, 3, 1, nil)
			}
			return c.addrs
		},
		unique: uniqueTopic,
	}
}

// TestRealKafkaTransactions runs the transaction tests of kfake and the
// test broker (samsa_txn_test.go) against Apache Kafka itself: committed
// and aborted transactions (one aborted after some of its records reached
// the broker), read back by kgo at read_committed (exactly the committed
// records, once each, in Send order per partition) and read_uncommitted
// (every data record written); fencing by a second producer with the
// same transactional id; and Close aborting an open transaction.
func TestRealKafkaTransactions(t *testing.T) {
	cl := realKafkaTxn(t)
	t.Run("commit and abort", func(t *testing.T) { testSamsaTransactions(t, cl) })
	t.Run("fencing", func(t *testing.T) { testSamsaTransactionFencing(t, cl) })
	t.Run("close aborts", func(t *testing.T) { testSamsaCloseAbortsOpenTransaction(t, cl) })
}
