package producer

import (
	"time"
	"unsafe"
)

// completion is how a record's outcome is delivered: to a Future (Send),
// a callback (SendCallback) or a channel (SendTo). Every buffered record
// keeps one, in its batch, from Send to its outcome, and the pool is
// charged for it (accumulator.RecordCharge): so it is packed into 32 bytes,
// a cache line for two records, where separate fields for each way took
// 56. 24 bytes less per record to write at Send and read back cold at the
// outcome saved about 2 % of a small record's CPU (peerbench W1 and W2c
// on kfake, medians of 20 runs), and a pool holds more records.
//
// The zero completion delivers nowhere.
type completion struct {
	// to is, by kind, the *Future, the callback (a func value is one
	// pointer word: the word itself is kept) or the SendTo channel (also
	// one pointer word). unsafe.Pointer keeps what it points to alive.
	to  unsafe.Pointer
	rec *Record // SendTo's record, for its Result
	// obs is set only while a record-level hook exists (observe.go).
	obs *recordObs
	// tk packs the record's timestamp (Unix milliseconds, 0 ≤ ts ≤
	// maxTimestampMillis), the kind (kindFuture …) and the Flush epoch's
	// parity when the record was sent (the slot of Producer.pending that
	// counts it): ts<<3 | kind<<1 | epoch.
	tk int64
}

// The kinds of completion, in completion.tk's bits 1–2.
const (
	kindNone int64 = iota
	kindFuture
	kindCallback
	kindChannel
)

// maxTimestampMillis bounds a record's timestamp so that it fits
// completion.tk: 2^60 ms is 36 million years after 1970. Send refuses a
// Record.Timestamp before unixEpoch or at timestampLimit or later.
const maxTimestampMillis = 1<<60 - 1

var (
	unixEpoch      = time.Unix(0, 0)
	timestampLimit = time.UnixMilli(maxTimestampMillis + 1)
)

// clampedMillis returns t in Unix milliseconds, within 0 …
// maxTimestampMillis: a time before 1970 gives 0, one past the limit
// maxTimestampMillis. It compares times, so it is right for every
// time.Time (UnixMilli wraps around 292 million years away).
func clampedMillis(t time.Time) int64 {
	switch {
	case t.Before(unixEpoch):
		return 0
	case !t.Before(timestampLimit):
		return maxTimestampMillis
	}
	return t.UnixMilli()
}

// persistedAtDelivery marks, in completion.rec (which only SendTo's
// completions use), the Future of an overflow-mode record that went to
// memory without touching the disk: its Persisted is closed once it is
// delivered (sendToMemory sets it).
var persistedAtDelivery Record

func futureCompletion(f *Future) completion {
	return completion{to: unsafe.Pointer(f), tk: kindFuture << 1}
}

func callbackCompletion(fn func(RecordMetadata, error)) completion {
	return completion{to: *(*unsafe.Pointer)(unsafe.Pointer(&fn)), tk: kindCallback << 1}
}

func channelCompletion(ch chan<- Result, rec *Record) completion {
	return completion{to: *(*unsafe.Pointer)(unsafe.Pointer(&ch)), rec: rec, tk: kindChannel << 1}
}

func (c *completion) kind() int64 { return c.tk >> 1 & 3 }

// ts returns the record's timestamp in Unix milliseconds.
func (c *completion) ts() int64 { return c.tk >> 3 }

// setTS sets the record's timestamp, 0 ≤ ms ≤ maxTimestampMillis (Send
// refuses other timestamps).
func (c *completion) setTS(ms int64) { c.tk = ms<<3 | c.tk&7 }

// epoch returns the Flush epoch's parity when the record was sent.
func (c *completion) epoch() uint8 { return uint8(c.tk & 1) }

func (c *completion) setEpoch(e uint8) { c.tk = c.tk&^1 | int64(e&1) }

// deliver completes c. It runs on the completion goroutine, or on the
// caller's goroutine for errors found by Send itself.
func (c *completion) deliver(md RecordMetadata, err error) {
	if err == nil {
		if md.Timestamp.IsZero() { // not LogAppendTime
			md.Timestamp = time.UnixMilli(c.ts())
		}
	} else {
		md.Offset = -1
	}
	if c.obs != nil {
		c.obs.completed(md, err) // before the Future or callback sees it
	}
	switch c.kind() {
	case kindFuture:
		f := (*Future)(c.to)
		if c.rec == &persistedAtDelivery && err == nil {
			// An overflow record that stayed in memory: persisted
			// once delivered. A spooled record's Persisted is closed
			// by Send or the persister (the exactly-once driver's
			// too, which have no sequence in obs): never here.
			close(f.persisted)
		}
		f.complete(md, err)
	case kindCallback:
		(*(*func(RecordMetadata, error))(unsafe.Pointer(&c.to)))(md, err)
	case kindChannel:
		(*(*chan<- Result)(unsafe.Pointer(&c.to))) <- Result{Record: c.rec, Metadata: md, Err: err}
	}
}
