package producer

import (
	"context"
	"fmt"
)

// Purge fails every record no Produce request has taken yet with an error
// wrapping ErrPurged, and returns how many it failed: records parked for
// their topic's metadata, and those in batches no request has drained
// (open, lingering or sealed). It leaves the batches a request already
// drained, which have their sequences, whether that request was written
// yet or not: requests in flight (or handed to their connection) finish,
// and batches waiting to be resent after an attempt are resent. The broker
// may have them, so their records complete with their answers (or at
// their DeliveryTimeout), as librdkafka's purge with
// RD_KAFKA_PURGE_F_QUEUE alone and kgo's AbortBufferedRecords do. Purge
// then waits, as Flush does, until every record sent before the call is
// complete and its callback has returned; records Sent meanwhile are sent
// at once. A Send still waiting for buffer memory when Purge runs is not
// purged: it is buffered once memory frees. With Config.Spool, the
// records spilled to disk and waiting for memory (SpoolConfig) are purged
// too, and leave the spool, but for the one the drainer is appending at
// that moment (as a Send waiting for memory); New's backlog is not. The
// producer stays usable:
// Sends after Purge go out as usual.
//
// ctx bounds Purge's waits, not the purge once it started. A ctx already
// ended when Purge is called purges nothing: Purge returns 0 and
// ctx.Err(). If ctx ends while Purge waits for the IO goroutine to take
// the purge (it is busy with a step), nothing is purged either, unless the
// goroutine takes it at that very moment; once taken, the purge runs to
// its end whatever ctx does. ctx then bounds only the wait that follows,
// for the requests in flight and the callbacks: if it ends there, the
// records are purged all the same (their futures and callbacks complete
// with ErrPurged, perhaps after Purge returned) and Purge returns their
// count and ctx.Err(). A nil ctx is taken as context.Background().
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
	if err := ctx.Err(); err != nil {
		// callIO's select would pick the purge as often as ctx.Done.
		return 0, err
	}
	n := 0
	if p.drain != nil {
		// First, so that what the drainer appends meanwhile is purged
		// from memory below.
		n = p.drain.purge(p)
	}
	m := 0
	if err := p.txnSink.callIO(ctx, func() { m = p.txnSink.purge() }); err != nil {
		return n, err
	}
	return n + m, p.flush(ctx)
}
