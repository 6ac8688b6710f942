// Send's context after Send returns: a record whose context ends before a
// request first carries its batch fails with the context's error, and is
// never written (Send's side; the IO goroutine's is sink_cancel.go).

package producer

import (
	"context"
	"fmt"
	"sync/atomic"
)

// ctxWatch is a record's watch on its Send context, in its recordObs. Only
// a context that can end (ctx.Done() != nil) is watched: a record sent with
// context.Background() has none, and costs nothing.
//
// Who may do what: Send sets it up before the record is buffered; the
// context's AfterFunc (any goroutine) only moves state from live to ended
// and wakes the IO goroutine; the IO goroutine moves it from live to
// written when a request first takes the record's batch (sink.settle), or
// finds it ended and fails the record instead (sink.failEnded); the
// goroutine that completes the record releases the AfterFunc. The
// compare-and-swap decides which of the ended and written comes first, so
// a record is either failed by its context or written, never both.
type ctxWatch struct {
	p     *Producer
	ctx   context.Context // Send's; nil: not watched
	stop  func() bool     // context.AfterFunc's
	state atomic.Uint32
}

// The states of a ctxWatch.
const (
	watchLive    uint32 = iota // buffered, not written yet
	watchEnded                 // the context ended first: the record must fail
	watchWritten               // a request took its batch: the context no longer matters
)

// watch arms the watch of a record sent with ctx, which can end, and
// returns the record's recordObs (o, or a new one). Send's goroutine,
// before the record is buffered, so that the IO goroutine never sees the
// record without its watch.
func (p *Producer) watch(ctx context.Context, t *topicState, o *recordObs) *recordObs {
	if o == nil {
		o = &recordObs{}
	}
	if !t.watched.Load() {
		t.watched.Store(true) // the IO goroutine looks at this topic's records from now on
	}
	w := &o.w
	w.p, w.ctx = p, ctx
	w.stop = context.AfterFunc(ctx, w.ended)
	return o
}

// ended runs once the context has ended (context.AfterFunc): it marks the
// record and wakes the IO goroutine, which fails it if no request has taken
// it yet. It touches nothing of the IO goroutine's.
func (w *ctxWatch) ended() {
	if w.state.CompareAndSwap(watchLive, watchEnded) {
		w.p.ctxEnded.Store(true)
		w.p.acc.Kick()
	}
}

// release drops the AfterFunc once the record is complete, so that a
// long-lived context does not keep the watches of records long done.
func (w *ctxWatch) release() {
	if w.stop != nil {
		w.stop()
	}
}

// err is the error of a record whose context ended before it was written.
func (w *ctxWatch) err() error {
	return ctxEndedErr(w.ctx.Err())
}

// ctxEndedErr wraps the error of a record's context (context.Canceled or
// context.DeadlineExceeded), so that errors.Is matches it.
func ctxEndedErr(err error) error {
	return fmt.Errorf("producer: the record's context ended before the record was sent: %w", err)
}

// endedCompletion reports whether c's context ended before its batch was
// written. IO goroutine.
func endedCompletion(c *completion) bool {
	return c.obs != nil && c.obs.w.state.Load() == watchEnded
}
