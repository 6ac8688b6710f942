// The IO goroutine's Produce answers: matching them to batches, success,
// retries in order, failures, and splitting a batch too large for the
// broker.

package producer

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
)

// fail completes b with err. A batch that carried an idempotent sequence
// and may not have been written leaves a gap in the partition's sequence;
// the producer then bumps its epoch (KIP-360) before sending more (see
// leaveGap).
func (s *sink) fail(ip *ioPart, b *batch, err error) {
	s.leaveGap(ip, b)
	if errors.Is(err, ErrClosed) {
		s.closedFailed.Add(int64(b.NumRecords()))
	}
	if b.IO.ambiguous && !errors.Is(err, ErrOutcomeUnknown) {
		err = fmt.Errorf("%w (%w)", err, ErrOutcomeUnknown)
	}
	s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err})
}

func (s *sink) succeed(b *batch, baseOffset, appendTime int64) {
	s.p.stats.batches.Add(1)
	s.p.stats.batchBytes.Add(int64(len(b.IO.raw)))
	s.p.stats.uncompressed.Add(int64(b.IO.uncompressed))
	s.p.completer.push(outcome{batch: b, baseOffset: baseOffset, appendTime: appendTime})
}

// handleResponse handles the answer to a Produce request, or its failure.
// While closing (shutdown) nothing is retried: a batch the broker took
// succeeds, any other fails with ErrClosed; a batch already failed by
// expireInflight is only released, as always.
func (s *sink) handleResponse(r produceResponse, closing bool) {
	br := r.broker
	br.inflight--
	br.answers++
	br.used = s.now
	s.inflight--
	s.p.stats.inflight.Add(-1)
	lat := s.observeAnswer(&r)
	for _, b := range r.batches {
		b.Partition.IO.landed(b)
	}
	if r.err != nil {
		s.p.reach.failed()
	} else {
		s.p.reach.ok()
	}
	if r.err != nil {
		// The connection failed: every batch of the request may or may
		// not have been written, unless no byte of the request reached
		// the socket (conn.ErrNotSent: queued behind a throttle or a
		// re-authentication). Retry them all (idempotence makes that
		// safe; an unwritten batch's sequence was never used), reconnect,
		// and refresh metadata.
		written := !errors.Is(r.err, conn.ErrNotSent)
		if !closing {
			if br.conn == r.conn && br.conn != nil {
				s.dropConn(br, r.err)
				br.failures++
				br.backoff = s.now.Add(s.backoff(br.failures))
			}
			s.p.meta.Trigger()
		}
		for _, b := range r.batches {
			s.observeBatch(br, b, lat, nil, false, r.err)
			switch {
			case b.IO.expired:
				s.lateAnswer(b.Partition.IO, b, false)
			case closing:
				what := "before the request was sent"
				if written {
					b.IO.ambiguous = true // the broker may have written it before the connection closed
					what = "while the request was in flight"
				}
				s.fail(b.Partition.IO, b, fmt.Errorf("%w: closing %s: %w", ErrClosed, what, r.err))
			default:
				if written {
					b.IO.ambiguous = true // it may have reached the broker
				}
				s.retryOrFail(b.Partition.IO, b, r.err)
			}
		}
		return
	}
	if r.resp == nil { // acks=0: no answer comes
		for _, b := range r.batches {
			s.observeBatch(br, b, lat, nil, false, nil)
			if b.IO.expired {
				s.lateAnswer(b.Partition.IO, b, true)
				continue
			}
			s.succeed(b, -1, -1)
		}
		return
	}
	resp := r.resp.(*kmsg.ProduceResponse)
	var cur answerCursor
	for _, b := range r.batches {
		ip := b.Partition.IO
		rp := cur.find(resp, ip, b.IO.topicID)
		s.observeBatch(br, b, lat, rp, true, nil)
		switch {
		case b.IO.expired:
			err := errors.New("no answer")
			if rp != nil {
				err = kerr.ForCode(rp.ErrorCode)
				if err == nil && rp.BaseOffset >= 0 {
					ip.lastAcked = max(ip.lastAcked, rp.BaseOffset+int64(b.Records.Len())-1)
				}
			}
			s.lateAnswer(ip, b, err == nil || errors.Is(err, kerr.DuplicateSequenceNumber))
		case closing:
			s.settleClosing(ip, b, rp)
			continue
		case rp == nil:
			// The broker may have written it all the same: retried
			// (under idempotence a duplicate is recognized), and
			// failing for good it fails with ErrOutcomeUnknown.
			b.IO.ambiguous = true
			s.retryOrFail(ip, b, fmt.Errorf("broker %d did not answer for %s[%d]", br.id, ip.topic.name, ip.acc.ID))
		default:
			s.handlePartition(br, ip, b, rp, resp.Brokers)
		}
		// A partition waiting for its in-flight batches (to resend in
		// order, or at the idempotent limit) may send again.
		if len(ip.retry) > 0 || ip.hasSealed {
			s.markReady(ip)
		}
	}
}

