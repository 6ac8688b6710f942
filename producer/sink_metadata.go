// The IO goroutine's metadata: brokers, partitions and leaders from
// snapshots, topics that fail fast, and parked records moved into batches
// once their partitions are known.

package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
)

// applyMetadata updates brokers, partitions and leaders from the newest
// snapshot.
func (s *sink) applyMetadata() {
	snap := s.p.meta.Snapshot()
	s.dropHinted(snap)
	for id, b := range snap.Brokers {
		br := s.brokers[id]
		addr := b.Addr()
		if br == nil {
			br = &ioBroker{id: id, addr: addr, stats: s.p.rec.broker(id, addr)}
			s.brokers[id] = br
		} else if br.addr != addr {
			br.addr = addr
			br.stats = s.p.rec.broker(id, addr) // the same stats, the new address
			if br.conn != nil {
				s.dropConn(br, nil)
			}
		}
	}
	for _, t := range s.topics {
		s.applyTopic(t, snap)
	}
	s.checkAuth()
}

// applyTopic updates t from snap, if snap has it.
func (s *sink) applyTopic(t *ioTopic, snap *metadata.Snapshot) {
	mt := snap.Topics[t.name]
	if mt == nil {
		return
	}
	if mt.Err != nil || len(mt.Partitions) == 0 {
		t.err = mt.Err
		if t.err == nil {
			t.err = kerr.LeaderNotAvailable
		}
		switch {
		case !kerr.IsRetriable(t.err):
			// Not authorized, or an invalid name: waiting does not
			// help. Fail what is parked and what comes, at once, until
			// the metadata says otherwise.
			s.failTopic(t, failFatal, fmt.Errorf("topic %q: %w", t.name, t.err))
		case t.failing == failFatal,
			t.failing == failMissing && !errors.Is(t.err, kerr.UnknownTopicOrPartition):
			s.setFailing(t, notFailing, nil) // the condition changed: records wait again
		case t.failing == failMissing && !errors.Is(t.ts.acc.Failing(), t.err):
			// Its records failed before an answer came; now one says why.
			s.setFailing(t, failMissing, s.missingErr(t, t.err))
		}
		if errors.Is(t.err, kerr.UnknownTopicOrPartition) {
			s.warnMissing(t)
		}
		s.maybeCreateTopic(t)
		return
	}
	t.err = nil
	t.warnedAt = time.Time{}
	s.checkPartitionCount(t, len(mt.Partitions))
	recreated := t.id != mt.ID && t.id != ([16]byte{}) && mt.ID != ([16]byte{})
	if recreated {
		// Deleted and created again: the new topic's leader epochs
		// restart at 0, so the old ones say nothing about them.
		// Nor do the brokers have producer state for its partitions (the
		// send gate lets one batch go until one is acknowledged again),
		// and offsets start over (OnDataLoss compares with the new ones).
		s.p.log.Warn("topic deleted and recreated (new topic id): failing the records made for the old one",
			"topic", t.name, "partitions", len(mt.Partitions), "old_id", uuidString(t.id), "new_id", uuidString(mt.ID))
		for _, ip := range t.parts {
			ip.epoch, ip.confirmed, ip.lastAcked = -1, false, -1
		}
	}
	old := t.id
	if mt.ID != ([16]byte{}) {
		// An answer without ids (a broker before Metadata v10, or one
		// not upgraded yet) keeps the id known: forgetting it would hide
		// a recreation seen by the next answer with ids.
		t.id = mt.ID
	}
	if recreated {
		// What is buffered was made for the old topic: it never goes to
		// the new one. Batches in flight fail when their answer puts
		// them back in retry (staleTopic).
		// Partitions the new topic lacks fail as gone (failGone).
		s.failPendingAll(t.parts[:min(len(t.parts), len(mt.Partitions))], func(ip *ioPart) error {
			return recreatedErr(t, ip.acc.ID, old)
		})
	}
	if t.failing != notFailing && t.failing != failAuth {
		// An authentication failure is checkAuth's to clear: a failed
		// fetch applies the old snapshot, which still has the topic.
		s.setFailing(t, notFailing, nil)
	}
	s.updatePartitions(t, mt, recreated)
}

// missingWarnEvery is how often warnMissing logs a topic that stays
// missing again.
const missingWarnEvery = time.Minute

// warnMissing logs at Warn that metadata does not have t
// (UNKNOWN_TOPIC_OR_PARTITION), as Java's producer does at once: the first
// time at once, then at most once a minute while it stays missing, so that
// a topic that was never created (broker auto-creation off) is seen in the
// log long before its records fail at MaxBlock. A topic the producer
// creates itself (Config.AutoCreateTopics) is not logged: CreateTopics is on
// its way, and logs its own failure.
func (s *sink) warnMissing(t *ioTopic) {
	if s.cfg.AutoCreateTopics || (!t.warnedAt.IsZero() && s.now.Sub(t.warnedAt) < missingWarnEvery) {
		return
	}
	msg := "topic not in metadata (UNKNOWN_TOPIC_OR_PARTITION): its records wait for it, up to MaxBlock; is it created?"
	if !t.warnedAt.IsZero() {
		msg = "topic still not in metadata (UNKNOWN_TOPIC_OR_PARTITION): its records wait for it, up to MaxBlock"
	}
	t.warnedAt = s.now
	s.p.log.Warn(msg, "topic", t.name, "max_block", s.cfg.MaxBlock, "auto_create_allowed", !s.cfg.DisableAutoTopicCreation)
}

