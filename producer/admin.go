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
}

func (i *idempotence) ready() bool {
	return i.producerID >= 0 && !i.needBump && !i.requesting
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
	if id.needBump && s.inflight > 0 {
		return // bump once every answer is in
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
	if s.now.Before(id.retryAt) || !s.hasWork() {
		return
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
			id.needBump, id.needNewID, id.failures = false, false, 0
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
			keep := ip.retry[:0]
			for _, b := range ip.retry {
				b.BaseSequence = -1
				if b.Ambiguous {
					s.fail(ip, b, fmt.Errorf("%s[%d]: the producer epoch was bumped while the batch's earlier attempt was unresolved: %w",
						ip.topic.name, ip.acc.ID, ip.lastErr))
					continue
				}
				keep = append(keep, b)
			}
			clear(ip.retry[len(keep):])
			ip.retry = keep
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