// settleClosing completes b, answered (rp, nil if the answer left it out)
// during shutdown: success completes it, anything else fails it with
// ErrClosed (no retries).
func (s *sink) settleClosing(ip *ioPart, b *batch, rp *kmsg.ProduceResponseTopicPartition) {
	if rp == nil {
		b.IO.ambiguous = true // the broker may have written it
		s.fail(ip, b, fmt.Errorf("%w: no answer for %s[%d]", ErrClosed, ip.topic.name, ip.acc.ID))
		return
	}
	if err := kerr.ForCode(rp.ErrorCode); err != nil && !errors.Is(err, kerr.DuplicateSequenceNumber) {
		if mayHaveAppended(err) {
			b.IO.ambiguous = true
		}
		s.fail(ip, b, fmt.Errorf("%w: %s[%d]: %w", ErrClosed, ip.topic.name, ip.acc.ID, err))
		return
	}
	s.succeed(b, rp.BaseOffset, rp.LogAppendTime)
}

// mayHaveAppended reports whether a partition's error code leaves open
// whether the broker appended the batch (it timed out waiting for
// replicas, or appended before finding too few in sync).
func mayHaveAppended(err error) bool {
	return errors.Is(err, kerr.RequestTimedOut) || errors.Is(err, kerr.NotEnoughReplicasAfterAppend)
}

// takeResponses returns the queued Produce answers, oldest first, valid
// until the next call.
func (s *sink) takeResponses() []produceResponse {
	clear(s.respWork)
	s.respMu.Lock()
	s.respWork, s.respQ = s.respQ, s.respWork[:0]
	s.respMu.Unlock()
	return s.respWork
}

// answerCursor finds a batch's partition in a Produce response. Brokers
// answer in request order, so it first looks where the previous match
// ended: a request of thousands of partitions is matched in linear time.
type answerCursor struct{ t, p int }

// sameTopic reports whether rt answers for ip's topic: by name up to v12,
// by id (the batch's, which the request carried) from v13 on, where the
// answer has no names.
func sameTopic(resp *kmsg.ProduceResponse, rt *kmsg.ProduceResponseTopic, ip *ioPart, id [16]byte) bool {
	if resp.Version >= 13 {
		return rt.TopicID == id && id != [16]byte{}
	}
	return rt.Topic == ip.topic.name
}

func (c *answerCursor) find(resp *kmsg.ProduceResponse, ip *ioPart, id [16]byte) *kmsg.ProduceResponseTopicPartition {
	for t := c.t; t < len(resp.Topics) && t <= c.t+1; t++ {
		rt := &resp.Topics[t]
		if !sameTopic(resp, rt, ip, id) {
			continue
		}
		p := 0
		if t == c.t {
			p = c.p
		}
		if p < len(rt.Partitions) && rt.Partitions[p].Partition == ip.acc.ID {
			c.t, c.p = t, p+1
			return &rt.Partitions[p]
		}
	}
	return findPartition(resp, ip, id)
}

