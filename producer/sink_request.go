// The IO goroutine's Produce requests: which batches go out to which
// leader, finishing (compressing) and stamping them, and reusing requests.

package producer

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
)

// sendAll writes as many Produce requests as the in-flight limits allow.
func (s *sink) sendAll() {
	if s.idem != nil && !s.idem.canSend() {
		return
	}
	for _, br := range s.brokers {
		if len(br.ready) == 0 {
			continue
		}
		if br.conn != nil && !s.connUsable(br) {
			continue // its requests in flight fail first, then it redials
		}
		if br.conn == nil {
			s.dial(br)
			continue
		}
		for br.inflight < s.cfg.MaxInFlight && len(br.ready) > 0 {
			s.precompress(br)
			if !s.sendOne(br) {
				break
			}
		}
	}
}

// sendOne builds and writes one Produce request for br from its ready
// partitions. It reports false when nothing could be sent.
func (s *sink) sendOne(br *ioBroker) bool {
	pr := s.newRequest()
	req := &pr.req
	size := 0
	keep := br.ready[:0]
	unlist := func(ip *ioPart) {
		ip.listed = slices.DeleteFunc(ip.listed, func(id int32) bool { return id == br.id })
		if ip.readyOn == br.id {
			ip.readyOn = -1
		}
	}
	for i, ip := range br.ready {
		if ip.readyOn != br.id || ip.leader != br.id {
			unlist(ip) // its leader moved: it is (or will be) listed there
			continue
		}
		b, more := s.nextBatch(ip, s.cfg.MaxRequestSize-size, len(pr.batches) == 0)
		if b != nil {
			rt := pr.topic(ip.topic)
			if len(rt.Partitions) == 0 {
				s.p.meta.Touch(ip.topic.name) // in use: keep it in metadata refreshes
			}
			rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: ip.acc.ID, Records: b.IO.raw})
			pr.batches = append(pr.batches, b)
			size += len(b.IO.raw)
			s.observeSent(b)
			if s.debug {
				s.p.log.Debug("sending batch", "topic", ip.topic.name, "partition", ip.acc.ID, "seq", b.IO.baseSequence(), "records", b.Records.Len(), "attempt", b.IO.attempts, "broker", br.id)
			}
			ip.inflight = append(ip.inflight, b)
			if b.IO.attempts > 1 {
				ip.resent++
			}
		}
		if more {
			keep = append(keep, ip)
		} else {
			unlist(ip)
		}
		if size >= s.cfg.MaxRequestSize {
			keep = append(keep, br.ready[i+1:]...)
			break
		}
	}
	clear(br.ready[len(keep):])
	br.ready = keep
	if len(pr.batches) == 0 {
		s.freeRequest(pr)
		return false
	}
	// Rotate so that the next request starts with other partitions.
	if len(br.ready) > 1 {
		br.ready = append(br.ready[1:], br.ready[0])
	}
	br.inflight++
	s.inflight++
	s.p.stats.inflight.Add(1)
	s.p.rec.requestWritten(br.stats)
	pr.sentAt = s.now
	br.used = s.now
	c, batches := br.conn, pr.batches
	max := int16(-1)
	if s.txn != nil {
		max = s.txn.produceMax() // v11, or v13 (v12 by name): the transaction version's flow
	}
	if pr.byName && (max < 0 || max > produceMaxByName) {
		max = produceMaxByName // a topic without an id (KIP-516)
	}
	c.SendMax(req, max, func(resp kmsg.Response, err error) {
		s.respMu.Lock()
		s.respQ = append(s.respQ, produceResponse{broker: br, conn: c, req: pr, batches: batches, resp: resp, err: err})
		s.respMu.Unlock()
		select {
		case s.respKick <- struct{}{}:
		default:
		}
	})
	return true
}

// produceRequest is a Produce request being built or in flight, with its
// batches in request order. The IO goroutine reuses them (see newRequest),
// so that a request of thousands of partitions does not regrow its slices
// every time.
type produceRequest struct {
	req     kmsg.ProduceRequest
	batches []*batch
	topics  map[*ioTopic]int // index in req.Topics
	sentAt  time.Time        // handed to the connection, for the request latency
	byName  bool             // a topic has no id: the request goes at v12 at most
}

// produceMaxByName is the last Produce version that names topics: v13
// addresses them by topic id (KIP-516, Kafka 4.1), which metadata from a
// broker without topic ids (the zero id) cannot give.
const produceMaxByName int16 = 12

// maxFreeRequests bounds the idle requests kept: enough for every request
// in flight to three brokers at MaxInFlight 5; beyond that requests are
// made afresh (and a large one regrows its slices).
const maxFreeRequests = 16

// newRequest returns an empty Produce request with the producer's acks and
// timeout.
func (s *sink) newRequest() *produceRequest {
	pr, ok := s.reqFree.Get()
	if !ok {
		pr = &produceRequest{topics: make(map[*ioTopic]int)}
	}
	topics := pr.req.Topics
	pr.req.Default()
	pr.req.Topics = topics[:0]
	pr.byName = false
	pr.req.Acks = s.cfg.Acks.Wire()
	pr.req.TimeoutMillis = int32(s.cfg.RequestTimeout / time.Millisecond)
	if s.txn != nil {
		pr.req.TransactionID = &s.cfg.TransactionalID
	}
	return pr
}