// setFailing records why t's records fail fast (err nil: they do not).
func (s *sink) setFailing(t *ioTopic, kind failKind, err error) {
	if kind == t.failing && kind == notFailing {
		return
	}
	if kind != t.failing {
		if kind == notFailing {
			s.p.log.Info("topic usable again: records wait for it again", "topic", t.name)
		} else {
			s.p.log.Warn("failing records of topic at once", "topic", t.name, "err", err)
		}
	}
	t.failing = kind
	t.ts.acc.SetFailing(err)
}

// failTopic makes t fail fast with err and fails its parked records.
func (s *sink) failTopic(t *ioTopic, kind failKind, err error) {
	s.setFailing(t, kind, err)
	records, bytes := t.ts.acc.Parked()
	t.ts.acc.FailParked(func(c completion) {
		s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
	})
	s.unpark(t, records, bytes, err)
}

// updatePartitions applies mt's partitions and leaders to t. The
// accumulator's partitions only grow (Sends hold on to the published slice);
// a topic recreated with fewer partitions (recreated: a new topic id) keeps
// them, but the partitioners see only the new count (topicState.live), and
// what is buffered for the partitions past it fails (failGone).
func (s *sink) updatePartitions(t *ioTopic, mt *metadata.Topic, recreated bool) {
	n := len(mt.Partitions)
	if recreated || t.ts.count.Load() > 0 {
		// The count once the topic has shrunk; 0 while it never has.
		// Only a new topic id lowers it: a topic never loses partitions,
		// so an answer of the same topic listing fewer (a broker or proxy
		// with partial metadata) fails nothing.
		c := int32(n)
		if n >= len(t.parts) {
			c = 0
		}
		if old := t.ts.count.Load(); !recreated && c > 0 && c < old {
			c = old
		}
		if old := t.ts.count.Load(); old != c {
			if c > 0 {
				s.p.log.Warn("topic recreated with fewer partitions: failing the records of the partitions gone", "topic", t.name, "partitions", n, "before", len(t.parts))
			}
			t.ts.count.Store(c)
		}
	}
	if n > len(t.parts) {
		accParts := make([]*accPartition, n)
		copy(accParts, t.ts.acc.KnownPartitions())
		for i := len(t.parts); i < n; i++ {
			ap := s.p.acc.NewPartition(t.ts.acc, int32(i))
			ip := &ioPart{topic: t, acc: ap, leader: -1, epoch: -1, readyOn: -1, lastAcked: -1}
			ap.IO = ip
			ap.SetLeaderless(true)
			accParts[i] = ap
			t.parts = append(t.parts, ip)
		}
		t.ts.acc.SetPartitions(accParts)
	}
	for i := range mt.Partitions {
		mp := &mt.Partitions[i]
		ip := t.parts[mp.ID]
		if mp.LeaderEpoch >= 0 && ip.epoch >= 0 && mp.LeaderEpoch < ip.epoch {
			continue // stale
		}
		// A partition error does not void its leader (Java keeps it
		// too): REPLICA_NOT_AVAILABLE, for one, only says a follower is
		// offline. LEADER_NOT_AVAILABLE comes with leader -1
		// (topicFromResponse), and a leader missing from the brokers is
		// none either.
		leader := mp.Leader
		if leader < 0 || errors.Is(mp.Err, kerr.LeaderNotAvailable) || s.brokers[leader] == nil {
			leader = -1
		}
		ip.epoch = mp.LeaderEpoch
		ip.hinted = false // the snapshot's leader now
		if leader != ip.leader {
			if ip.leader < 0 && leader >= 0 {
				// Progress: the next ask goes at once (an ask already due
				// stays due: another partition may still lack a leader).
				s.leaderAsks, s.leaderAskAt = 0, time.Time{}
			}
			ip.leader = leader
			ip.backoff = time.Time{}
		}
		ip.acc.SetLeaderless(leader < 0)
		s.markReadiness(ip)
		if ip.hasSealed || len(ip.retry) > 0 {
			s.markReady(ip)
		}
	}
	for _, ip := range t.parts[n:] {
		s.failGone(ip)
	}
	// Ready lists may still hold partitions that moved; sendAll skips them.
}

// gone reports whether ip is past its topic's partition count: the topic was
// recreated with fewer partitions.
func (ip *ioPart) gone() bool {
	if ip.topic == nil || ip.topic.ts == nil { // a test's bare partition
		return false
	}
	c := ip.topic.ts.count.Load()
	return c > 0 && ip.acc.ID >= c
}

