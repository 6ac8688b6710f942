package testbroker

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction coordinator (KIP-98, KIP-360, KIP-588, KIP-890),
// modelled on Kafka's TransactionCoordinator and TransactionMetadata. It
// serves both transaction versions, per request version as Kafka 4.4 does
// (Config.TransactionVersion is only what ApiVersions reports):
//
//   - version 1: clients add partitions with AddPartitionsToTxn and offsets
//     with AddOffsetsToTxn, and EndTxn (v0 to v4) keeps the epoch;
//   - version 2 (KIP-890 part 2): a transactional Produce v12+ adds its
//     partition itself and TxnOffsetCommit v5+ its group, and EndTxn v5
//     bumps the epoch at every commit or abort (the markers carry the new
//     epoch, which fences the old one's late batches) and answers the new
//     producer id and epoch: a new producer id at epoch 0 once the epoch
//     is exhausted. EndTxn v5 may also abort when no transaction is open
//     (an empty abort, which bumps the epoch), and its retry with the
//     epoch before the bump gets the same answer again.
//
// Each transactional id has a producer id, an epoch, a timeout and a state:
//
//	Empty ──AddPartitions/AddOffsets/Produce v12/TxnOffsetCommit v5──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	                                      │                 PrepareAbort  ──markers──▶ CompleteAbort
//	                                      └─timeout / InitProducerId: epoch bump, PrepareAbort
//
// CompleteCommit and CompleteAbort accept a new AddPartitions (back to
// Ongoing) or InitProducerId (back to Empty). EndTxn moves to Prepare*
// and answers; the markers are then written to every partition of the
// transaction, at once (Config.TransactionMarkerDelay 0) or after the
// delay on a goroutine, and pending offsets are committed or dropped.
// While a Prepare* state lasts, InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, a repeated EndTxn and any EndTxn v5 get
// CONCURRENT_TRANSACTIONS, and so does a Produce v12+ that would add a
// partition (Kafka 4.x passes the coordinator's answer on to a client of
// transaction version 2, which retries it; older versions never add).
//
// Fencing: every InitProducerId bumps the epoch, and the coordinator
// answers an older epoch with PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before the KIP-588 versions: InitProducerId v4, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn v2). An InitProducerId that finds a
// transaction Ongoing aborts it with a bumped epoch and answers
// CONCURRENT_TRANSACTIONS, so that the retry bumps again. A transaction
// Ongoing longer than its timeout is aborted the same way by the
// coordinator (checked every txnReapInterval): the producer's next request
// is fenced, and its batches to the partitions get INVALID_PRODUCER_EPOCH,
// as the abort marker carries the new epoch.

// Kafka error codes of the coordinators.
const (
	ecCoordinatorNotAvailable   int16 = 15
	ecNotCoordinator            int16 = 16
	ecIllegalGeneration         int16 = 22
	ecUnknownMemberID           int16 = 25
	ecInvalidTxnState           int16 = 48
	ecInvalidProducerIDMapping  int16 = 49
	ecInvalidTransactionTimeout int16 = 50
	ecConcurrentTransactions    int16 = 51
	ecTransactionAbortable      int16 = 120
	ecOperationNotAttempted     int16 = 55
	ecUnstableOffsetCommit      int16 = 88
	ecProducerFenced            int16 = 90
)

// DefaultTransactionMaxTimeout is Kafka's transaction.max.timeout.ms
// default (15 minutes).
const DefaultTransactionMaxTimeout = 15 * time.Minute

// txnReapInterval is how often the coordinator looks for timed-out
// transactions (Kafka: transaction.abort.timed.out.transaction.cleanup.interval.ms,
// 10 s; shorter here so that tests of the timeout stay short).
const txnReapInterval = 20 * time.Millisecond

// txnState is a transaction's state at the coordinator.
type txnState int8

