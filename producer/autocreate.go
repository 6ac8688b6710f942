// Topic auto-creation (Config.AutoCreateTopics): CreateTopics for topics the
// cluster does not know, batched, one request in flight, KIP-599 throttles;
// a topic found with another partition count than asked is logged once.

package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
)

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
	s.background.Go(func() {
		// Close ends it (closing is canceled before quit).
		ctx, cancel := context.WithTimeout(s.p.closing, timeout)
		defer cancel()
		resp, err := s.p.meta.DoController(ctx, req)
		s.post(func() { s.handleCreateTopics(batch, resp, err) })
	})
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
				terr = conn.BrokerError(s.cfg.SASL, rt.ErrorCode, rt.ErrorMessage)
				if errors.Is(terr, kerr.ThrottlingQuotaExceeded) {
					wait = time.Duration(resp.ThrottleMillis) * time.Millisecond
				}
				break
			}
		}
		switch {
		case terr == nil, errors.Is(terr, kerr.TopicAlreadyExists):
			s.p.log.Info("created topic", "topic", t.name)
			s.p.logRepeat.Reset("create " + t.name)
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
			s.p.log.Log(context.Background(), s.p.logRepeat.Level("create "+t.name, s.now), "cannot create topic", "topic", t.name, "err", fmt.Errorf("%w", terr))
		}
		t.createAt = s.now.Add(wait)
	}
	if created {
		s.p.meta.Trigger()
	}
}

// checkPartitionCount warns, once per topic, when the producer would create
// t with Config.AutoCreatePartitions partitions but found it with n: it
// existed already (made by someone else, by a broker's auto-creation, or
// before the count changed), and the count asked for does not apply. It
// runs when metadata first shows t's partitions; a topic growing later is
// not reported.
func (s *sink) checkPartitionCount(t *ioTopic, n int) {
	if t.sized {
		return
	}
	t.sized = true
	if asked := s.cfg.AutoCreatePartitions; s.cfg.AutoCreateTopics && asked > 0 && int32(n) != asked {
		s.p.log.Warn("topic exists with a partition count other than AutoCreatePartitions: producing to its partitions",
			"topic", t.name, "partitions", n, "asked", asked)
	}
}
