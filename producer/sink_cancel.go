// The IO goroutine's side of records failed before they are written: those
// whose Send context ended (cancel.go) and those Purge fails.

package producer

import (
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/internal/recordbatch"
)

// failEnded fails the records whose Send context ended and that no request
// has carried yet: parked, in the open batch (which is sealed for it: its
// other records go out now instead of after Linger) or in sealed batches,
// which are rebuilt without them. Batches in flight or waiting to be
// resent were written, and their records are left to their answers. It
// runs when a context's AfterFunc asked for it (Producer.ctxEnded), over
// the topics that ever had a watched record; settle, at the drain, decides
// for the records this one has not seen.
func (s *sink) failEnded() {
	if !s.p.ctxEnded.Swap(false) {
		return
	}
	s.p.topics.Range(func(_, v any) bool {
		ts := v.(*topicState)
		if !ts.watched.Load() {
			return true
		}
		records, bytes := ts.acc.Parked()
		var last error
		n := ts.acc.FailParkedIf(endedCompletion, func(c completion) {
			last = c.obs.g.err()
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: ts.acc.Name, Partition: -1, Offset: -1}, err: last})
		})
		if t := s.topics[ts.acc.Name]; t != nil && n > 0 {
			if left, _ := ts.acc.Parked(); left == 0 {
				if _, ok := s.parked[t]; ok {
					s.unpark(t, records, bytes, last)
				}
			}
		}
		for _, ap := range ts.acc.KnownPartitions() {
			ip := ap.IO
			if ip == nil {
				continue
			}
			ap.SealOpenIf(hasEnded) // announced by a Sealed event
			ap.RewriteSealed(func(b *batch) *batch {
				if !hasEnded(b) {
					return b
				}
				return s.withoutEnded(ip, b)
			})
		}
		return true
	})
}

// hasEnded reports whether a record of b has a context that ended.
func hasEnded(b *batch) bool {
	for i, n := 0, b.Records.Len(); i < n; i++ {
		if endedCompletion(b.Records.At(i)) {
			return true
		}
	}
	return false
}

// settle decides for the watched records of b, which a request is about
// to carry: it reports whether the context of one has ended, and b must
// then be rebuilt without those (withoutEnded); the others are written, and
// their contexts no longer matter (nothing looks at a batch once drained).
// A context that has ended counts as ended even before its AfterFunc ran
// (it runs on a goroutine of its own): a record whose context ended before
// this request is never written.
func settle(b *batch) (ended bool) {
	var last *ctxGroup // a batch's records mostly share their context
	for i, n := 0, b.Records.Len(); i < n; i++ {
		o := b.Records.At(i).obs
		if o == nil || o.g == nil || o.g == last {
			continue
		}
		last = o.g
		if o.g.hasEnded() {
			ended = true
		}
	}
	return ended
}