// failGone fails the batches of a partition that no longer exists (gone)
// that are not in flight: sealed, open, or waiting to be resent. Batches in
// flight fail once their answer puts them back in retry (markReady calls
// this for such a partition), so each record completes once. Sends that
// read the old count may still append to it: their batches fail when sealed.
func (s *sink) failGone(ip *ioPart) {
	if !ip.gone() {
		return
	}
	ip.leader = -1
	ip.acc.SetLeaderless(true)
	s.failPending(ip, fmt.Errorf("%s[%d]: the topic was recreated with %d partitions, so partition %d no longer exists: %w",
		ip.topic.name, ip.acc.ID, ip.topic.ts.count.Load(), ip.acc.ID, kerr.UnknownTopicOrPartition))
}

// failPending fails with err ip's batches that are not in flight: open,
// sealed, or waiting to be resent.
func (s *sink) failPending(ip *ioPart, err error) {
	s.failPendingAll([]*ioPart{ip}, func(*ioPart) error { return err })
}

// failPendingAll is failPending for each of ips, with errOf(ip). Every
// partition's open and sealed batches are taken before any record is
// completed: a caller that has seen one of these failures (a callback, or
// a Future's Wait) and sends again makes a batch that none of them takes,
// on any of the partitions (TestRecordSentAfterRecreationFailureGoesToNewTopic).
func (s *sink) failPendingAll(ips []*ioPart, errOf func(*ioPart) error) {
	s.goneScratch = s.goneScratch[:0]
	ends := make([]int, len(ips))
	for i, ip := range ips {
		s.goneScratch = ip.acc.TakeAll(s.goneScratch)
		ends[i] = len(s.goneScratch)
		ip.hasSealed = false
	}
	start := 0
	for i, ip := range ips {
		err := errOf(ip)
		for _, b := range ip.retry {
			s.fail(ip, b, err) // with ErrOutcomeUnknown if an attempt may have been written
		}
		clear(ip.retry)
		ip.retry = ip.retry[:0]
		for _, b := range s.goneScratch[start:ends[i]] {
			s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err})
		}
		start = ends[i]
	}
	clear(s.goneScratch)
}

// moveParked moves parked records of topics whose partitions are known.
func (s *sink) moveParked() {
	starved := false
	for t := range s.parked {
		if len(t.parts) == 0 {
			s.maybeCreateTopic(t)
			continue
		}
		parts := t.ts.live(t.ts.acc.KnownPartitions())
		n := int32(len(parts))
		load := func(i int32) int { return parts[i].Load() }
		s.p.memWanted.Store(true) // before trying: a release racing with a failed move still wakes us
		records, bytes := t.ts.acc.Parked()
		done := t.ts.acc.MoveParked(func(r accumulator.ParkedRecord) (*accPartition, error) {
			rec := Record{Topic: t.name, Partition: r.Partition, ExplicitPartition: r.Partition >= 0, Timestamp: timeFromMillis(r.Timestamp)}
			var err error
			rec.Key, rec.Value, rec.Headers, err = recordbatch.ParseBody(r.Body) // header keys copied, the rest aliases Body
			if err != nil {
				return nil, err // Send encoded it: cannot happen
			}
			part, err := callPartitioner(s.cfg.Partitioner, &rec, n) // no lock held; a panic fails only this record
			if err != nil {
				return nil, err
			}
			if part == UnknownPartition {
				part = t.ts.sticky.partition(n, load)
				t.ts.sticky.appended(part, len(r.Body), n, load)
			}
			if err := checkPartition(t.name, part, n); err != nil {
				return nil, err
			}
			return parts[part], nil
		}, func(c completion, err error) {
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: t.name, Partition: -1, Offset: -1}, err: err})
		})
		if done {
			s.unpark(t, records, bytes, nil)
		} else {
			starved = true
		}
	}
	s.hold(starved)
}

// hold asks the pool, when it can (bufferpool.Holder), to keep released
// memory for moveParked while parked records cannot move for the lack of
// it, instead of handing it to Sends waiting for memory: those Sends would
// park more records of the same topic, or fill other topics' batches, and
// the parked records, which free their memory only by moving, would expire.
// Off again once nothing parked is starved (and at shutdown).
func (s *sink) hold(on bool) {
	if on == s.holding {
		return
	}
	if h := usableHolder(s.p.pool); h != nil {
		h.Hold(on)
		s.holding = on
	}
}

// usableHolder returns pool as a bufferpool.Holder when the producer can
// take the memory it holds: it is also a bufferpool.HeldAllocator and, if
// it is a bufferpool.Reserver, a bufferpool.HeldReserver. Otherwise nil:
// such a pool is never held (see bufferpool.HeldAllocator).
func usableHolder(pool bufferpool.Pool) bufferpool.Holder {
	h, ok := pool.(bufferpool.Holder)
	if !ok {
		return nil
	}
	if _, ok := pool.(bufferpool.HeldAllocator); !ok {
		return nil
	}
	if _, isRes := pool.(bufferpool.Reserver); isRes {
		if _, ok := pool.(bufferpool.HeldReserver); !ok {
			return nil
		}
	}
	return h
}

func timeFromMillis(ms int64) time.Time { return time.UnixMilli(ms) }
