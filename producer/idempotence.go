// The idempotent producer (KIP-98, KIP-360): its producer id and epoch,
// the sequences that stamp batches, the send gate that keeps a partition's
// batches in order, sequence gaps and the epoch bump that closes them.

package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
)

// idempotence is the IO goroutine's idempotent-producer state (KIP-98,
// KIP-360): the producer id and epoch that stamp every batch.
type idempotence struct {
	producerID int64 // -1 until InitProducerId answered
	epoch      int16
	requesting bool
	needBump   bool // a sequence gap or error: bump the epoch before sending more
	needNewID  bool // the id was fenced: ask for a new one, not a bump
	failures   int
	retryAt    time.Time
	lastErr    error // why the last InitProducerId failed (names it); nil once one succeeded
}

// canSend reports whether batches may be sent: the producer has an id. While
// needBump is set, only unresolved batches go out (see sink.nextBatch).
func (i *idempotence) canSend() bool {
	return i.producerID >= 0 && !i.requesting && !i.needNewID
}

// ensureProducerID gets the producer an id with InitProducerId when it has
// none (or was fenced), and bumps its epoch after a sequence gap once nothing
// is in flight (KIP-360). InitProducerId answers are handled on the IO
// goroutine.
func (s *sink) ensureProducerID() {
	if s.txn != nil {
		s.txnEnsureProducerID()
		return
	}
	id := s.idem
	if id == nil || id.requesting || (id.producerID >= 0 && !id.needBump) {
		return
	}
	if id.needBump && (s.inflight > 0 || (!id.needNewID && s.unresolved())) {
		return // bump once every answer is in and every unsettled batch settled
	}
	if id.needBump && !id.needNewID && id.producerID >= 0 && id.epoch < math.MaxInt16 {
		// An idempotent (non-transactional) producer bumps its epoch itself,
		// as the Java client does (KIP-360): the broker accepts a newer
		// epoch whose sequences start at 0.
		id.epoch++
		id.needBump = false
		s.resetSequences()
		s.p.log.Info("bumped the producer epoch", "id", id.producerID, "epoch", id.epoch)
		return
	}
	if s.now.Before(id.retryAt) || (id.producerID < 0 && !id.needNewID && !s.hasWork()) {
		return // the first id is fetched once there is something to send
	}
	id.requesting = true
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = int32(min(s.cfg.DeliveryTimeout/time.Millisecond, math.MaxInt32)) // spoolDeliveryTimeout is larger
	req.ProducerID, req.ProducerEpoch = id.producerID, id.epoch
	if id.needNewID {
		req.ProducerID, req.ProducerEpoch = -1, -1
	}
	timeout := s.cfg.RequestTimeout
	s.background.Go(func() {
		// Close ends it (closing is canceled before quit).
		ctx, cancel := context.WithTimeout(s.p.closing, timeout)
		defer cancel()
		resp, err := s.p.meta.Do(ctx, req)
		s.post(func() { s.handleProducerID(resp, err) })
	})
}

// unresolved reports whether a partition without a sequence gap still has a
// batch whose earlier attempt may have been written: it must be settled
// under the current epoch before the epoch is bumped.
func (s *sink) unresolved() bool {
	for _, t := range s.topics {
		for _, ip := range t.parts {
			if !ip.gapped && ip.unsettled() {
				return true
			}
		}
	}
	return false
}

func (s *sink) handleProducerID(r kmsg.Response, err error) {
	id := s.idem
	id.requesting = false
	if err == nil {
		resp := r.(*kmsg.InitProducerIDResponse)
		err = kerr.ForCode(resp.ErrorCode)
		if err == nil && resp.ProducerID < 0 {
			// A buggy broker: taken as success, it would be asked
			// again at once, without backoff, forever.
			err = fmt.Errorf("the broker answered no producer id (%d, epoch %d)", resp.ProducerID, resp.ProducerEpoch)
		}
		if err == nil {
			bumped := id.producerID >= 0
			id.producerID, id.epoch = resp.ProducerID, resp.ProducerEpoch
			id.needBump, id.needNewID, id.failures, id.lastErr = false, false, 0, nil
			s.p.logRepeat.Reset("InitProducerId")
			s.resetSequences()
			s.p.log.Debug("idempotent producer id", "id", id.producerID, "epoch", id.epoch, "bumped", bumped)
			return
		}
		if errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) {
			// The broker cannot bump this id: start over with a new one.
			id.producerID, id.epoch = -1, -1
		}
	}
	id.failures++
	id.lastErr = fmt.Errorf("InitProducerId failed: %w", err)
	id.retryAt = s.now.Add(s.backoff(id.failures))
	s.p.log.Log(context.Background(), s.p.logRepeat.Level("InitProducerId", s.now), "InitProducerId failed; retrying", "err", err, "attempt", id.failures)
}

