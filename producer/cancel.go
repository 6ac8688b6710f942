// Send's context after Send returns: a record whose context ends before a
// request first carries its batch fails with the context's error, and is
// never written (Send's side; the IO goroutine's is sink_cancel.go).

package producer

import (
	"context"
	"fmt"
	"sync/atomic"
)

// ctxGroup watches one Send context that can end, for buffered records
// sent with it (or with another context of the same Done channel, which
// ends with it): one context.AfterFunc per group, not per record, so that
// records sent with a long-lived context (a server's, say) cost no
// allocation, and a context per Send costs its group (see acquire). Records sent with a
// context whose Done is nil (context.Background()) have none, and cost
// nothing.
//
// Who may do what: Send takes a reference (acquire) before the record is
// buffered; the AfterFunc (any goroutine) only keeps ctx's error, sets
// ended and wakes the IO goroutine; the IO goroutine fails the records of
// an ended group that no request has carried yet (sink.failEnded, and
// sink.settle at the drain, which decides for good: a record it lets go is
// written, one of an ended group is not), reading only ended and cause
// under a samsa lock, never the context; the goroutine that completes a
// record drops its reference, and the last one stops the AfterFunc and
// forgets the group. ended only goes from false to true, so a record is
// either failed by its context or written, never both.
type ctxGroup struct {
	p    *Producer
	done <-chan struct{} // ctx.Done()
	ctx  context.Context // the first Send's with that Done channel
	stop func() bool     // context.AfterFunc's; set before the group is published
	// refs counts the records holding the group; 0 once the last one
	// completed, and the group then takes no more (acquire makes another).
	refs  atomic.Int64
	ended atomic.Bool
	// cause is ctx.Err(), kept by whoever sets ended, before it does: the
	// records' error is then read without calling the context (user code,
	// for a context of another kind) under a samsa lock (FailParkedIf's
	// callback runs under the topic's).
	cause atomic.Pointer[error]
	// obs is what the records of the group point to (completion.obs) when
	// no record-level hook gives them a recordObs of their own.
	obs recordObs
}

// watch returns the recordObs of a record sent with ctx, whose Done channel
// done is not nil: o (a hook's, or nil) with its group set, or the group's
// own. Send's goroutine, before the record is buffered, so that the IO
// goroutine never sees the record without its group.
func (p *Producer) watch(ctx context.Context, done <-chan struct{}, t *topicState, o *recordObs) *recordObs {
	if !t.watched.Load() {
		t.watched.Store(true) // the IO goroutine looks at this topic's records from now on
	}
	g := p.acquire(ctx, done)
	if o == nil {
		return &g.obs
	}
	o.g = g
	return o
}

// acquire returns a group of done with a reference taken: the last group
// made (Producer.lastGroup), when it is done's and still held, else a new
// one. Records sent with one context in a row (one goroutine's, or a
// context the goroutines share) share a group; a context per Send makes a
// group per Send. A map of every live context's group would also catch
// contexts that take turns, but a context per Send would then insert and
// delete a map entry per record (BenchmarkSendCancellableContext/per-send
// with a sync.Map: 12 allocations and 2.5–3.3 µs of CPU per Send, against
// 11 and 2.1–2.2 µs, the benchmark's own context and closure included).
func (p *Producer) acquire(ctx context.Context, done <-chan struct{}) *ctxGroup {
	if g := p.lastGroup.Load(); g != nil && g.done == done {
		for n := g.refs.Load(); n > 0; n = g.refs.Load() {
			if g.refs.CompareAndSwap(n, n+1) {
				return g
			}
		}
	}
	g := &ctxGroup{p: p, done: done, ctx: ctx}
	g.obs.g = g
	g.refs.Store(1)
	g.stop = context.AfterFunc(ctx, g.end)
	p.lastGroup.Store(g)
	return g
}

// resweepIfEnded is called by Send after it buffered a watched record: if
// ctx ended meanwhile, the sweep its AfterFunc asked for may have looked
// before the record was parked or appended, and none would look again
// (the record would wait for MaxBlock or Linger), so it asks for another
// (TestSendContextEndingWhileBuffering).
func (p *Producer) resweepIfEnded(ctx context.Context) {
	if ctx.Err() != nil {
		p.ctxEnded.Store(true)
		p.acc.Kick()
	}
}

// end runs once the context has ended (context.AfterFunc): it marks the
// group and wakes the IO goroutine, which fails the group's records no
// request has taken yet. It touches nothing of the IO goroutine's.
func (g *ctxGroup) end() {
	g.setEnded(g.ctx.Err())
	g.p.ctxEnded.Store(true)
	g.p.acc.Kick()
}

// release drops a completed record's reference; the last one stops the
// AfterFunc and forgets the group, so that a long-lived context keeps
// nothing of records long done.
func (g *ctxGroup) release() {
	if g.refs.Add(-1) != 0 {
		return
	}
	g.p.lastGroup.CompareAndSwap(g, nil)
	g.stop()
}

// hasEnded reports whether the group's context has ended: its AfterFunc
// ran, or (it runs on a goroutine of its own) is about to. IO goroutine.
func (g *ctxGroup) hasEnded() bool {
	if g.ended.Load() {
		return true
	}
	if err := g.ctx.Err(); err != nil {
		g.setEnded(err)
		return true
	}
	return false
}

// setEnded keeps the context's error err (the first one kept stays: the
// AfterFunc's and the IO goroutine's may race) and marks the group ended.
func (g *ctxGroup) setEnded(err error) {
	if err == nil {
		err = context.Canceled // a context of another kind that ended without an error
	}
	g.cause.CompareAndSwap(nil, &err)
	g.ended.Store(true)
}

// endErr is the error of the group's context, once ended is set. It does
// not call the context: it may run under a samsa lock.
func (g *ctxGroup) endErr() error {
	if c := g.cause.Load(); c != nil {
		return *c
	}
	return context.Canceled // not reached: ended is set after cause
}

// err is the error of a record whose context ended before it was written.
func (g *ctxGroup) err() error {
	return ctxEndedErr(g.endErr())
}

// ctxEndedErr wraps the error of a record's context (context.Canceled or
// context.DeadlineExceeded), so that errors.Is matches it.
func ctxEndedErr(err error) error {
	return fmt.Errorf("producer: the record's context ended before the record was sent: %w", err)
}

// endedCompletion reports whether c's context ended (as its AfterFunc
// said) before its batch was written. IO goroutine.
func endedCompletion(c *completion) bool {
	return c.obs != nil && c.obs.g != nil && c.obs.g.ended.Load()
}