func findPartition(resp *kmsg.ProduceResponse, ip *ioPart, id [16]byte) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if !sameTopic(resp, rt, ip, id) {
			continue
		}
		for j := range rt.Partitions {
			if rt.Partitions[j].Partition == ip.acc.ID {
				return &rt.Partitions[j]
			}
		}
	}
	return nil
}

// handlePartition handles rp, the answer for b; eps are the answer's
// NodeEndpoints (KIP-951).
func (s *sink) handlePartition(br *ioBroker, ip *ioPart, b *batch, rp *kmsg.ProduceResponseTopicPartition, eps []kmsg.ProduceResponseBroker) {
	err := kerr.ForCode(rp.ErrorCode)
	s.checkLogStart(ip, rp.LogStartOffset)
	switch {
	case err == nil, errors.Is(err, kerr.DuplicateSequenceNumber):
		ip.failures = 0
		ip.lastErr = nil
		ip.confirmed, ip.ackedAt = true, s.now
		if s.debug {
			s.p.log.Debug("acked batch", "topic", ip.topic.name, "partition", ip.acc.ID, "seq", b.IO.baseSequence(), "records", b.Records.Len(), "offset", rp.BaseOffset, "dup", err != nil)
		}
		if n := int64(b.Records.Len()); rp.BaseOffset >= 0 && rp.BaseOffset+n-1 > ip.lastAcked {
			ip.lastAcked = rp.BaseOffset + n - 1
		}
		s.succeed(b, rp.BaseOffset, rp.LogAppendTime)
		return
	case mayHaveAppended(err):
		b.IO.ambiguous = true // the broker may have appended it
	case s.txn != nil && s.txnProduceError(br, ip, b, err):
		return
	case s.idem != nil && isFenced(err):
		s.fenced(br, ip, b, err)
		return
	case errors.Is(err, kerr.MessageTooLarge) && b.Records.Len() > 1:
		// Kafka accepts smaller batches: split this one and resend its
		// halves in order.
		if halves, serr := s.split(b); serr == nil {
			ip.retry = append(halves, ip.retry...)
			s.markReady(ip)
			return
		}
	}
	msg := ""
	if rp.ErrorMessage != nil && *rp.ErrorMessage != "" {
		msg = ": " + conn.BrokerText(s.cfg.SASL, *rp.ErrorMessage) // bounded, escaped, no secret
	}
	err = fmt.Errorf("%s[%d] on broker %d: %w%s", ip.topic.name, ip.acc.ID, br.id, err, msg)
	if serr := staleTopic(ip, b); serr != nil {
		// Made for the topic before its recreation: the answer is about
		// the old topic's partition (its leader, its epoch), not the new
		// one's. Only the batch fails.
		s.fail(ip, b, fmt.Errorf("%w; the last error was: %w", serr, err))
		return
	}
	if kerr.IsRetriable(err) || isSequenceError(err) {
		moved := false
		if needsMetadata(err) {
			if ip.leader == br.id {
				// Wait for the new leader. An answer from a broker that no
				// longer leads the partition (a batch in flight before an
				// earlier answer or hint moved it) says nothing of the
				// leader it has now.
				ip.leader = -1
			}
			if errors.Is(err, kerr.NotLeaderOrFollower) || errors.Is(err, kerr.FencedLeaderEpoch) {
				moved = s.leaderHint(ip, rp.CurrentLeader, eps)
			}
			ip.acc.SetLeaderless(ip.leader < 0)
			s.markReadiness(ip)
			s.p.meta.Trigger() // as Java: a hint moves one partition, the refresh all the others
		}
		if isSequenceError(err) {
			s.sequenceError(ip, b, err)
		}
		s.retryOrFail(ip, b, err)
		if moved && !b.IO.hintMoved {
			// A new leader: retried at once, as Java's accumulator
			// does; once per batch.
			b.IO.hintMoved = true
			ip.backoff = time.Time{}
		}
		return
	}
	s.fail(ip, b, err)
}