// resetSequences restarts every partition's sequence at 0 for a new producer
// id or epoch; batches waiting to be resent get new sequences when they go
// out again, in their original order.
//
// A batch whose earlier attempt may have been written cannot be sent again
// under the new epoch: the broker could not recognize it as a duplicate. It
// fails with ErrOutcomeUnknown instead.
func (s *sink) resetSequences() {
	for _, t := range s.topics {
		for _, ip := range t.parts {
			ip.nextSeq = 0
			ip.gapped = false
			ip.confirmed = false
			keep := ip.retry[:0]
			for _, b := range ip.retry {
				b.IO.setSequence(-1)
				if b.IO.ambiguous {
					err := fmt.Errorf("%w: %s[%d]: the producer epoch had to be bumped while an earlier attempt of the batch was unresolved",
						ErrDeliveryTimeout, ip.topic.name, ip.acc.ID)
					if ip.lastErr != nil {
						err = fmt.Errorf("%w (last error: %w)", err, ip.lastErr)
					}
					s.fail(ip, b, err)
					continue
				}
				keep = append(keep, b)
			}
			clear(ip.retry[len(keep):])
			ip.retry = keep
			if len(ip.retry) > 0 || ip.hasSealed {
				s.markReady(ip) // sending stopped while the bump was pending
			}
		}
	}
}

// sequence gives b the partition's next idempotent sequence.
func (s *sink) sequence(ip *ioPart, b *batch) {
	b.IO.setSequence(ip.nextSeq)
	ip.nextSeq += int32(b.Records.Len())
	if ip.nextSeq < 0 {
		ip.nextSeq &= 0x7fffffff // sequences wrap to 0 after MaxInt32
	}
	s.stamp(b)
}

// stamp writes the producer id, epoch and b's sequence into its header,
// with the transactional bit for a transactional producer.
func (s *sink) stamp(b *batch) {
	if s.txn != nil {
		recordbatch.StampTransactional(b.IO.raw, s.idem.producerID, s.idem.epoch, b.IO.baseSequence())
		return
	}
	recordbatch.Stamp(b.IO.raw, s.idem.producerID, s.idem.epoch, b.IO.baseSequence())
}

// unsettled reports whether a batch waiting to be resent may have been
// written by an earlier attempt.
func (ip *ioPart) unsettled() bool {
	for _, b := range ip.retry {
		if b.IO.ambiguous && b.IO.baseSequence() >= 0 {
			return true
		}
	}
	return false
}

// hasEarlier reports whether a batch sent before b is still unacknowledged:
// in flight or waiting to be resent.
func (ip *ioPart) hasEarlier(b *batch) bool {
	for _, x := range ip.inflight {
		if before(x, b) {
			return true
		}
	}
	for _, x := range ip.retry {
		if before(x, b) {
			return true
		}
	}
	return false
}

func isSequenceError(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID)
}

// mayDrain is the send gate: it reports whether ip's next batch (the first
// to resend, else the oldest sealed one) may go out now and, when it may
// not, whether ip should stay on its broker's ready list this round (more:
// only a backoff or a missing producer id, which end by themselves; every
// other gate reopens on an answer, which lists ip again).
//
// In order:
//   - ip is backing off after a failure;
//   - under idempotence, the producer has no usable id yet (sendAll checks
//     it first for every broker);
//   - an epoch bump is pending: only a batch whose earlier attempt may have
//     been written, of a partition without a gap, goes out again, under the
//     old epoch, so that the broker settles it (written, or not) instead of
//     the new epoch writing it twice;
//   - batches are resent in order, one at a time, once nothing else of ip is
//     in flight;
//   - under idempotence, at most idempotenceMaxInFlight batches are in
//     flight, and only one until a batch of ip was acknowledged under the
//     current id and epoch, and again after ip had nothing in flight for
//     confirmLapse (the broker may have expired the producer id meanwhile):
//     a broker with no state for this producer accepts any first sequence,
//     so a second batch could be written while the first fails, out of
//     order;
//   - no new batch goes out while a resent one is unanswered: new batches
//     written meanwhile could push it out of the five the broker remembers,
//     and its answer would then be OUT_OF_ORDER_SEQUENCE_NUMBER instead of
//     a duplicate.
func (s *sink) mayDrain(ip *ioPart) (ok, more bool) {
	if s.now.Before(ip.backoff) {
		return false, true
	}
	if s.idem != nil {
		if !s.idem.canSend() {
			return false, true
		}
		if s.idem.needBump && (ip.gapped || !ip.unsettled() || ip.retry[0].IO.baseSequence() < 0) {
			return false, false
		}
	}
	if s.txn != nil && !s.txnGate(ip) {
		return false, false // AddPartitionsToTxn lists it again
	}
	if len(ip.retry) > 0 {
		return len(ip.inflight) == 0, false
	}
	if s.idem != nil && ip.confirmed && len(ip.inflight) == 0 && s.now.Sub(ip.ackedAt) >= confirmLapse {
		ip.confirmed = false // idle: the broker may have expired the producer id (confirmLapse)
	}
	if s.idem != nil && (len(ip.inflight) >= idempotenceMaxInFlight || (!ip.confirmed && len(ip.inflight) > 0)) {
		return false, false
	}
	return ip.resent == 0, false
}