// topic returns the request's entry for t, adding it first if needed.
func (pr *produceRequest) topic(t *ioTopic) *kmsg.ProduceRequestTopic {
	if i, ok := pr.topics[t]; ok {
		return &pr.req.Topics[i]
	}
	i := len(pr.req.Topics)
	pr.topics[t] = i
	var parts []kmsg.ProduceRequestTopicPartition
	if i < cap(pr.req.Topics) {
		parts = pr.req.Topics[:i+1][i].Partitions[:0] // reuse the old entry's partitions
	}
	pr.req.Topics = append(pr.req.Topics, kmsg.NewProduceRequestTopic())
	rt := &pr.req.Topics[i]
	rt.Topic, rt.TopicID, rt.Partitions = t.name, t.id, parts
	if t.id == ([16]byte{}) {
		pr.byName = true
	}
	return rt
}

// freeRequest keeps pr for reuse once its answer has been handled (the
// connection has long encoded it), dropping its references to batches.
func (s *sink) freeRequest(pr *produceRequest) {
	if pr == nil || s.reqFree.Len() == s.reqFree.Max {
		return
	}
	for i := range pr.req.Topics {
		clear(pr.req.Topics[i].Partitions)
	}
	clear(pr.batches)
	pr.batches = pr.batches[:0]
	clear(pr.topics)
	s.reqFree.Put(pr)
}

// nextBatch returns ip's next batch to send if it may send one now
// (mayDrain) and it fits in room bytes (any size if first), and whether ip
// may have more.
func (s *sink) nextBatch(ip *ioPart, room int, first bool) (b *batch, more bool) {
	if ok, more := s.mayDrain(ip); !ok {
		return nil, more
	}
	if len(ip.retry) > 0 {
		b = ip.retry[0]
		if err := staleTopic(ip, b); err != nil {
			ip.retry = popFront(ip.retry, 1)
			s.fail(ip, b, err) // made for the topic before its recreation
			return nil, len(ip.retry) > 0 || ip.hasSealed
		}
		if len(b.IO.raw) > room && !first {
			return nil, true
		}
		ip.retry = popFront(ip.retry, 1)
		b.IO.topicID = ip.topic.id // the same, or an id learned since (answers are matched by it)
		if s.idem != nil && b.IO.baseSequence() < 0 {
			s.sequence(ip, b)
		}
		b.IO.attempts++
		s.p.stats.retries.Add(1)
		return b, len(ip.retry) > 0 || ip.hasSealed
	}
	nb := ip.acc.PeekSealed()
	if nb == nil {
		ip.hasSealed = false
		return nil, false
	}
	if err := s.finish(nb); err != nil {
		ip.acc.NextSealed()
		s.fail(ip, nb, err)
		return nil, true
	}
	if len(nb.IO.raw) > room && !first {
		return nil, true
	}
	// Whether another sealed batch follows, taken under the same lock:
	// a partition drained of its last one leaves the ready list now,
	// instead of being visited (and locked) again by the next request.
	// One sealed later is announced by a Sealed event.
	_, more = ip.acc.PopSealed()
	if !more {
		ip.hasSealed = false
	}
	if ip.topic.ts.watched.Load() && settle(nb) {
		// A record's Send context ended before this request: the
		// batch goes without it (and without any, when all ended).
		if nb = s.withoutEnded(ip, nb); nb == nil {
			return nil, true
		}
	}
	if s.idem != nil {
		s.sequence(ip, nb)
	} else {
		recordbatch.Stamp(nb.IO.raw, -1, -1, -1)
	}
	nb.IO.attempts++
	nb.IO.topicID = ip.topic.id // the topic it is made for, from now on
	return nb, more
}

// staleTopic returns the error of a batch made for a topic that has since
// been deleted and recreated under the same name (its id is no longer the
// topic's): it must not land in the new topic. Nil otherwise, and while
// either id is unknown (a broker without topic ids).
func staleTopic(ip *ioPart, b *batch) error {
	var zero [16]byte
	if b.IO.topicID == zero || ip.topic.id == zero || b.IO.topicID == ip.topic.id {
		return nil
	}
	return recreatedErr(ip.topic, ip.acc.ID, b.IO.topicID)
}

// recreatedErr is the error of records made for topic id old of t, which
// was deleted and recreated with the id it has now.
func recreatedErr(t *ioTopic, partition int32, old [16]byte) error {
	return fmt.Errorf("%s[%d]: the topic was deleted and recreated (topic id %s, now %s): records made for the old topic are not sent to the new one: %w",
		t.name, partition, uuidString(old), uuidString(t.id), kerr.UnknownTopicID)
}

// finish compresses a sealed batch once.
func (s *sink) finish(b *batch) error {
	var err error
	s.scratch, err = s.finishInto(b, s.scratch)
	return err
}

// finishInto is finish with the caller's scratch memory, which it returns
// (possibly grown). On error b is left unfinished.
func (s *sink) finishInto(b *batch, scratch []byte) ([]byte, error) {
	if b.IO.raw != nil {
		return scratch, nil
	}
	b.IO.uncompressed = b.Builder.Len()
	raw, scratch, err := b.Builder.Finish(s.p.compressor, scratch)
	if err != nil {
		return scratch, err
	}
	b.IO.raw = raw
	return scratch, nil
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
