package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/kerr"
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

// maybeCreateTopic sends CreateTopics for a topic the cluster does not know,
// when Config.AutoCreateTopics is set. A KIP-599 THROTTLING_QUOTA_EXCEEDED
// answer is retried after its ThrottleTimeMs.
func (s *sink) maybeCreateTopic(t *ioTopic) {
	if !s.cfg.AutoCreateTopics || t.creating || s.now.Before(t.createAt) || !errors.Is(t.err, kerr.UnknownTopicOrPartition) {
		return
	}
	t.creating = true
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(s.cfg.RequestTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = t.name
	rt.NumPartitions = s.cfg.AutoCreatePartitions
	rt.ReplicationFactor = s.cfg.AutoCreateReplicationFactor
	req.Topics = append(req.Topics, rt)
	timeout := s.cfg.RequestTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := s.p.meta.DoController(ctx, req)
		s.post(func() { s.handleCreateTopic(t, resp, err) })
	}()
}

func (s *sink) handleCreateTopic(t *ioTopic, r kmsg.Response, err error) {
	t.creating = false
	var wait time.Duration
	if err == nil {
		resp := r.(*kmsg.CreateTopicsResponse)
		for _, rt := range resp.Topics {
			if rt.Topic != t.name {
				continue
			}
			err = kerr.ForCode(rt.ErrorCode)
			if errors.Is(err, kerr.ThrottlingQuotaExceeded) {
				wait = time.Duration(resp.ThrottleMillis) * time.Millisecond
			}
		}
	}
	switch {
	case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		s.p.log.Info("created topic", "topic", t.name)
		s.p.meta.Want(t.name)
		s.p.meta.Trigger()
		return
	case wait > 0:
		s.p.log.Info("topic creation throttled (KIP-599)", "topic", t.name, "throttle", wait)
		s.p.stats.throttled.Add(int64(wait))
	default:
		wait = s.backoff(3)
		s.p.log.Warn("cannot create topic", "topic", t.name, "err", fmt.Errorf("%w", err))
	}
	t.createAt = s.now.Add(wait)
}
