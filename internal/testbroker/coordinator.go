package testbroker

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator placement, for FindCoordinator and for the APIs that must
// reach a coordinator (the transaction APIs, TxnOffsetCommit, OffsetFetch).
//
// Kafka keeps group offsets in __consumer_offsets and transaction state in
// __transaction_state, 50 partitions each by default, and a key's
// coordinator is the leader of partition abs(key.hashCode()) % 50 (Java's
// String.hashCode). The test broker computes the same partition and places
// partition p on broker p % brokers, or on the next running broker after it
// when that one is stopped, as a leader election would move it; the state
// itself is shared by the brokers ("replicated"), so a moved coordinator
// keeps every transaction and offset. [Cluster.MoveCoordinator] pins a key
// elsewhere. A request for a key this broker does not coordinate gets
// NOT_COORDINATOR.

// Coordinator key types (FindCoordinator's KeyType).
const (
	// CoordinatorGroup is the key type of consumer groups.
	CoordinatorGroup int8 = 0
	// CoordinatorTransaction is the key type of transactional ids.
	CoordinatorTransaction int8 = 1
)

// coordinatorStatePartitions is offsets.topic.num.partitions and
// transaction.state.log.num.partitions (both 50 by default).
const coordinatorStatePartitions = 50

type coordinatorKey struct {
	keyType int8
	key     string
}

// coordinators holds the keys pinned by MoveCoordinator.
type coordinators struct {
	mu    sync.Mutex
	moved map[coordinatorKey]int32
}

// javaStringHash is Java's String.hashCode over the key's UTF-16 units.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// statePartition is Kafka's partitionFor: Utils.abs(hashCode) % 50.
func statePartition(key string) int32 {
	h := javaStringHash(key)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % coordinatorStatePartitions
}

// coordinatorFor returns the broker coordinating key, or -1 when no broker
// runs.
func (c *Cluster) coordinatorFor(keyType int8, key string) int32 {
	c.coord.mu.Lock()
	to, ok := c.coord.moved[coordinatorKey{keyType, key}]
	c.coord.mu.Unlock()
	if ok && c.brokers[to].running() {
		return to
	}
	n := int32(len(c.brokers))
	start := statePartition(key) % n
	for i := range n {
		id := (start + i) % n
		if c.brokers[id].running() {
			return id
		}
	}
	return -1
}

// MoveCoordinator makes broker to the coordinator of key (keyType
// [CoordinatorGroup] or [CoordinatorTransaction]), as a leader election of
// its state partition would: requests for key to the old coordinator get
// NOT_COORDINATOR from now on, and clients find the new one with
// FindCoordinator. The state moves with it. If to is stopped later, key
// goes back to its computed placement. It returns [ErrUnknownBroker] or
// [ErrBrokerStopped].
func (c *Cluster) MoveCoordinator(keyType int8, key string, to int32) error {
	if to < 0 || int(to) >= len(c.brokers) {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, to)
	}
	if !c.brokers[to].running() {
		return fmt.Errorf("%w: %d", ErrBrokerStopped, to)
	}
	c.coord.mu.Lock()
	defer c.coord.mu.Unlock()
	if c.coord.moved == nil {
		c.coord.moved = make(map[coordinatorKey]int32)
	}
	c.coord.moved[coordinatorKey{keyType, key}] = to
	return nil
}

// Coordinator returns the broker that coordinates key (keyType
// [CoordinatorGroup] or [CoordinatorTransaction]), or -1 when no broker
// runs.
func (c *Cluster) Coordinator(keyType int8, key string) int32 {
	return c.coordinatorFor(keyType, key)
}

// isCoordinator reports whether broker self coordinates key.
func (c *Cluster) isCoordinator(self int32, keyType int8, key string) bool {
	return c.coordinatorFor(keyType, key) == self
}

// handleFindCoordinator answers one key (v0 to v3; v0 has no key type and
// means a group) or a batch of keys (v4+, KIP-699). Key types other than
// group and transaction get INVALID_REQUEST, as does an empty
// transactional id; COORDINATOR_NOT_AVAILABLE when no broker runs.
func handleFindCoordinator(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		keyType := req.CoordinatorType
		if req.Version == 0 {
			keyType = CoordinatorGroup
		}
		switch {
		case keyType != CoordinatorGroup && keyType != CoordinatorTransaction:
			return -1, "", -1, ecInvalidRequest, msgPtr(fmt.Sprintf("unsupported coordinator key type %d", keyType))
		case keyType == CoordinatorTransaction && key == "":
			return -1, "", -1, ecInvalidRequest, msgPtr("empty transactional id")
		}
		id := cn.c.coordinatorFor(keyType, key)
		if id < 0 {
			return -1, "", -1, ecCoordinatorNotAvailable, msgPtr("no broker is running")
		}
		host, port = cn.c.brokers[id].advertised(cn)
		return id, host, port, 0, nil
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key = k
			rc.NodeID, rc.Host, rc.Port, rc.ErrorCode, rc.ErrorMessage = find(k)
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return result{resp: resp}
	}
	var msg *string
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, msg = find(req.CoordinatorKey)
	if req.Version >= 1 {
		resp.ErrorMessage = msg
	}
	return result{resp: resp}
}