// leaderHint moves ip to the leader a NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH answer names (KIP-951), without waiting for a
// Metadata answer, as Java's Metadata.updatePartitionLeadership: only a
// leader epoch newer than the one known (any, while none is), and only to
// a broker known or listed in the answer's endpoints, eps; a hint of the
// known epoch naming the known leader (the answer to a second batch in
// flight to the old leader) is the move already made, and reported as one. A broker the
// producer has not seen yet joins its brokers; a known broker keeps the
// address its metadata gave. It reports whether ip moved.
func (s *sink) leaderHint(ip *ioPart, cl kmsg.ProduceResponseTopicPartitionCurrentLeader, eps []kmsg.ProduceResponseBroker) bool {
	if cl.LeaderID < 0 || cl.LeaderEpoch < 0 {
		return false // none
	}
	if ip.epoch >= 0 && cl.LeaderEpoch == ip.epoch && cl.LeaderID == ip.leader {
		// The move already made (another batch in flight to the old
		// leader brought the same hint): the batch follows it.
		return true
	}
	if ip.epoch >= 0 && cl.LeaderEpoch <= ip.epoch {
		return false // stale
	}
	br := s.brokers[cl.LeaderID]
	if br == nil {
		i := slices.IndexFunc(eps, func(e kmsg.ProduceResponseBroker) bool { return e.NodeID == cl.LeaderID })
		if i < 0 || conn.CheckHost(eps[i].Host) != nil || eps[i].Port <= 0 || eps[i].Port > 65535 {
			return false // nowhere to send to: the metadata refresh tells
		}
		addr := net.JoinHostPort(eps[i].Host, strconv.Itoa(int(eps[i].Port)))
		if s.hintedBrokers >= maxHintedBrokers {
			// A broker answering with a new node id each time would
			// make one per answer: wait for the metadata instead.
			if s.now.Sub(s.hintRefusedAt) >= time.Minute {
				s.hintRefusedAt = s.now
				s.p.log.Warn("ignoring a Produce answer's new leader: too many brokers learned from answers and not yet in metadata (KIP-951)",
					"broker", cl.LeaderID, "addr", addr, "limit", maxHintedBrokers)
			}
			return false
		}
		br = &ioBroker{id: cl.LeaderID, addr: addr, stats: s.p.rec.broker(cl.LeaderID, addr), hinted: true, hintSnap: s.p.meta.Snapshot()}
		s.brokers[cl.LeaderID] = br
		s.hintedBrokers++
		s.p.log.Info("broker learned from a Produce answer's new leader (KIP-951)", "broker", cl.LeaderID, "addr", addr)
	}
	ip.leader, ip.epoch = cl.LeaderID, cl.LeaderEpoch
	if br.hinted {
		ip.hinted, ip.hintedBy = true, br.id
		s.hintedParts = true
	}
	return true
}

// maxHintedBrokers bounds the brokers learned from Produce answers
// (KIP-951) that no metadata snapshot has listed yet.
const maxHintedBrokers = 16

// dropHinted applies snap, a metadata snapshot, to what KIP-951 hints
// made: a broker learned from an answer that snap lists is a broker like
// the others; one it does not list, if snap is newer than the hint, is
// dropped once idle (nothing in flight, no dial), and the partitions a
// hint moved to such a broker forget the hint's leader and epoch, so that
// applyTopic gives them snap's (a hint's epoch would make it skip snap's
// as stale). Called by applyMetadata before applyTopic.
func (s *sink) dropHinted(snap *metadata.Snapshot) {
	if s.hintedBrokers > 0 {
		for id, br := range s.brokers {
			if !br.hinted {
				continue
			}
			if _, ok := snap.Brokers[id]; ok {
				br.hinted, br.hintSnap = false, nil
				s.hintedBrokers--
				continue
			}
			if br.hintSnap != snap && br.inflight == 0 && !br.dialing {
				s.removeBroker(br)
			}
		}
	}
	if !s.hintedParts {
		return
	}
	s.hintedParts = false
	for _, t := range s.topics {
		for _, ip := range t.parts {
			if !ip.hinted {
				continue
			}
			if _, ok := snap.Brokers[ip.hintedBy]; ok {
				ip.hinted = false
				continue
			}
			if br := s.brokers[ip.hintedBy]; br != nil && br.hintSnap == snap {
				s.hintedParts = true // not newer than the hint: the next one tells
				continue
			}
			ip.hinted = false
			if ip.leader == ip.hintedBy {
				ip.leader = -1
				ip.acc.SetLeaderless(true)
			}
			ip.epoch = -1
		}
	}
}

