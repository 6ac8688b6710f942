// The IO goroutine's linger: sealing batches that have waited Linger,
// or that wait for their busy broker's answer.

package producer

// sealLingered seals batches that have waited Linger (all of them while a
// Flush is in progress or the producer is closing).
//
// A lingered batch whose leader has a Produce request in flight is not
// sealed yet: it stays open, taking more records, until that broker answers
// a request (or has none in flight), and then goes with the others that
// waited. Under load (many partitions, or a slow broker) batches then hold
// what arrived during a round trip instead of a linger's worth each, so a
// record costs less with 10 000 partitions; an idle producer still sends
// after Linger, and a batch waits at most one answer, which comes within
// RequestTimeout. Full batches never wait for this: up to MaxInFlight
// requests carry them.
func (s *sink) sealLingered() {
	all := s.p.flushing.Load() > 0
	for _, br := range s.brokers {
		n := 0
		for n < len(br.lingered) && (all || !br.busy() || br.lingered[n].answers < br.answers) {
			s.seal(br.lingered[n].opened)
			n++
		}
		switch {
		case n == len(br.lingered):
			// All sealed, the usual case: keep the array, which with
			// thousands of partitions would otherwise be regrown on every
			// round trip.
			clear(br.lingered)
			br.lingered = br.lingered[:0]
		case n > 0:
			br.lingered = popFront(br.lingered, n)
		}
	}
	i := 0
	for ; i < s.lingerQ.len(); i++ {
		o := *s.lingerQ.at(i)
		if !all && s.now.Sub(o.at) < s.cfg.Linger {
			break
		}
		if ip := o.part.IO; !all && ip.leader >= 0 {
			if br := s.brokers[ip.leader]; br != nil && br.busy() {
				if o.b.Gen() == o.gen { // not completed already
					br.lingered = append(br.lingered, lingering{opened: o, answers: br.answers})
				}
				continue
			}
		}
		s.seal(o)
	}
	s.lingerQ.pop(i)
}

// lingering is a batch past Linger waiting for an answer from its broker:
// answers is the broker's count when it started waiting.
type lingering struct {
	opened
	answers uint64
}

// seal seals o's batch, if it is still open, and lists its partition.
func (s *sink) seal(o opened) {
	if o.part.Seal(o.b, o.gen) {
		ip := o.part.IO
		ip.hasSealed = true
		s.markReady(ip)
	}
}

// busy reports whether br has Produce requests in flight on a live
// connection: lingered batches for it wait (see sealLingered).
func (br *ioBroker) busy() bool { return br.inflight > 0 && br.conn != nil }
