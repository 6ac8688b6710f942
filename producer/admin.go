package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	req.TransactionTimeoutMillis = int32(s.cfg.DeliveryTimeout / time.Millisecond)
	req.ProducerID, req.ProducerEpoch = id.producerID, id.epoch
	if id.needNewID {
		req.ProducerID, req.ProducerEpoch = -1, -1
	}
	timeout := s.cfg.RequestTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := s.p.meta.Do(ctx, req)
		s.post(func() { s.handleProducerID(resp, err) })
	}()
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

// post runs f on the IO goroutine, unless the producer is closing.
func (s *sink) post(f func()) {
	select {
	case s.admin <- f:
	case <-s.p.quit:
	}
}

// hasWork reports whether anything waits to be sent.
func (s *sink) hasWork() bool {
	for _, br := range s.brokers {
		if len(br.ready) > 0 {
			return true
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
		if err == nil {
			bumped := id.producerID >= 0
			id.producerID, id.epoch = resp.ProducerID, resp.ProducerEpoch
			id.needBump, id.needNewID, id.failures, id.lastErr = false, false, 0, nil
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
	s.p.log.Warn("InitProducerId failed; retrying", "err", err, "attempt", id.failures)
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
				b.BaseSequence = -1
				if b.Ambiguous {
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

// maxCreateTopics bounds the topics of one CreateTopics request.
const maxCreateTopics = 256

// wantsCreate says whether t is due for a CreateTopics attempt: the producer
// creates topics itself (Config.AutoCreateTopics), the cluster does not know
// t, no attempt for it is in flight, and its backoff (after a failure, a
// KIP-599 throttle, or a success that metadata does not show yet) is over.
func (s *sink) wantsCreate(t *ioTopic) bool {
	return s.cfg.AutoCreateTopics && !t.creating && !s.now.Before(t.createAt) &&
		errors.Is(t.err, kerr.UnknownTopicOrPartition)
}

// maybeCreateTopic sends CreateTopics for a topic the cluster does not know,
// when Config.AutoCreateTopics is set. One request is in flight at a time,
// and it carries every topic that is due (t and the other parked topics), as
// Java's Admin client batches them: a broker under a KIP-599 quota handles
// one request at a time per connection and mutes the connection after each
// throttled answer, so one request per topic would queue behind each other
// until they time out. A topic answered THROTTLING_QUOTA_EXCEEDED is retried
// after the answer's ThrottleTimeMs.
func (s *sink) maybeCreateTopic(t *ioTopic) {
	if s.creatingTopics || !s.wantsCreate(t) {
		return
	}
	batch := []*ioTopic{t}
	for o := range s.parked {
		if o != t && len(batch) < maxCreateTopics && len(o.parts) == 0 && s.wantsCreate(o) {
			batch = append(batch, o)
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(s.cfg.RequestTimeout / time.Millisecond)
	for _, bt := range batch {
		bt.creating = true
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = bt.name
		rt.NumPartitions = s.cfg.AutoCreatePartitions
		rt.ReplicationFactor = s.cfg.AutoCreateReplicationFactor
		req.Topics = append(req.Topics, rt)
	}
	s.creatingTopics = true
	timeout := s.cfg.RequestTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := s.p.meta.DoController(ctx, req)
		s.post(func() { s.handleCreateTopics(batch, resp, err) })
	}()
}

// handleCreateTopics settles each topic of one CreateTopics request.
func (s *sink) handleCreateTopics(batch []*ioTopic, r kmsg.Response, err error) {
	s.creatingTopics = false
	var resp *kmsg.CreateTopicsResponse
	if err == nil {
		resp = r.(*kmsg.CreateTopicsResponse)
	}
	created := false
	for _, t := range batch {
		t.creating = false
		terr := err
		var wait time.Duration
		if resp != nil {
			terr = fmt.Errorf("no answer for the topic in the CreateTopics response")
			for i := range resp.Topics {
				rt := &resp.Topics[i]
				if rt.Topic != t.name {
					continue
				}
				terr = kerr.ForCode(rt.ErrorCode)
				if errors.Is(terr, kerr.ThrottlingQuotaExceeded) {
					wait = time.Duration(resp.ThrottleMillis) * time.Millisecond
				}
				break
			}
		}
		switch {
		case terr == nil, errors.Is(terr, kerr.TopicAlreadyExists):
			s.p.log.Info("created topic", "topic", t.name)
			s.p.meta.Want(t.name)
			created = true
			// Metadata may lag the creation for a moment: do not ask
			// again before it had time to show the topic.
			wait = s.cfg.RetryBackoffMax
		case wait > 0:
			s.p.log.Info("topic creation throttled (KIP-599)", "topic", t.name, "throttle", wait)
			s.p.stats.throttled.Add(int64(wait))
		default:
			wait = s.backoff(3)
			s.p.log.Warn("cannot create topic", "topic", t.name, "err", fmt.Errorf("%w", terr))
		}
		t.createAt = s.now.Add(wait)
	}
	if created {
		s.p.meta.Trigger()
	}
}