const (
	txnEmpty txnState = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

func (s txnState) String() string {
	switch s {
	case txnEmpty:
		return "Empty"
	case txnOngoing:
		return "Ongoing"
	case txnPrepareCommit:
		return "PrepareCommit"
	case txnPrepareAbort:
		return "PrepareAbort"
	case txnCompleteCommit:
		return "CompleteCommit"
	case txnCompleteAbort:
		return "CompleteAbort"
	}
	return fmt.Sprintf("txnState(%d)", int8(s))
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// txnMeta is one transactional id's metadata; txnCoordinator.mu guards it.
type txnMeta struct {
	id    string
	pid   int64
	epoch int16
	// lastEpoch is the epoch before the last KIP-360 bump (an
	// InitProducerId that named the current epoch), so that a retry of
	// that call gets the same answer; -1 otherwise.
	lastEpoch int16
	// v2: the last commit or abort was a transaction-version-2 one (an
	// EndTxn v5, or the coordinator's own abort at level 2), whose retry
	// with the epoch before its bump gets the same answer again.
	v2 bool
	// prevPID is the producer id before the last epoch overflow (-1 if
	// none), so that a retry of that EndTxn v5 is recognized; nextPID is
	// the id the transaction ending moves to once its markers are written
	// (-1 unless the epoch overflowed).
	prevPID, nextPID int64
	timeout          time.Duration
	state            txnState
	started          time.Time // when the transaction became Ongoing
	partitions       map[topicPartition]struct{}
	groups           map[string]struct{}
}

// txnCoordinator is the cluster's transaction state, shared by the
// brokers (each answers only for the ids it coordinates). Produce takes mu
// for reading across its check and append of a transactional batch, the
// state changes take it for writing, and markers are written under it:
// no batch of a transaction can land after its marker. Lock order: mu,
// then a partition log's mutex, then groupOffsets.mu.
type txnCoordinator struct {
	mu    sync.RWMutex
	byID  map[string]*txnMeta
	byPID map[int64]*txnMeta
}

// TransactionState returns the coordinator's state of a transactional id
// (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit or
// CompleteAbort), its producer id and epoch, and false for an unknown id.
func (c *Cluster) TransactionState(transactionalID string) (state string, producerID int64, epoch int16, ok bool) {
	c.txn.mu.RLock()
	defer c.txn.mu.RUnlock()
	m := c.txn.byID[transactionalID]
	if m == nil {
		return "", -1, -1, false
	}
	return m.state.String(), m.pid, m.epoch, true
}

// SetProducerEpoch sets the epoch of a transactional id's producer (making
// the id known, with a new producer id, if it is not), for tests of epoch
// exhaustion: the next InitProducerId bumps from it, and an EndTxn v5 at
// epoch 32766 moves the producer to a new id. The id's transaction must
// not be Ongoing or being completed.
func (c *Cluster) SetProducerEpoch(transactionalID string, epoch int16) error {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	m := c.txn.byID[transactionalID]
	if m == nil {
		m = &txnMeta{id: transactionalID, pid: c.pids.allocate(), lastEpoch: -1, prevPID: -1, nextPID: -1, timeout: time.Minute}
		c.txn.byID[transactionalID] = m
		c.txn.byPID[m.pid] = m
	}
	if m.state != txnEmpty && m.state != txnCompleteCommit && m.state != txnCompleteAbort {
		return fmt.Errorf("testbroker: transactional id %q is %s", transactionalID, m.state)
	}
	m.epoch, m.lastEpoch = epoch, -1
	return nil
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions
// before KIP-588's.
func fencedCode(version, since int16) int16 {
	if version < since {
		return ecInvalidProducerEpoch
	}
	return ecProducerFenced
}

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// initTransactional is InitProducerId with a transactional id.
func (c *Cluster) initTransactional(self int32, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id := *req.TransactionalID
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	switch {
	case id == "":
		resp.ErrorCode = ecInvalidRequest
		return
	case !c.isCoordinator(self, CoordinatorTransaction, id):
		resp.ErrorCode = ecNotCoordinator
		return
	case req.TransactionTimeoutMillis <= 0 || timeout > c.cfg.TransactionMaxTimeout:
		resp.ErrorCode = ecInvalidTransactionTimeout
		return
	}
	expected := req.Version >= 3 && req.ProducerID >= 0
	t := &c.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.byID[id]
	if m == nil {
		m = &txnMeta{id: id, pid: c.pids.allocate(), epoch: -1, lastEpoch: -1, prevPID: -1, nextPID: -1}
		t.byID[id] = m
		t.byPID[m.pid] = m
	}
	if expected && m.epoch >= 0 && req.ProducerID != m.pid {
		resp.ErrorCode = fencedCode(req.Version, 4) // another producer id: fenced
		return
	}
	switch m.state {
	case txnPrepareCommit, txnPrepareAbort:
		resp.ErrorCode = ecConcurrentTransactions
		return
	case txnOngoing:
		// Abort the previous producer's transaction with a bumped epoch;
		// the client retries and gets another bump.
		c.fenceLocked(m)
		c.endLocked(m, false)
		resp.ErrorCode = ecConcurrentTransactions
		return
	}
	switch {
	case !expected || m.epoch < 0:
		c.bumpLocked(m)
		m.lastEpoch = -1
	case req.ProducerEpoch == m.epoch:
		last := m.epoch
		c.bumpLocked(m)
		m.lastEpoch = last
	case req.ProducerEpoch == m.lastEpoch:
		// A retry of a bump that succeeded: the same answer again.
	default:
		resp.ErrorCode = fencedCode(req.Version, 4)
		return
	}
	m.timeout = timeout
	m.state = txnEmpty
	m.partitions, m.groups = nil, nil
	resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
}

// bumpLocked moves m to its next epoch, or to a new producer id at epoch 0
// when the epoch is exhausted.
func (c *Cluster) bumpLocked(m *txnMeta) {
	if !epochExhausted(m.epoch) {
		m.epoch++
		return
	}
	delete(c.txn.byPID, m.pid)
	m.pid, m.epoch = c.pids.allocate(), 0
	c.txn.byPID[m.pid] = m
}

// fenceLocked bumps m's epoch without an answer to anyone (Kafka's
// prepareFenceProducerEpoch): the current producer is fenced.
func (c *Cluster) fenceLocked(m *txnMeta) {
	if m.epoch < math.MaxInt16 {
		m.epoch++
	}
	m.lastEpoch = -1
}

// endLocked moves an Ongoing transaction to Prepare* and writes its
// markers, at once or after Config.TransactionMarkerDelay.
func (c *Cluster) endLocked(m *txnMeta, commit bool) {
	m.state = txnPrepareAbort
	if commit {
		m.state = txnPrepareCommit
	}
	d := c.cfg.TransactionMarkerDelay
	if d <= 0 {
		c.completeLocked(m, commit)
		return
	}
	pid, epoch := m.pid, m.epoch
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.closed:
		}
		c.txn.mu.Lock()
		defer c.txn.mu.Unlock()
		if m.pid == pid && m.epoch == epoch && (m.state == txnPrepareCommit || m.state == txnPrepareAbort) {
			c.completeLocked(m, commit)
		}
	}()
}

// completeLocked writes the markers of m's transaction to each of its
// partitions, commits or drops its pending offsets, and completes it.
func (c *Cluster) completeLocked(m *txnMeta, commit bool) {
	now := c.cfg.Clock()
	for tp := range m.partitions {
		if p, err := c.partition(tp.topic, tp.partition); err == nil {
			p.log.writeMarker(m.pid, m.epoch, commit, 0, now)
		}
	}
	if len(m.partitions) > 0 {
		c.appended.notify()
	}
	for g := range m.groups {
		c.offsets.endTxn(g, m.pid, commit)
	}
	m.partitions, m.groups = nil, nil
	m.state = txnCompleteAbort
	if commit {
		m.state = txnCompleteCommit
	}
	if m.nextPID >= 0 {
		// The epoch overflowed at a version 2 EndTxn: the markers carried
		// the old id's last epoch, and the next transaction runs under
		// the new id.
		delete(c.txn.byPID, m.pid)
		m.prevPID, m.pid, m.epoch, m.nextPID = m.pid, m.nextPID, 0, -1
		c.txn.byPID[m.pid] = m
	}
}

// reapTransactions aborts the transactions Ongoing for longer than their
// timeout, and removes group members whose session expired (groups.go),
// until the cluster closes.
func (c *Cluster) reapTransactions() {
	defer c.wg.Done()
	tick := time.NewTicker(txnReapInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-tick.C:
		}
		now := c.cfg.Clock()
		c.expireMembers(now)
		c.txn.mu.Lock()
		for _, m := range c.txn.byID {
			if m.state == txnOngoing && now.Sub(m.started) > m.timeout {
				c.log.Info("testbroker: aborting a timed-out transaction", "transactional.id", m.id, "producer.id", m.pid, "epoch", m.epoch)
				c.fenceLocked(m)
				// At level 2 the producer may end the aborted transaction
				// with its old epoch and get the new one (Kafka aborts with
				// the server's transaction version).
				m.v2 = c.txnVersion.Load() >= 2
				c.endLocked(m, false)
			}
		}
		c.txn.mu.Unlock()
	}
}

