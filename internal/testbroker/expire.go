package testbroker

// Expiry of idle producer state, modelled on Kafka's: a partition leader
// forgets a producer id idle for producer.id.expiration.ms (KIP-854;
// default 1 day, ProducerStateManager.removeExpiredProducers, run every
// producer.id.expiration.check.interval.ms, 10 minutes), and the
// transaction coordinator forgets a transactional id idle for
// transactional.id.expiration.ms (default 7 days,
// TransactionStateManager.removeExpiredTransactionalIds, run every
// transaction.remove.expired.transaction.cleanup.interval.ms, 1 hour).
// Tests expire now instead of waiting: [Cluster.ExpireProducerIDs] and
// [Cluster.ExpireTransactionalIDs].

// ExpireProducerIDs makes every partition forget the idempotent state
// (epoch, last five batches) of every producer id without an open
// transaction on it, as Kafka does for producer ids idle past
// producer.id.expiration.ms. The producer's next batch to such a partition
// is then taken as its first, whatever its sequence (Kafka 2.5+; with
// Config.UnknownProducerIDErrors a sequence other than 0 gets
// UNKNOWN_PRODUCER_ID, as before 2.5), and a retry of a batch written
// before is no longer recognized as a duplicate. It returns how many
// (partition, producer id) states it dropped.
func (c *Cluster) ExpireProducerIDs() int {
	c.mu.RLock()
	var logs []*partitionLog
	for _, t := range c.topics {
		for _, p := range t.partitions {
			logs = append(logs, p.log)
		}
	}
	c.mu.RUnlock()
	n := 0
	for _, l := range logs {
		l.mu.Lock()
		for pid := range l.producers.byID {
			if _, open := l.txn.ongoing[pid]; !open {
				delete(l.producers.byID, pid)
				n++
			}
		}
		l.mu.Unlock()
	}
	return n
}

// ExpireTransactionalIDs makes the transaction coordinator forget every
// transactional id whose transaction is not open or being completed
// (Empty, CompleteCommit, CompleteAbort), as Kafka does for ids idle past
// transactional.id.expiration.ms. The producer's next AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn or transactional Produce v12+ then gets
// INVALID_PRODUCER_ID_MAPPING, and an InitProducerId, with or without the
// old producer id and epoch, answers a new producer id at epoch 0 (Kafka's
// TransactionCoordinator creates the id's metadata afresh, with no epoch
// to check the old one against). It returns how many ids it forgot.
func (c *Cluster) ExpireTransactionalIDs() int {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	n := 0
	for id, m := range c.txn.byID {
		switch m.state {
		case txnEmpty, txnCompleteCommit, txnCompleteAbort:
		default:
			continue
		}
		delete(c.txn.byID, id)
		if c.txn.byPID[m.pid] == m {
			delete(c.txn.byPID, m.pid)
		}
		n++
	}
	return n
}
