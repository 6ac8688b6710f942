// Package samsatest runs a Kafka cluster inside a test process, for testing
// code that produces with samsa, in the spirit of net/http/httptest.
//
// A [Cluster] is a few brokers on loopback ports that speak the real Kafka
// protocol, so a [producer.Producer] (or any other Kafka client) is pointed
// at [Cluster.Addrs] exactly as at a real cluster. What the brokers stored is
// read back with [Cluster.Records], without a consumer, and faults are
// injected with [Cluster.Inject]:
//
//	func TestCheckout(t *testing.T) {
//		c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"orders": 3}})
//		p, err := producer.New(producer.Config{Brokers: c.Addrs()})
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer p.Close(context.Background())
//
//		// ... the code under test sends through p, then p.Flush ...
//
//		recs, err := c.Records("orders")
//		// assert on recs[i].Key, Value, Headers, Partition, Offset
//	}
//
// # Faults
//
// A [Fault] matches requests by kind ([API]) and broker, and then delays
// them, stalls them until it is removed, drops the connection, or answers
// with a Kafka error code ([ErrorCode]); once, N times or until removed.
// With AfterHandling the broker first handles the request (a Produce is
// appended) and then fails it: the ambiguous outcomes of a real cluster, a
// write that happened but was not confirmed. [Cluster.FailProduce] is the
// common case: the next N Produce requests get a code. [Cluster.StopBroker],
// [Cluster.RestartBroker] and [Cluster.MoveLeader] move partition
// leadership as a failover would.
//
// # What the cluster does
//
// Produce requests are validated as Kafka validates them (framing, CRC,
// compression, idempotent sequences, max.message.bytes) and appended to an
// in-memory log per partition; Fetch, ListOffsets, Metadata, CreateTopics,
// InitProducerId and the other APIs a producer or a simple consumer uses
// are served. Leaders are spread round-robin over the brokers, and a
// request sent to a broker that does not lead the partition gets
// NOT_LEADER_OR_FOLLOWER. Topics are created by [Config].Topics,
// [Cluster.CreateTopic], CreateTopics requests, or, with
// by the Metadata request that names them (unless
// [Config].DisableAutoTopicCreation, as Kafka's auto.create.topics.enable).
// Records are kept until [Cluster.Close]; there is no retention, no
// replication to speak of (stored records survive a broker stop), and no
// TLS or SASL. Idempotent and transactional producers work as on Kafka
// (InitProducerId, AddPartitionsToTxn, EndTxn, transaction markers):
// [Cluster.Records] returns every record with its markers (Transactional
// and Control set), [Cluster.CommittedRecords] what a read_committed
// consumer sees. The
// classic consumer group APIs that a transactional consume-transform-produce
// loop needs (JoinGroup, SyncGroup, Heartbeat, OffsetCommit) are served too.
//
// Every method is safe for concurrent use. [Cluster.Close] stops every
// goroutine the cluster started, so tests that check for leaked goroutines
// (go.uber.org/goleak) pass.
//
// The same cluster runs as a process, for kcat or clients in other
// languages:
//
//	go run github.com/samsa-go/samsa/internal/testbroker/cmd/testbroker@latest -v
//
// (-h lists its flags; -v logs every connection).
package samsatest