// removeBroker forgets br, a hint-created broker with nothing in flight.
func (s *sink) removeBroker(br *ioBroker) {
	if br.conn != nil {
		s.dropConn(br, nil)
	}
	for _, o := range br.lingered {
		s.seal(o.opened) // its batches go to their partitions' leaders now
	}
	br.lingered = nil
	for _, ip := range br.ready {
		// Off its list for good: a broker of the same id made later
		// (metadata, another hint) lists it again (markReady).
		ip.listed = slices.DeleteFunc(ip.listed, func(id int32) bool { return id == br.id })
		if ip.readyOn == br.id {
			ip.readyOn = -1
		}
	}
	br.ready = nil
	delete(s.brokers, br.id)
	s.hintedBrokers--
	s.p.rec.forgetBroker(br.id, br.stats)
	s.p.log.Info("dropping a broker learned from a Produce answer (KIP-951): the metadata does not list it", "broker", br.id, "addr", br.addr)
}

// checkLogStart reports acknowledged records that left the log: the
// broker's log start offset moved past the last offset it acknowledged.
func (s *sink) checkLogStart(ip *ioPart, logStart int64) {
	if ip.lastAcked < 0 || logStart <= ip.lastAcked {
		return
	}
	e := &DataLossError{Topic: ip.topic.name, Partition: ip.acc.ID, LastAcked: ip.lastAcked, LogStart: logStart}
	ip.lastAcked = logStart - 1 // report each move once
	s.p.log.Warn("acknowledged records are no longer in the log", "topic", e.Topic, "partition", e.Partition,
		"last_acked", e.LastAcked, "log_start", e.LogStart)
	if s.cfg.OnDataLoss != nil {
		s.callOnDataLoss(e)
	}
}

// callOnDataLoss runs Config.OnDataLoss, recovering and logging a panic
// in it, as for every other user callback: the IO goroutine goes on.
func (s *sink) callOnDataLoss(e *DataLossError) {
	defer func() {
		if v := recover(); v != nil {
			s.p.logPanic(v, "callback", "OnDataLoss", "topic", e.Topic, "partition", e.Partition)
		}
	}()
	s.cfg.OnDataLoss(e)
}

// landed removes b from ip's in-flight list once its answer (or failure)
// is in.
func (ip *ioPart) landed(b *batch) {
	for i, x := range ip.inflight {
		if x == b {
			ip.inflight = slices.Delete(ip.inflight, i, i+1)
			if b.IO.attempts > 1 {
				ip.resent--
			}
			return
		}
	}
}

