// The transaction version (KIP-890): which of the two transaction flows a
// transactional producer runs, read from the cluster's finalized
// transaction.version feature, and the request versions of each flow.

package producer

import (
	"context"
	"sync"
	"time"

	"github.com/samsa-go/samsa/internal/conn"
)

// transactionVersionFeature is KIP-890's feature: at level 2 the producer
// runs transaction version 2.
const transactionVersionFeature = "transaction.version"

// Request versions of the two flows. The version ranges brokers advertise
// are the same at levels 1 and 2 (Kafka 4.4); the request version is what
// tells the broker which flow the client runs, so a producer of version 1
// must stay below KIP-890 part 2's versions (Java's
// LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2).
//
// Produce v13 (KIP-516: topics by id) runs transaction version 2's flow as
// v12 does: a producer of version 2 sends it where the broker offers it,
// as Java 4.4's Sender does (it caps Produce only under version 1), so that
// a batch in flight never lands in a topic recreated under its name
// (invariant 16); v12 to a broker without it or for a topic without an id.
const (
	produceMaxV1, produceMaxV2                 int16 = 11, 12
	produceMaxV2ByID                           int16 = 13
	endTxnMaxV1, endTxnMaxV2                   int16 = 4, 5
	txnOffsetCommitMaxV1, txnOffsetCommitMaxV2 int16 = 4, 5
)

// txnFeatures is what the producer knows of the cluster's finalized
// transaction.version: the level read with the highest
// FinalizedFeaturesEpoch from any of its connections (as Java's
// ApiVersions keeps the newest), and whether that broker serves the
// versions of transaction version 2. Its methods are safe for concurrent
// use: connections are set up on several goroutines.
type txnFeatures struct {
	mu    sync.Mutex
	epoch int64 // -1: no connection reported finalized features
	level int16
	// v2Versions: the broker answering with this epoch serves Produce v12,
	// EndTxn v5 and TxnOffsetCommit v5.
	v2Versions bool
	readAt     time.Time // when the coordinator's features were last read
}

func newTxnFeatures() *txnFeatures { return &txnFeatures{epoch: -1} }

// observe takes the features of c's last ApiVersions answer when they are
// newer than the ones known.
func (f *txnFeatures) observe(c *conn.Conn) {
	ff := c.Features()
	if ff.Epoch < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ff.Epoch <= f.epoch {
		return
	}
	f.epoch, f.level = ff.Epoch, ff.Level(transactionVersionFeature)
	f.v2Versions = c.MaxVersion(0) >= produceMaxV2 && c.MaxVersion(26) >= endTxnMaxV2 && c.MaxVersion(28) >= txnOffsetCommitMaxV2
}

// v2 reports whether the next transaction may run transaction version 2:
// the cluster finalized transaction.version 2 or higher, and serves its
// request versions.
func (f *txnFeatures) v2() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.level >= 2 && f.v2Versions
}

// refreshDue reports whether the coordinator's features were read longer
// than every ago, and if so counts them as read now.
func (f *txnFeatures) refreshDue(now time.Time, every time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.readAt) < every {
		return false
	}
	f.readAt = now
	return true
}

// refreshFeatures reads the cluster's finalized features again on the
// transaction coordinator's connection, once per MetadataMaxAge (at the end
// of a transaction, before the level of the next one is chosen): a broker
// does not tell its connections of a FeatureCommand upgrade or downgrade,
// and the producer's connections may live for days. Errors are only
// logged: the next transaction then runs at the level known.
func (c *txnClient) refreshFeatures(ctx context.Context) {
	if !c.features.refreshDue(time.Now(), c.p.cfg.MetadataMaxAge) {
		return
	}
	cn, err := c.conn(ctx, c.txnCoord())
	if err == nil {
		_, err = cn.ReadFeatures(ctx)
	}
	if err != nil {
		c.p.log.Debug("reading the cluster's transaction.version failed", "err", err)
		return
	}
	c.features.observe(cn)
}

// txnPickVersion chooses the transaction version of the next transaction,
// on the IO goroutine: when the producer gets its first id, and after each
// EndTxn (txnEnded), never during a transaction. Switching from version 1
// to 2 bumps the epoch first (InitProducerId), as Java's producer does, so
// that no partition the coordinator added under version 1 counts as added
// in a version 2 transaction; switching back needs nothing.
func (s *sink) txnPickVersion(first bool) {
	x := s.txn
	v2 := s.p.txn.client.features.v2()
	if v2 == x.v2 && !first {
		return
	}
	if v2 && !x.v2 && !first {
		s.idem.needBump = true
	}
	x.v2 = v2
	if v2 {
		// Partitions queued for AddPartitionsToTxn before the first id
		// (txnWant) join with their Produce requests instead.
		clear(x.queued)
		clear(x.pending)
		x.pending = x.pending[:0]
	}
	log := s.p.log.Info // a change at run time
	if first {
		log = s.p.log.Debug
	}
	if v2 {
		log("transactions run transaction version 2 (KIP-890): partitions join with Produce v12 or v13, every commit or abort bumps the epoch", "transactional_id", s.cfg.TransactionalID)
	} else {
		log("transactions run transaction version 1: partitions join with AddPartitionsToTxn", "transactional_id", s.cfg.TransactionalID)
	}
}

// produceMax is the highest Produce version of the transaction's flow:
// v13 at version 2 (v12 where a broker or a topic without id needs it),
// v11 at version 1.
func (x *txnIO) produceMax() int16 {
	if x.v2 {
		return produceMaxV2ByID
	}
	return produceMaxV1
}
