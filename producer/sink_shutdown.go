// The IO goroutine's shutdown (Close): answers of requests in flight,
// buffered records failed with ErrClosed, and dials ended.

package producer

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// shutdown runs when the IO goroutine stops (Close): it fails everything
// still buffered with ErrClosed, waits for requests in flight, and closes the
// connections. It also runs when the goroutine unwinds without Close (see
// unwinding), and then does not wait for callbacks.
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
			s.p.stopSteps.Add(1)
		}
	}
	for s.inflight > 0 {
		s.p.stopSteps.Add(1) // progress, for Close once its context ended
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
	ctx := s.closeContext()
	for {
		s.p.stopSteps.Add(1)
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
	// The short-lived goroutines end at once (their context is canceled),
	// and the connections closing end with their goroutines: Close's
	// promise that no goroutine of the producer outlives it. A connection a
	// dial made is closed by it or here; a request's result is dropped.
	done := make(chan struct{})
	go func() { s.background.Wait(); close(done) }()
	for {
		s.p.stopSteps.Add(1)
		select {
		case d := <-s.dials:
			if d.conn != nil {
				d.conn.Close()
			}
			continue
		case <-s.admin: // quit may be open (unwinding): post may pick admin
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

// closeContext returns Close's context, or, when the IO goroutine unwinds
// without Close (quit still open; closeCtx is then not set, or being set
// by a Close racing the unwinding), a context already ended.
func (s *sink) closeContext() context.Context {
	select {
	case <-s.p.quit: // Close set closeCtx before it closed quit
		if ctx := s.p.closeCtx; ctx != nil {
			return ctx
		}
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// unwinding runs when the IO goroutine stops without Close: a panic or a
// runtime.Goexit on it. Goexit (t.FailNow, say) from user code on it (a
// hook, a parked record's partitioner, OnDataLoss) passes their recovers,
// and so do panics of the user's BufferPool or Logger there. The producer
// cannot work without the goroutine: it is marked closed (Sends fail with
// ErrClosed), waits for memory and dials end, and shutdown fails what is
// buffered without waiting for callbacks; Close then only stops the rest.
// A panic goes on after shutdown (and crashes the program, as any
// unrecovered panic).
func (s *sink) unwinding() {
	s.p.log.Error("producer: the IO goroutine stopped without Close (a panic or runtime.Goexit on it, in user code such as a hook, partitioner, OnDataLoss, BufferPool or Logger); buffered records fail with ErrClosed",
		"stack", string(debug.Stack()))
	s.p.closed.Store(true)
	s.p.stopWaits()
}

// failBuffered fails every buffered record with ErrClosed (shutdown only).
func (s *sink) failBuffered() {
	closedErr := fmt.Errorf("%w: the record was not sent before Close returned", ErrClosed)
	var all []*batch
	s.p.topics.Range(func(k, v any) bool {
		ts := v.(*topicState)
		ts.acc.FailParked(func(c completion) {
			s.closedFailed.Add(1)
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
				s.closedFailed.Add(int64(b.NumRecords()))
				s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: closedErr})
			}
		}
		return true
	})
}

// stopGoroutines stops what remains once quit is closed: it waits for the
// IO goroutine's shutdown and the spool's drainer goroutine, then stops the
// completion goroutine, the
// coordinator connections, the metadata client and the goroutines started
// on the producer's behalf (p.owned), in that order, on a goroutine of its
// own. Until ctx ends it waits for all of it. Once
// ctx has ended it waits only while they make progress (p.stopSteps, the
// outcomes delivered): after stuckAfter without any, user code blocks one of
// the goroutines (a hook, a callback: it cannot be interrupted), and Close
// returns an error wrapping ctx.Err() while the rest stops in the
// background, once that code returns (blocked is then true).
func (p *Producer) stopGoroutines(ctx context.Context) (blocked bool, err error) {
	done := make(chan struct{})
	var stopErr error
	go func() {
		defer close(done)
		<-p.ioDone
		p.stopSteps.Add(1)
		if p.eos != nil {
			// As the drainer: its records complete on the completion
			// goroutine, and it reads the spool.
			<-p.eos.exited
			p.stopSteps.Add(1)
		}
		if p.drain != nil {
			// Before the completion goroutine stops (the drained
			// records complete there) and the spool closes (it reads
			// it). It ends at once (closing is canceled) unless a
			// RecoveryHook or a callback blocks it: bounded as
			// callbacks are.
			<-p.drain.exited
			p.stopSteps.Add(1)
		}
		p.completer.stop(ctx)
		p.stopSteps.Add(1)
		if p.txn != nil {
			p.txn.client.close()
		}
		if p.push != nil {
			p.push.close(ctx) // the terminating push, with the final metrics; bounded by ctx
		}
		stopErr = p.meta.Close()
		p.owned.Close() // no connection is left to start a token refresh
		if p.spool != nil {
			// Last: the completion goroutine's acks are in the final
			// position file.
			if p.persister != nil {
				p.persister.stop()
			}
			if err := p.spool.Close(); err != nil && stopErr == nil {
				stopErr = spoolErr("", err)
			}
		}
	}()
	select {
	case <-done:
		return false, stopErr
	case <-ctx.Done():
	}
	moved := func() uint64 { return p.stopSteps.Load() + p.completer.progress.Load() }
	last := moved()
	tick := time.NewTicker(stuckAfter)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false, stopErr
		case <-tick.C:
		}
		if n := moved(); n != last {
			last = n
			continue
		}
		p.log.Warn("producer: Close's context ended while user code (a hook, a callback) blocks one of the producer's goroutines; Close returns, and the producer's goroutines exit once that code returns",
			"waited", stuckAfter)
		return true, nil
	}
}
