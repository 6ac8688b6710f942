// Package metadata keeps the cluster metadata a producer needs: brokers,
// and for each topic in use its partitions, leaders and leader epochs.
//
// It is the layer package producer is built on, and it stands alone: a
// program that wants to know where a topic's partitions lead, or to send a
// Kafka request (from github.com/twmb/franz-go/pkg/kmsg) to some broker of
// the cluster, can use a Client without a producer. Users of package
// producer do not need it; a producer runs its own Client.
//
// # Use
//
// New takes the bootstrap addresses and the connection settings (TLS, SASL,
// timeouts, Dialer); every field has a default. Want names the topics to
// follow, Snapshot reads what is known, Updates says when it changed, and
// Close stops the client:
//
//	md, err := metadata.New(metadata.Config{Bootstrap: []string{"localhost:9092"}})
//	...
//	md.Want("orders")
//	<-md.Updates()
//	leader, ok := md.Snapshot().Leader("orders", 0)
//
// A topic's error in the snapshot (Topic.Err, Partition.Err) is a
// *kerr.Error; Err says why the last fetch reached no broker. Connection
// errors wrap ErrAuthentication when TLS or SASL fails.
//
// # Snapshots
//
// The cache is an immutable *Snapshot behind an atomic pointer. Snapshot()
// is one atomic load and lookups in it allocate nothing, so the send path
// never locks. A new snapshot is published after every fetch (and when idle
// topics are dropped); Updates() then receives, coalesced.
//
// # Wanted topics
//
// A producer fetches only the topics it uses, by name, with
// AllowAutoTopicCreation as Config says (the producer sets it, as Java
// does, unless told not to or unless it creates topics itself with
// CreateTopics). Want(topic) adds a topic (non-blocking; no
// allocation when already wanted); the refresh goroutine fetches it at
// once, or, while other topics wait for metadata, with them (at most
// RetryBackoff after their last fetch). A topic that is not usable yet
// (UNKNOWN_TOPIC_OR_PARTITION, no partitions, LEADER_NOT_AVAILABLE) stays
// wanted and waits; its Topic in the snapshot carries the error,
// FirstWanted and Attempts so that the producer can fail records parked
// for it with an error that names it. The waiting topics share one
// schedule, and each fetch asks for all of them, so the rate of Metadata
// requests does not grow with their number: after 10ms, 20ms, 40ms ... up
// to RetryBackoffMax, with ±20% jitter, starting over when one of them
// becomes usable; with only non-retriable topic errors
// (TOPIC_AUTHORIZATION_FAILED) waiting, every RetryBackoffMax.
// Touch(topic) marks use; a topic neither Wanted nor Touched for MaxIdle is
// dropped.
//
// Pending tells which broker the refresh goroutine's request is waiting
// for, and since when: a broker that accepts the connection and never
// answers fails the request only after twice RequestTimeout, and a caller
// with a shorter deadline (the producer's MaxBlock) can name it meanwhile.
//
// # Refreshing
//
// Every MaxAge all wanted topics are fetched again; Trigger() asks for that
// sooner (after NOT_LEADER_OR_FOLLOWER, for example), at most once per
// RetryBackoff. Leader-epoch rule: a partition answered with an older
// LeaderEpoch than the one we hold comes from a stale broker and is
// ignored; a retriable error for a topic we hold as usable is ignored up to
// three times in a row for the same reason.
//
// # Brokers and bootstrap
//
// Requests go to the known broker used last while its connection lives,
// else to the known brokers in random order, else to the Bootstrap
// addresses in random order. Addresses are dialed by name, so DNS is
// resolved again on every dial: when every known broker has failed, the
// bootstrap names are resolved afresh (KIP-899's rebootstrap). A fetch also
// rebootstraps, skipping the known brokers, when RebootstrapTrigger has
// passed without an answer and at once after REBOOTSTRAP_REQUIRED
// (KIP-1102); a rebootstrap closes every connection, the known brokers'
// included (as Java's), and dials the bootstrap names again. A bootstrap
// address is no known node, even at a known broker's address: its
// connections are kept apart and dialed without an identity to check
// (below); the cluster id of its answers is checked. DisableRebootstrap (Java's
// metadata.recovery.strategy=none) uses the Bootstrap addresses only until
// an answer lists brokers. When nothing answers, the fetch is retried with
// exponential backoff from RetryBackoff to RetryBackoffMax. Do and
// DoController use the same connections for other requests
// (InitProducerId, CreateTopics).
//
// # Cluster identity
//
// The client stays with the cluster of its first answer (ClusterID): an
// answer naming another cluster id is never applied, and Err wraps
// ErrClusterMismatch naming both. Unless DisableClusterCheck, a connection
// to a known broker names that cluster and the node in ApiVersions v5
// (KIP-1242), and a broker of Kafka 4.4+ that is not that node of that
// cluster is refused before any request. Once the cluster id is known, Do
// and DoController write only on connections known to reach it: the
// broker identified itself so, or answered a Metadata request (one for no
// topic, sent first when needed) with the client's cluster id.
//
// # Goroutines
//
// New starts one refresh goroutine and does no network I/O; Close stops it
// and closes the connections.
package metadata