// withoutEnded returns a batch holding b's records whose context has not
// ended, in order (nil when none is left), and fails the others with their
// context's error; b is freed. The new batch is not sequenced: b never
// was, so the partition's sequences stay gapless. As split does, it
// decodes b's finished bytes into detached batches, which take over b's
// completions and bookkeeping charge. IO goroutine.
func (s *sink) withoutEnded(ip *ioPart, b *batch) *batch {
	if err := s.finish(b); err != nil {
		return b // the drain fails it with that error
	}
	recordbatch.Stamp(b.IO.raw, -1, -1, -1) // the CRC Decode checks; a sequence is stamped later
	dec, err := recordbatch.Decode(b.IO.raw, max(b.IO.uncompressed, len(b.IO.raw)))
	if err != nil || len(dec.Records) != b.Records.Len() {
		return b // cannot happen: the producer encoded it
	}
	size := recordbatch.HeaderSize
	for i, r := range dec.Records {
		if !endedCompletion(b.Records.At(i)) {
			size += len(r.Body) + maxRecordOverhead
		}
	}
	kept := s.p.acc.NewDetachedBatch(b.Partition, size)
	// The failed records, one detached batch per error (Canceled,
	// DeadlineExceeded): the completer fails a batch's records with one
	// error.
	type failed struct {
		cause error
		b     *batch
	}
	var fails []failed
	for i, r := range dec.Records {
		c := b.Records.At(i)
		if !endedCompletion(c) {
			if !kept.Builder.AppendBody(r.Timestamp, r.Body) {
				panic("producer: rebuilt batch overflow")
			}
			s.p.acc.AddCompletion(kept, *c)
			continue
		}
		cause := c.obs.g.ctx.Err()
		j := 0
		for j < len(fails) && !sameErr(fails[j].cause, cause) {
			j++
		}
		if j == len(fails) {
			fails = append(fails, failed{cause, s.p.acc.NewDetachedBatch(b.Partition, recordbatch.HeaderSize)})
		}
		s.p.acc.AddCompletion(fails[j].b, *c)
	}
	to := make([]*batch, 0, 1+len(fails))
	if kept.Records.Len() > 0 {
		kept.Created = b.Created // its linger and delivery timeout go on
		kept.IO.attempts = b.IO.attempts
		kept.IO.topicID = b.IO.topicID
		to = append(to, kept)
	}
	for _, f := range fails {
		to = append(to, f.b)
	}
	s.p.acc.MoveCredit(b, to...)
	s.p.acc.Free(b)
	for _, f := range fails {
		s.p.completer.push(outcome{batch: f.b, baseOffset: -1, appendTime: -1, err: ctxEndedErr(f.cause)})
	}
	if kept.Records.Len() == 0 {
		s.p.acc.Free(kept)
		return nil
	}
	if err := s.finish(kept); err != nil {
		s.fail(ip, kept, err)
		return nil
	}
	s.trackExpiry(opened{part: kept.Partition, b: kept, gen: kept.Gen(), at: kept.Created})
	return kept
}

// sameErr reports whether a and b are the same error, without comparing
// values errors.Is would not (a custom context's error may not be
// comparable).
func sameErr(a, b error) bool {
	return errors.Is(a, b) && errors.Is(b, a)
}

// failUnsent fails with err every record of the producer that no request
// has carried: parked, and in batches open or sealed; with retries also
// the batches waiting to be resent (an aborted transaction's). It returns
// how many records it failed. The parked, open and sealed ones never had
// a sequence (a batch takes its sequences when a request first carries
// it), so failing them leaves idempotent partitions gapless; a batch to
// resend had one, and s.fail leaves its gap to the epoch bump. IO
// goroutine.
func (s *sink) failUnsent(err error, retries bool) int {
	n := 0
	s.p.topics.Range(func(_, v any) bool {
		ts := v.(*topicState)
		records, bytes := ts.acc.Parked()
		ts.acc.FailParked(func(c completion) {
			n++
			s.p.completer.push(outcome{single: &c, md: RecordMetadata{Topic: ts.acc.Name, Partition: -1, Offset: -1}, err: err})
		})
		if t := s.topics[ts.acc.Name]; t != nil && records > 0 {
			s.unpark(t, records, bytes, err) // HookTopicUnparked, and parkedAt cleared
		}
		for _, ap := range ts.acc.KnownPartitions() {
			if ip := ap.IO; ip != nil && retries {
				for _, b := range ip.retry {
					n += b.Records.Len()
					s.fail(ip, b, err)
				}
				clear(ip.retry)
				ip.retry = ip.retry[:0]
			}
			s.unsent = ap.TakeAll(s.unsent[:0])
			for _, b := range s.unsent {
				n += b.Records.Len()
				s.p.completer.push(outcome{batch: b, baseOffset: -1, appendTime: -1, err: err})
			}
			clear(s.unsent)
		}
		return true
	})
	return n
}

// purge is Purge on the IO goroutine: every record not written yet fails
// with ErrPurged.
func (s *sink) purge() int {
	n := s.failUnsent(fmt.Errorf("%w: the record was not sent yet when Purge was called", ErrPurged), false)
	if s.debug {
		s.p.log.Debug("purged records not sent yet", "records", n)
	}
	return n
}
