// The IO goroutine's expiry: parked records past MaxBlock, batches past
// DeliveryTimeout (pending or in flight), and the errors they fail with.

package producer

import (
	"errors"
	"fmt"
	"time"
)

// trackExpiry adds o to the expiry queue, which stays sorted by time: a
// batch of parked records or a split half can be older than the batches
// opened just before it.
func (s *sink) trackExpiry(o opened) {
	s.expireQ.insertSorted(o, func(a, b opened) bool { return a.at.After(b.at) })
}

// expire fails what has waited too long without being in flight: records
// parked for a topic not present in metadata after MaxBlock from their Send
// (as the Java producer's send fails after max.block.ms), whatever the
// metadata is doing meanwhile (a request a broker never answers fails only
// after RequestTimeout), other parked records and batches that never got
// (back) to a broker after DeliveryTimeout.
func (s *sink) expire() {
	dt := s.cfg.DeliveryTimeout
	deadline := s.now.Add(-dt)
	expired := false
	for t := range s.parked {
		limit := s.parkLimit(t)
		parkDeadline := s.now.Add(-limit)
		if oldest := t.ts.acc.OldestParked(); oldest.IsZero() || oldest.After(parkDeadline) {
			continue
		}
		missing := len(t.parts) == 0
		var cause error
		if missing {
			cause = s.missingCause(t)
		}
		// One error per millisecond waited: each record's says how long
		// it waited, without an error per record.
		if missing && t.failing == notFailing {
			// New Sends fail at once while the topic stays missing,
			// instead of taking pool memory for MaxBlock each. Set
			// before the expired records reach the completer: a
			// callback that sends again at its failure must see the
			// topic failing, not park for a second MaxBlock.
			s.setFailing(t, failMissing, s.missingErr(t, cause))
		}
		var err error
		var errWaited time.Duration
		records, bytes := t.ts.acc.Parked()
		t.ts.acc.ExpireParked(parkDeadline, func(c completion, at time.Time) {
			waited := s.now.Sub(at).Truncate(time.Millisecond)
			if err == nil || waited != errWaited {
				err, errWaited = s.parkedErr(t, waited, limit, cause), waited
			}
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
		})
		expired = true
		if t.ts.acc.OldestParked().IsZero() {
			s.unpark(t, records, bytes, err)
		}
	}
	if expired && s.holding {
		// The expired records freed memory, which the pool holds, and
		// may have been all that starved: moveParked moves what it can
		// with it and turns the hold off once nothing starves. It runs
		// before expire in step, and would run again only at the next
		// event or timer, with Sends kept waiting meanwhile.
		s.moveParked()
	}
	i := 0
	for ; i < s.expireQ.len(); i++ {
		o := *s.expireQ.at(i)
		alive := o.b.Gen() == o.gen
		if alive && o.at.After(deadline) {
			break // the oldest batch still pending is not due yet
		}
		if alive {
			ip := o.part.IO
			if o.part.Seal(o.b, o.gen) {
				// Still open past its deadline (its broker kept it
				// waiting, see sealLingered): seal it so that it
				// fails with the others.
				ip.hasSealed = true
			}
			s.expirePart(ip, deadline)
		}
	}
	s.expireQ.pop(i)
	// Entries of completed batches behind a pending one wait for it; drop
	// them once they outnumber the live ones, so that the queue holds about
	// as many entries as there are batches in the producer.
	if n := s.expireQ.len(); n > 2*s.expireLive+1024 {
		s.expireQ.filter(func(o opened) bool { return o.b.Gen() == o.gen })
		s.expireLive = s.expireQ.len()
	}
}

// expirePart fails ip's batches created before deadline that are not in
// flight: they are the oldest, at the front of the retry list and then of the
// accumulator's sealed queue.
func (s *sink) expirePart(ip *ioPart, deadline time.Time) {
	for _, b := range ip.inflight {
		if !b.IO.expired && !b.Created.After(deadline) {
			s.expireInflight(ip, b)
		}
	}
	for len(ip.retry) > 0 && !ip.retry[0].Created.After(deadline) {
		b := ip.retry[0]
		ip.retry = popFront(ip.retry, 1)
		s.fail(ip, b, s.timeoutErr(ip, b))
	}
	if len(ip.retry) > 0 {
		return
	}
	for {
		b := ip.acc.PeekSealed()
		if b == nil || b.Created.After(deadline) {
			return
		}
		ip.acc.NextSealed()
		s.fail(ip, b, s.timeoutErr(ip, b))
	}
}

// parkLimit returns how long t's records may stay parked: while t has no
// partitions, MaxBlock (at most DeliveryTimeout), as Java's send waits for
// metadata, whatever the metadata requests are doing; once it has (its
// records wait for memory to move into a batch), DeliveryTimeout.
//
// With Config.Spool, DeliveryTimeout always (spoolDeliveryTimeout: none).
//
// MaxBlock NoWait (0 here) asks Send never to block, not to fail every
// record of a topic whose metadata was not there yet at its Send: those
// wait for the first answer or failed fetch without the topic (at most
// DeliveryTimeout).
func (s *sink) parkLimit(t *ioTopic) time.Duration {
	if len(t.parts) > 0 || s.p.spool != nil {
		// With a spool, DeliveryTimeout is spoolDeliveryTimeout: a
		// spooled record waits for its topic until Close.
		return s.cfg.DeliveryTimeout
	}
	if s.cfg.MaxBlock == 0 && t.err == nil && s.p.meta.Err() == nil {
		return s.cfg.DeliveryTimeout
	}
	return min(s.cfg.MaxBlock, s.cfg.DeliveryTimeout)
}

