package producer

import (
	"context"
	"sync"
)

// Future is the outcome of one Send: it completes exactly once, when the
// record is acknowledged or has failed.
//
// A Future costs one allocation; its Done channel is made only if Done (or
// Wait before completion) is called. All methods are safe for concurrent use.
type Future struct {
	mu sync.Mutex
	// ch is Done's channel: nil until Done is called, closedChan once
	// the record is complete (which is how completion is told: a done
	// flag would take the 8 bytes persisted needs in a 96-byte object).
	ch  chan struct{}
	md  RecordMetadata
	err error
	// persisted is closed once the record is in Config.Spool's log (see
	// Persisted); nil without a spool. Set before Send returns f.
	persisted chan struct{}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed once the record is acknowledged or
// has failed.
func (f *Future) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// Wait waits for the record's outcome or for ctx to end. It returns the
// record's metadata, or the error the record failed with. If ctx ends first
// it returns ctx.Err(), and the record stays in the producer: cancelling a
// wait does not cancel the record (the ctx given to Send does, until the
// record is written).
func (f *Future) Wait(ctx context.Context) (RecordMetadata, error) {
	if md, ok, err := f.result(); ok {
		return md, err
	}
	select {
	case <-f.Done():
		md, _, err := f.result()
		return md, err
	case <-ctx.Done():
		return RecordMetadata{}, ctx.Err()
	}
}

// Persisted returns a channel that is closed once the record is persisted
// in Config.Spool's log under its sync policy: under none and interval
// once the spool's writer has it in the segment file, under always once
// an fsync covers it; Send does not wait for either (it puts the record
// in the spool's write buffer, which a crash loses), so Persisted may
// close after Done. A persisted record survives a crash of the process
// (SIGKILL included) and a restart: the next New on the directory sends it
// again if its delivery was not acknowledged. The channel is closed at
// most once, and never for a record that failed before it was persisted
// (refused by Send, the spool full after MaxBlock, a failed write or
// fsync: Done and Wait give the error); a persisted record may still fail
// later (Wait says how), and one failed by Close stays in the spool.
// Whatever Close does meanwhile, once the Future is done and Close has
// released the spool (Close returned with its ctx not ended; a Close
// whose ctx ended while user code held a producer goroutine, in a
// callback or a hook, returns before it stops the persister and closes
// the spool, and a channel may then close after it returned): a
// delivered record's channel is closed; a record that stays in the spool
// for the next New (ErrClosed, ErrOutcomeUnknown, a retriable error,
// ErrSpoolFailed for a record the log took) has it closed, and one that
// failed with such an error and is not in the spool has it open (it
// failed before it was persisted); a record failed for good after it was
// persisted (a non-retriable Kafka error, its Send ctx) is not sent again,
// whatever the channel says, unless the spool had failed (ErrSpoolFailed
// from SyncSpool or Close): a failed spool writes no position again, so
// every record still in its log may be sent again by the next New. A
// failed fsync leaves the channels it should have closed open, also for
// records written before it that no successful Sync had covered.
//
// In SpoolOverflow mode a record that went to memory without touching
// the disk is persisted once delivered (it is in Kafka): its channel is
// closed then, never if it fails; a spilled one's as any spooled
// record's (above, per sync policy).
// Without Config.Spool it returns nil: a channel that is never ready.
func (f *Future) Persisted() <-chan struct{} { return f.persisted }

// Result returns the outcome without waiting: the record's metadata and
// the error it failed with, as Wait returns them, once ok is true; ok is
// false (and md and err are zero) while the record is still pending.
func (f *Future) Result() (md RecordMetadata, ok bool, err error) { return f.result() }

func (f *Future) result() (RecordMetadata, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.md, f.ch == closedChan, f.err
}

func (f *Future) complete(md RecordMetadata, err error) {
	f.mu.Lock()
	if f.ch == closedChan {
		f.mu.Unlock()
		panic("producer: future completed twice")
	}
	f.md, f.err = md, err
	ch := f.ch
	f.ch = closedChan
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Result is what SendTo delivers on its channel for each record.
type Result struct {
	// Record is the record given to SendTo. The producer keeps the pointer
	// (not its Key, Value or Headers, which Send copied) until the Result is
	// delivered.
	Record *Record
	// Metadata is set when Err is nil.
	Metadata RecordMetadata
	// Err is why the record failed, or nil.
	Err error
}
