// KIP-794's partitioner.availability.timeout.ms on the IO goroutine:
// which leaders have not taken a Produce request for too long, and the
// partitions the adaptive sticky partitioner then leaves out.

package producer

import "time"

// brokerReadiness is a broker's record for the availability timeout, in
// the manner of Java's NodeLatencyStats: readyAt, the last step at which
// the broker had work (batches waiting for it, or requests in flight);
// drainAt, the last step at which it made progress (a request written to
// it, an answer from it) or had no work. The broker is unready while
// readyAt - drainAt > the timeout: its connection is not up (a broker
// unreachable), or it has not answered for that long (a broker stalled or
// too slow). Its partitions carry accumulator.Partition.SetUnready
// meanwhile. answers and inflight are br's counters at the last step.
type brokerReadiness struct {
	readyAt, drainAt time.Time
	answers          uint64
	inflight         int
	unready          bool
}

// availabilityTimeout is the timeout in force: 0 when off (not set, or
// adaptive partitioning disabled, where Java ignores it too).
func (s *sink) availabilityTimeout() time.Duration {
	if s.cfg.DisableAdaptivePartitioning {
		return 0
	}
	return s.cfg.PartitionerAvailabilityTimeout
}

// trackReadiness updates every broker's record after sendAll, and marks or
// clears a broker's partitions when it crosses the timeout either way. It
// costs nothing with the timeout off, and a pass over the brokers with it.
func (s *sink) trackReadiness() {
	timeout := s.availabilityTimeout()
	if timeout <= 0 {
		return
	}
	for _, br := range s.brokers {
		r := &br.readiness
		work := len(br.ready) > 0 || br.inflight > 0
		progress := br.answers != r.answers || br.inflight > r.inflight
		r.answers, r.inflight = br.answers, br.inflight
		if !work || progress || r.drainAt.IsZero() {
			r.drainAt = s.now
		}
		r.readyAt = s.now
		unready := r.readyAt.Sub(r.drainAt) > timeout
		if unready == r.unready {
			continue
		}
		r.unready = unready
		if unready {
			s.p.log.Debug("partitioner: leaving out the partitions of a broker that took no request",
				"broker", br.id, "for", r.readyAt.Sub(r.drainAt), "partitioner_availability_timeout", timeout)
		}
		for _, t := range s.topics {
			for _, ip := range t.parts {
				if ip.leader == br.id {
					ip.acc.SetUnready(unready)
				}
			}
		}
	}
}

// markReadiness sets ip's unready mark from its leader's record, after its
// leader changed.
func (s *sink) markReadiness(ip *ioPart) {
	if s.availabilityTimeout() <= 0 {
		return
	}
	br := s.brokers[ip.leader]
	ip.acc.SetUnready(br != nil && br.readiness.unready)
}

// readinessWake returns when the IO goroutine must look again at a broker
// with work and no progress, so that it is found unready at the timeout
// even if nothing else happens then; next if that is earlier.
func (s *sink) readinessWake(next time.Time) time.Time {
	timeout := s.availabilityTimeout()
	if timeout <= 0 {
		return next
	}
	for _, br := range s.brokers {
		r := &br.readiness
		if r.unready || r.drainAt.IsZero() || (len(br.ready) == 0 && br.inflight == 0) {
			continue
		}
		if at := r.drainAt.Add(timeout + time.Millisecond); at.Before(next) {
			next = at
		}
	}
	return next
}