// limitName names the limit parkLimit returned: "MaxBlock 2s".
func (s *sink) limitName(limit time.Duration) string {
	name := "MaxBlock"
	if limit != s.cfg.MaxBlock {
		name = "DeliveryTimeout"
	}
	return fmt.Sprintf("%s %v", name, limit)
}

// parkedErr is the error of t's records that waited too long parked.
func (s *sink) parkedErr(t *ioTopic, waited, limit time.Duration, cause error) error {
	if len(t.parts) == 0 {
		return fmt.Errorf("%w: topic %q not present in metadata after %v (%s): %w", ErrDeliveryTimeout, t.name, waited, s.limitName(limit), cause)
	}
	return fmt.Errorf("%w: topic %q: record still parked after %v (%s; no buffer memory to move it into a batch)", ErrDeliveryTimeout, t.name, waited, s.limitName(limit))
}

// missingErr is the error Sends to t fail with at once once its parked
// records failed for want of metadata, while it stays missing.
func (s *sink) missingErr(t *ioTopic, cause error) error {
	return fmt.Errorf("%w: topic %q not present in metadata: records parked for it failed after %s, and Sends fail at once until metadata lists it: %w",
		ErrDeliveryTimeout, t.name, s.limitName(s.parkLimit(t)), cause)
}

// missingCause says why t, without partitions, is not in metadata: the
// topic's error in the last answer (UNKNOWN_TOPIC_OR_PARTITION...), else
// why the last fetch failed (an unreachable cluster, a failed handshake:
// it names the brokers tried), else the broker the request in flight waits
// for, and for how long.
func (s *sink) missingCause(t *ioTopic) error {
	if t.err != nil {
		return t.err
	}
	if err := s.p.meta.Err(); err != nil {
		return err
	}
	if p, ok := s.p.meta.Pending(); ok {
		waited := max(s.now.Sub(p.Since), 0).Truncate(time.Millisecond)
		if p.Connecting {
			return fmt.Errorf("still connecting to broker %s after %v (no answer to the connection's handshake: ApiVersions, TLS or SASL)", p.Addr, waited)
		}
		return fmt.Errorf("no Metadata answer from broker %s within %v", p.Addr, waited)
	}
	return errors.New("no Metadata answer arrived")
}

// expireInflight fails b, which a request still carries, at its delivery
// timeout instead of up to RequestTimeout later, as the Java client does
// since 2.1 (KIP-91). The broker may have written it, so the error wraps
// ErrOutcomeUnknown. The batch stays in flight, holding its memory, until
// the request's answer is in; lateAnswer then only releases it, so its
// records complete once.
//
// A transactional producer bumps its epoch at once (as Java's
// markSequenceUnresolved): the transaction must abort, and the next one
// must run under a new epoch, whatever the late answer says.
func (s *sink) expireInflight(ip *ioPart, b *batch) {
	b.IO.expired = true
	if s.txn != nil && b.IO.baseSequence() >= 0 {
		s.idem.needBump = true
	}
	err := fmt.Errorf("%w: %d records for %s[%d] not acknowledged after %v, with a request carrying them still in flight (%w)",
		ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, ErrOutcomeUnknown)
	if ip.lastErr != nil {
		err = fmt.Errorf("%w (last error: %w)", err, ip.lastErr)
	}
	s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err, hold: true})
}

// lateAnswer handles the answer to a batch already failed by
// expireInflight: written tells whether the broker took it. Under
// idempotence a batch the broker did not take (or may not have) leaves a gap
// in its partition's sequence, which the epoch bump closes (KIP-360);
// one it took keeps the sequence whole. The batch is then released.
func (s *sink) lateAnswer(ip *ioPart, b *batch, written bool) {
	if !written {
		s.leaveGap(ip, b)
	}
	s.p.completer.push(outcome{batch: b, release: true})
}

func (s *sink) timeoutErr(ip *ioPart, b *batch) error {
	what := "no leader available"
	cause := ip.lastErr
	if ip.leader >= 0 {
		what = fmt.Sprintf("not acknowledged by broker %d", ip.leader)
		if br := s.brokers[ip.leader]; br != nil && br.conn == nil && br.lastErr != nil {
			// The broker cannot be reached now: that says more than
			// the batch's last attempt (often the connection that
			// broke when it went away). It names the broker's address
			// and why (connection refused, timed out...).
			cause = br.lastErr
		}
	} else if cause == nil {
		cause = s.p.meta.Err()
	}
	if merr := s.p.meta.Err(); errors.Is(merr, ErrClusterMismatch) && !errors.Is(cause, ErrClusterMismatch) {
		// Metadata refuses the only brokers it can reach (another
		// cluster): that is why the leader cannot be found again.
		cause = merr
	}
	if s.idem != nil && !s.idem.canSend() && s.idem.lastErr != nil {
		cause = s.idem.lastErr // nothing goes out without a producer id; it names InitProducerId
	}
	err := fmt.Errorf("%w: %d records for %s[%d] expired after %v: %s",
		ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, what)
	if cause != nil {
		err = fmt.Errorf("%w (last error: %w)", err, cause)
	}
	return err
}