func needsMetadata(err error) bool {
	for _, e := range []error{kerr.NotLeaderOrFollower, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.LeaderNotAvailable,
		kerr.NetworkException, kerr.KafkaStorageError, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retryOrFail queues b to be sent again, in sequence order, unless its
// delivery timeout has passed.
func (s *sink) retryOrFail(ip *ioPart, b *batch, err error) {
	ip.lastErr = err
	if serr := staleTopic(ip, b); serr != nil {
		s.fail(ip, b, fmt.Errorf("%w; the last error was: %w", serr, err))
		return
	}
	if s.debug {
		s.p.log.Debug("retrying batch", "topic", ip.topic.name, "partition", ip.acc.ID, "records", b.Records.Len(), "seq", b.IO.baseSequence(), "attempts", b.IO.attempts, "ambiguous", b.IO.ambiguous, "err", err)
	}
	if s.now.Sub(b.Created) >= s.cfg.DeliveryTimeout {
		s.fail(ip, b, fmt.Errorf("%w: %d records for %s[%d] not acknowledged after %v; the last error was: %w",
			ErrDeliveryTimeout, b.Records.Len(), ip.topic.name, ip.acc.ID, s.cfg.DeliveryTimeout, err))
		return
	}
	ip.failures++
	ip.backoff = s.now.Add(s.backoff(ip.failures))
	// Keep retries ordered by sequence (or creation) so that they go out in
	// their original order.
	i := len(ip.retry)
	for i > 0 && before(b, ip.retry[i-1]) {
		i--
	}
	ip.retry = append(ip.retry, nil)
	copy(ip.retry[i+1:], ip.retry[i:])
	ip.retry[i] = b
	s.markReady(ip)
}

func before(a, b *batch) bool {
	if a.IO.baseSequence() >= 0 && b.IO.baseSequence() >= 0 {
		return a.IO.baseSequence() < b.IO.baseSequence()
	}
	return a.Created.Before(b.Created)
}

// maxRecordOverhead bounds what a record adds to its body in a batch: its
// length (5-byte varint), attributes (1), timestamp delta (10) and offset
// delta (5).
const maxRecordOverhead = 21

// split decodes b and rebuilds its records into two batches of half the
// records each, with memory from the pool (non-blocking).
func (s *sink) split(b *batch) ([]*batch, error) {
	// The batch's own uncompressed size bounds what decoding may produce:
	// a batch of any size splits.
	dec, err := recordbatch.Decode(b.IO.raw, max(b.IO.uncompressed, len(b.IO.raw)))
	if err != nil {
		return nil, err
	}
	half := len(dec.Records) / 2
	parts := [][]recordbatch.Record{dec.Records[:half], dec.Records[half:]}
	out := make([]*batch, 0, 2)
	for i, recs := range parts {
		size := recordbatch.HeaderSize
		for _, r := range recs {
			size += len(r.Body) + maxRecordOverhead
		}
		nb := s.p.acc.NewDetachedBatch(b.Partition, size)
		for _, r := range recs {
			if !nb.Builder.AppendBody(r.Timestamp, r.Body) {
				panic("producer: split batch overflow")
			}
		}
		for j := range recs {
			s.p.acc.AddCompletion(nb, *b.Records.At(i*half + j))
		}
		nb.Created = b.Created
		nb.IO.attempts = b.IO.attempts
		nb.IO.topicID = b.IO.topicID // made for the same topic (staleTopic)
		if err := s.finish(nb); err != nil {
			for _, x := range append(out, nb) {
				s.p.acc.Free(x) // drops copies: b keeps the completions
			}
			return nil, err
		}
		s.inheritSequence(nb, b, i*half)
		out = append(out, nb)
	}
	// The halves own the completions now, and their bookkeeping charge;
	// the rest of b's memory goes back.
	s.p.acc.MoveCredit(b, out...)
	s.p.acc.Free(b)
	for _, nb := range out {
		s.trackExpiry(opened{part: nb.Partition, b: nb, gen: nb.Gen(), at: nb.Created})
	}
	return out, nil
}

// forgetHintedLeader takes br, a hint-created broker about to be removed,
// off the partitions a hint moved to it: they wait for the metadata, whose
// leader and epoch they take (their hint's epoch forgotten).
func (s *sink) forgetHintedLeader(br *ioBroker) {
	for _, t := range s.topics {
		for _, ip := range t.parts {
			if ip.hinted && ip.hintedBy == br.id {
				ip.hinted = false
				if ip.leader == br.id {
					ip.leader = -1
					ip.acc.SetLeaderless(true)
				}
				ip.epoch = -1
			}
		}
	}
}