// checkTxnLocked is the check every transactional request of the
// producer (pid, epoch) makes against m (nil: unknown transactional id):
// 0 when it may go on.
func checkTxnLocked(m *txnMeta, pid int64, epoch int16, version, fencedSince int16) int16 {
	switch {
	case m == nil || m.pid != pid:
		return ecInvalidProducerIDMapping
	case m.epoch != epoch:
		return fencedCode(version, fencedSince)
	case m.state == txnPrepareCommit || m.state == txnPrepareAbort:
		return ecConcurrentTransactions
	}
	return 0
}

// beginLocked opens m's transaction if it is not Ongoing yet.
func (c *Cluster) beginLocked(m *txnMeta) {
	if m.state != txnOngoing {
		m.state = txnOngoing
		m.started = c.cfg.Clock()
	}
}

// handleAddPartitionsToTxn adds partitions to a transaction: v0 to v3 one
// transaction of the client, v4+ a batch of them (KIP-890 part 1, the
// broker's path), where VerifyOnly only checks that the partitions are in
// the transaction (INVALID_TXN_STATE otherwise). An unknown partition gets
// UNKNOWN_TOPIC_OR_PARTITION and the others of the request
// OPERATION_NOT_ATTEMPTED, as in Kafka.
func handleAddPartitionsToTxn(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	c := cn.c
	if req.Version < 4 {
		topics := make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		codes := c.addPartitions(cn.b.id, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[topicPartition{t.Topic, p}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return result{resp: resp}
	}
	for _, tx := range req.Transactions {
		topics := make(map[string][]int32, len(tx.Topics))
		for _, t := range tx.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		codes := c.addPartitions(cn.b.id, req.Version, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, topics)
		rx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rx.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[topicPartition{t.Topic, p}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			rx.Topics = append(rx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rx)
	}
	return result{resp: resp}
}

// addPartitions runs one transaction's AddPartitionsToTxn and returns the
// code of every partition.
func (c *Cluster) addPartitions(self int32, version int16, id string, pid int64, epoch int16, verifyOnly bool, topics map[string][]int32) map[topicPartition]int16 {
	codes := make(map[topicPartition]int16)
	all := func(code int16) map[topicPartition]int16 {
		for t, ps := range topics {
			for _, p := range ps {
				codes[topicPartition{t, p}] = code
			}
		}
		return codes
	}
	if !c.isCoordinator(self, CoordinatorTransaction, id) {
		return all(ecNotCoordinator)
	}
	unknown := false
	for t, ps := range topics {
		for _, p := range ps {
			if _, err := c.partition(t, p); err != nil {
				codes[topicPartition{t, p}] = ecUnknownTopicOrPartition
				unknown = true
			}
		}
	}
	if unknown {
		for t, ps := range topics {
			for _, p := range ps {
				if codes[topicPartition{t, p}] == 0 {
					codes[topicPartition{t, p}] = ecOperationNotAttempted
				}
			}
		}
		return codes
	}
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	m := c.txn.byID[id]
	if code := checkTxnLocked(m, pid, epoch, version, 2); code != 0 {
		return all(code)
	}
	if verifyOnly {
		for t, ps := range topics {
			for _, p := range ps {
				if _, in := m.partitions[topicPartition{t, p}]; !in || m.state != txnOngoing {
					codes[topicPartition{t, p}] = ecInvalidTxnState
				}
			}
		}
		return codes
	}
	c.beginLocked(m)
	if m.partitions == nil {
		m.partitions = make(map[topicPartition]struct{})
	}
	for t, ps := range topics {
		for _, p := range ps {
			m.partitions[topicPartition{t, p}] = struct{}{}
		}
	}
	return codes
}

// handleAddOffsetsToTxn adds a group's offsets to a transaction, so that
// the producer may then send TxnOffsetCommit to the group coordinator.
func handleAddOffsetsToTxn(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	c := cn.c
	if !c.isCoordinator(cn.b.id, CoordinatorTransaction, req.TransactionalID) {
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	}
	if req.Group == "" {
		resp.ErrorCode = ecInvalidGroupID
		return result{resp: resp}
	}
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	m := c.txn.byID[req.TransactionalID]
	if resp.ErrorCode = checkTxnLocked(m, req.ProducerID, req.ProducerEpoch, req.Version, 2); resp.ErrorCode != 0 {
		return result{resp: resp}
	}
	c.beginLocked(m)
	if m.groups == nil {
		m.groups = make(map[string]struct{})
	}
	m.groups[req.Group] = struct{}{}
	return result{resp: resp}
}

// handleEndTxn commits or aborts a transaction: Kafka's
// handleEndTransaction for transaction version 1 (v0 to v4), endTxnV2 for
// v5.
func handleEndTxn(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	c := cn.c
	if !c.isCoordinator(cn.b.id, CoordinatorTransaction, req.TransactionalID) {
		resp.ErrorCode = ecNotCoordinator
		return result{resp: resp}
	}
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	m := c.txn.byID[req.TransactionalID]
	if req.Version >= 5 {
		resp.ErrorCode = c.endTxnV2(m, req)
		if resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
			if m.nextPID >= 0 {
				resp.ProducerID, resp.ProducerEpoch = m.nextPID, 0
			}
		}
		return result{resp: resp}
	}
	switch {
	case m == nil || m.pid != req.ProducerID:
		resp.ErrorCode = ecInvalidProducerIDMapping
	case m.epoch != req.ProducerEpoch:
		resp.ErrorCode = fencedCode(req.Version, 2)
	case m.state == txnOngoing:
		m.v2 = false
		c.endLocked(m, req.Commit)
	case m.state == txnPrepareCommit && req.Commit, m.state == txnPrepareAbort && !req.Commit:
		resp.ErrorCode = ecConcurrentTransactions
	case m.state == txnCompleteCommit && req.Commit, m.state == txnCompleteAbort && !req.Commit:
		// A retry of an EndTxn that succeeded.
	default: // Empty, or the other outcome than the one under way or done
		resp.ErrorCode = ecInvalidTxnState
	}
	return result{resp: resp}
}

// endTxnV2 is EndTxn v5 (KIP-890 part 2) under c.txn.mu: the commit or
// abort bumps the epoch, and a retry of it (the epoch before the bump, or
// the old id's last epoch after an overflow) succeeds again. By state, for
// the current epoch and for a retry's:
//
//	Ongoing                 end, bump          PRODUCER_FENCED
//	Prepare*                CONCURRENT_TRANSACTIONS (markers being written)
//	Empty, Complete*        abort: empty abort, bump; commit: INVALID_TXN_STATE
//	CompleteAbort (retry)   abort: success; commit: INVALID_TXN_STATE
//	CompleteCommit (retry)  commit: success; abort: INVALID_TXN_STATE
//	Empty (retry)           abort: PRODUCER_FENCED; commit: INVALID_TXN_STATE
//
// Other epochs get PRODUCER_FENCED.
func (c *Cluster) endTxnV2(m *txnMeta, req *kmsg.EndTxnRequest) int16 {
	if m == nil {
		return ecInvalidProducerIDMapping
	}
	overflowRetry := m.v2 && m.prevPID == req.ProducerID && req.ProducerEpoch == math.MaxInt16-1 && m.epoch == 0
	if m.pid != req.ProducerID && !overflowRetry {
		return ecInvalidProducerIDMapping
	}
	if m.state == txnPrepareCommit || m.state == txnPrepareAbort {
		return ecConcurrentTransactions
	}
	current := m.pid == req.ProducerID && m.epoch == req.ProducerEpoch
	retry := overflowRetry || (m.v2 && m.pid == req.ProducerID && int32(m.epoch) == int32(req.ProducerEpoch)+1)
	switch {
	case current && m.state == txnOngoing, current && !req.Commit:
		// An end, or an empty abort (Empty, Complete*): both bump.
		c.beginLocked(m) // an empty abort: nothing to mark
		m.v2, m.lastEpoch = true, -1
		if epochExhausted(m.epoch) {
			m.nextPID = c.pids.allocate()
		}
		if m.epoch < math.MaxInt16 {
			m.epoch++ // the markers carry the new epoch
		}
		c.endLocked(m, req.Commit)
		return 0
	case current:
		return ecInvalidTxnState // a commit without a transaction
	case !retry || m.state == txnOngoing:
		return ecProducerFenced
	case m.state == txnCompleteCommit && req.Commit, m.state == txnCompleteAbort && !req.Commit:
		return 0 // the retry of an end that succeeded
	case m.state == txnEmpty && !req.Commit:
		return ecProducerFenced
	}
	return ecInvalidTxnState
}

// checkTxnProduceLocked is the coordinator's check of a transactional
// batch of (pid, epoch) to a partition, made with c.txn.mu held: the
// partition must be in the producer's Ongoing transaction, with the
// current epoch (else INVALID_PRODUCER_EPOCH, the produce path's code for
// a fenced epoch). A partition not in the transaction gets what Kafka's
// verification answers by Produce version: INVALID_TXN_STATE before v11,
// TRANSACTION_ABORTABLE from v11 (KIP-890 part 1's error for new clients);
// from v12 the caller adds it instead (add is then true).
func (c *Cluster) checkTxnProduceLocked(topic string, partition int32, version int16, pid int64, epoch int16) (code int16, msg string, add bool) {
	m := c.txn.byPID[pid]
	notAdded := ecInvalidTxnState
	if version >= 11 {
		notAdded = ecTransactionAbortable
	}
	switch {
	case m == nil && version >= 12:
		// The coordinator cannot add for an id it does not know.
		return ecInvalidProducerIDMapping, fmt.Sprintf("producer id %d has no transactional id", pid), false
	case m == nil:
		return notAdded, fmt.Sprintf("producer id %d has no transaction", pid), false
	case epoch != m.epoch:
		return ecInvalidProducerEpoch, fmt.Sprintf("epoch %d of producer id %d is not the current epoch %d", epoch, pid, m.epoch), false
	case m.state == txnPrepareCommit || m.state == txnPrepareAbort:
		if version >= 12 {
			// Kafka 4.x's ReplicaManager answers CONCURRENT_TRANSACTIONS
			// as is to an operation that supports epoch bumps (Produce
			// v12+, transaction version 2), and NOT_ENOUGH_REPLICAS only
			// to older clients, which would not retry it.
			return ecConcurrentTransactions, "the coordinator is completing the previous transaction", false
		}
		return notAdded, fmt.Sprintf("the transaction of producer id %d is %s", pid, m.state), false
	case m.state != txnOngoing:
		if version >= 12 {
			return 0, "", true
		}
		return notAdded, fmt.Sprintf("the transaction of producer id %d is %s", pid, m.state), false
	}
	if _, ok := m.partitions[topicPartition{topic, partition}]; !ok {
		if version >= 12 {
			return 0, "", true
		}
		return notAdded, "partition was not added to the transaction", false
	}
	return 0, "", false
}

// Offsets in a record batch header of the producer id and epoch.
const (
	bOffProducerID    = 43
	bOffProducerEpoch = 51
	batchHeaderSize   = 61
)

// isTransactionalBatch reports whether raw starts with a v2 batch header
// with the transactional attribute: one test on the Produce path, so that
// other batches pay nothing for transactions.
func isTransactionalBatch(raw []byte) bool {
	return len(raw) >= batchHeaderSize && raw[16] == 2 &&
		binary.BigEndian.Uint16(raw[bOffAttributes:])&attrTransactional != 0
}

// appendTransactional appends a transactional batch of a Produce request
// of version (with transactionalID, v3+) once the coordinator has checked
// it, holding c.txn.mu across the check and the append so that no marker
// can come between them: for reading, or for writing when a Produce v12+
// adds the partition to the transaction (KIP-890 part 2), which then needs
// the transactional id to name the producer id of the batch.
func (c *Cluster) appendTransactional(topic string, partition int32, version int16, transactionalID *string, l *partitionLog, raw []byte, now time.Time) appendResult {
	pid := int64(binary.BigEndian.Uint64(raw[bOffProducerID:]))
	epoch := int16(binary.BigEndian.Uint16(raw[bOffProducerEpoch:]))
	fail := func(code int16, msg string) appendResult {
		res := failed(code, "%s", msg)
		res.LogStartOffset = l.logStartOffset()
		return res
	}
	c.txn.mu.RLock()
	code, msg, add := c.checkTxnProduceLocked(topic, partition, version, pid, epoch)
	if code != 0 || !add {
		defer c.txn.mu.RUnlock()
		if code != 0 {
			return fail(code, msg)
		}
		return l.appendBatch(raw, now)
	}
	c.txn.mu.RUnlock()
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	if code, msg, _ = c.checkTxnProduceLocked(topic, partition, version, pid, epoch); code != 0 {
		return fail(code, msg) // changed meanwhile
	}
	m := c.txn.byPID[pid]
	if transactionalID == nil || c.txn.byID[*transactionalID] != m {
		return fail(ecInvalidProducerIDMapping, fmt.Sprintf("producer id %d is not the transactional id's", pid))
	}
	c.beginLocked(m)
	if m.partitions == nil {
		m.partitions = make(map[topicPartition]struct{})
	}
	m.partitions[topicPartition{topic, partition}] = struct{}{}
	return l.appendBatch(raw, now)
}
