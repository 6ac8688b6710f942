package producer

import (
	"context"
	"fmt"
)

// Purge fails every record the producer has not written yet with an error
// wrapping ErrPurged, and returns how many it failed: records parked for
// their topic's metadata, and those in batches no Produce request has
// carried (open, lingering or sealed). Requests in flight are left to
// finish, and so are batches waiting to be resent after a written
// attempt: the broker may have them, so their records complete with their
// answers (or at their DeliveryTimeout), as librdkafka's purge with
// RD_KAFKA_PURGE_F_QUEUE alone and kgo's AbortBufferedRecords do. Purge
// then waits, as Flush does, until every record sent before the call is
// complete and its callback has returned; records Sent meanwhile are sent
// at once. A Send still waiting for buffer memory when Purge runs is not
// purged: it is buffered once memory frees. The producer stays usable:
// Sends after Purge go out as usual.
//
// ctx bounds the whole call: if it ends before the IO goroutine took the
// purge, nothing is purged and Purge returns 0 and ctx.Err(); if it ends
// while Purge waits for the requests in flight, the records are purged
// (their futures and callbacks complete with ErrPurged) and Purge returns
// their count and ctx.Err(). A nil ctx is taken as context.Background().
//
// Under idempotence no purged record had a sequence (a batch takes its
// sequences when a request first carries it), so each partition's
// sequences stay gapless and nothing else of the producer changes. In a
// transaction, a purged record fails the transaction as any failed record
// does: it becomes abortable (CommitTransaction fails, IsAbortable), and
// AbortTransaction ends it; the next BeginTransaction starts afresh. This is
// the way to abort at once a transaction with many records buffered:
// Purge, then AbortTransaction (which also fails what is left unsent with
// ErrTransactionAborted, as Java's abortTransaction does). Purge with
// nothing purged leaves the transaction open.
//
// After Close, or once the producer stopped, Purge returns 0 and ErrClosed.
// Called from a callback, or from a hook, partitioner or OnDataLoss on one
// of the producer's goroutines, it returns 0 and an error wrapping
// ErrFlushInCallback: it would wait for that goroutine.
func (p *Producer) Purge(ctx context.Context) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if where := p.ownGoroutine(); where != "" {
		return 0, fmt.Errorf("%w: Purge called from %s would wait for that goroutine", ErrFlushInCallback, where)
	}
	n := 0
	if err := p.txnSink.callIO(ctx, func() { n = p.txnSink.purge() }); err != nil {
		return 0, err
	}
	return n, p.flush(ctx)
}
