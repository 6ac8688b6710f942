// The IO goroutine's shutdown (Close): answers of requests in flight,
// buffered records failed with ErrClosed, and dials ended.

package producer

import (
	"fmt"
	"time"
)

// shutdown runs when the IO goroutine stops (Close): it fails everything
// still buffered with ErrClosed, waits for requests in flight, and closes the
// connections.
func (s *sink) shutdown() {
	defer s.hold(false) // Sends still waiting for memory fail with ErrClosed, not MaxBlock
	s.timer.Stop()
	s.now = time.Now()
	s.drainEvents()
	// Close the connections (which fails what they still hold) while
	// collecting the answers of requests in flight, so that their batches
	// complete with what the broker said, or with ErrClosed if it said
	// nothing.
	for _, br := range s.brokers {
		if br.conn != nil {
			s.dropConn(br, nil)
		}
	}
	for s.inflight > 0 {
		select {
		case <-s.respKick:
			for _, r := range s.takeResponses() {
				s.handleResponse(r, true)
				s.freeRequest(r.req)
			}
		case d := <-s.dials:
			if d.conn != nil {
				d.conn.Close()
			}
		}
	}
	// Fail what is still buffered. A Send that passed its closed check just
	// before Close may still be appending: keep failing until every record
	// the producer accepted is completed, or until Close's context ends
	// (a callback may block, so completions may never catch up). Then a
	// Send still appending fails what is buffered itself (Producer.failLate).
	ctx := s.p.closeCtx
	for {
		s.drainEvents()
		s.failBuffered()
		idle := s.p.whenIdle()
		select {
		case <-idle:
		case <-s.p.acc.Wake():
			continue
		case <-ctx.Done():
			s.p.drained.Store(true)
			s.drainEvents()
			s.failBuffered() // what was appended before drained was set
		}
		break
	}
	// Dials end at once (their context is canceled); a connection one of
	// them made is closed by it or here.
	done := make(chan struct{})
	go func() { s.dialing.Wait(); close(done) }()
	for {
		select {
		case d := <-s.dials:
			if d.conn != nil {
				d.conn.Close()
			}
			continue
		case <-done:
		}
		break
	}
	for len(s.dials) > 0 {
		if d := <-s.dials; d.conn != nil {
			d.conn.Close()
		}
	}
	if s.compress != nil {
		s.compress.stop()
	}
}

// failBuffered fails every buffered record with ErrClosed (shutdown only).
func (s *sink) failBuffered() {
	closedErr := fmt.Errorf("%w: the record was not sent before Close returned", ErrClosed)
	var all []*batch
	s.p.topics.Range(func(k, v any) bool {
		ts := v.(*topicState)
		ts.acc.FailParked(func(c completion) {
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: ts.acc.Name, Partition: -1, Offset: -1}, err: closedErr})
		})
		for _, ap := range ts.acc.KnownPartitions() {
			ip := ap.IO
			for _, b := range ip.retry {
				s.fail(ip, b, closedErr) // with ErrOutcomeUnknown if an attempt may have been written
			}
			ip.retry = nil
			all = ap.TakeAll(all[:0])
			for _, b := range all {
				s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: closedErr})
			}
		}
		return true
	})
}