// wakeBy returns when the IO goroutine must wake, given next: earlier if an
// InitProducerId attempt is due again before it.
func (i *idempotence) wakeBy(now, next time.Time) time.Time {
	if i.retryAt.After(now) && i.retryAt.Before(next) {
		return i.retryAt
	}
	return next
}

// leaveGap records that b, if it carried a sequence, may not have been
// written: its partition's sequence has a gap, which the next epoch bump
// closes (KIP-360) before anything more is sent. Not for a partition gone
// with its recreated topic (failGone): no broker will ask for its
// sequence again, and a partition of that number later is a new one.
func (s *sink) leaveGap(ip *ioPart, b *batch) {
	if s.idem != nil && b.IO.baseSequence() >= 0 && !ip.gone() {
		s.idem.needBump = true
		ip.gapped = true
	}
}

// sequenceError handles OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID
// for b, which is retried: with an earlier batch of ip unresolved it is
// only the echo of that batch's failure; otherwise it is a real gap or lost
// producer state, and the epoch is bumped (KIP-360).
func (s *sink) sequenceError(ip *ioPart, b *batch, err error) {
	if s.idem == nil || ip.hasEarlier(b) {
		return
	}
	s.idem.needBump = true
	ip.gapped = true
	s.p.log.Info("sequence error; bumping the producer epoch", "topic", ip.topic.name, "partition", ip.acc.ID, "err", err)
}

// isFenced reports whether err ends the producer id: INVALID_PRODUCER_EPOCH
// or PRODUCER_FENCED.
func isFenced(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced)
}

// fenced handles a batch refused because the producer id was fenced: the
// batch was not written. The producer gets a new id, then resends it
// (KIP-360).
func (s *sink) fenced(br *ioBroker, ip *ioPart, b *batch, err error) {
	s.idem.needNewID = true
	s.idem.needBump = true
	s.p.log.Warn("producer id fenced; getting a new one", "topic", ip.topic.name, "partition", ip.acc.ID, "err", err)
	s.retryOrFail(ip, b, fmt.Errorf("%s[%d] on broker %d: %w", ip.topic.name, ip.acc.ID, br.id, err))
}

// inheritSequence gives nb, a split half of b starting at b's record
// offset, its share of b's sequences: the broker refused b, so its halves
// keep its place among the partition's batches.
func (s *sink) inheritSequence(nb, b *batch, offset int) {
	if b.IO.baseSequence() < 0 {
		return
	}
	nb.IO.setSequence(int32((int64(b.IO.baseSequence()) + int64(offset)) & math.MaxInt32)) // sequences wrap to 0
	s.stamp(nb)
}

// confirmLapse is how long after its last acknowledged batch a partition
// counts as confirmed (sink.mayDrain): a partition leader forgets a
// producer id idle past producer.id.expiration.ms (KIP-854, broker default
// 1 day), and then takes the first batch it sees of that id, whatever its
// sequence, as the start (Kafka 2.5+). A partition with nothing in flight
// for longer therefore sends its next batch alone until the broker
// acknowledges it, as after a new epoch: were a second batch in flight
// behind it and the first failed unwritten, the second would be written
// first, and the first then refused as out of order. It costs at most one
// round trip when a partition's traffic resumes after a second's pause,
// and nothing to a partition that keeps sending. A broker expiring ids
// within a second of their last write is not covered.
var confirmLapse = time.Second
