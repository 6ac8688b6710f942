package producer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/logging"
)

// Hook is a value that observes the producer: it implements any subset of
// the Hook* interfaces of this package (HookRecordBuffered,
// HookRecordCompleted, HookBatchWritten, ...), and the producer calls the
// methods it has, in the order the hooks were given. A hook that implements
// none of them is a configuration error.
//
// Hooks run on the producer's own goroutines, which each interface names,
// and samsa holds no lock while calling one; but a slow hook delays the work
// of that goroutine (a HookBatchWritten that blocks stalls every broker), so
// hooks should record and return. A hook cannot be interrupted: Close(ctx)
// does not wait for one that blocks past ctx's end (it returns an error
// wrapping ctx.Err()), and the goroutine the hook runs on finishes its work
// and exits once the hook returns, completing every record it still holds
// exactly once. A hook running on one of the producer's
// own goroutines may call Close: it cannot wait for the goroutine it runs
// on, so it closes in the background and returns at once an error wrapping
// ErrClosed; Flush, CommitTransaction and AbortTransaction return an error
// wrapping ErrFlushInCallback there. A panic in a hook is recovered: the event
// is dropped for that hook, and the first panic of each hook and event kind
// is logged at Error to Config.Logger.
type Hook any

// BrokerInfo names a broker in hook events.
type BrokerInfo struct {
	// NodeID is the broker's node id, or -1 for a bootstrap address not yet
	// matched to a node.
	NodeID int32
	// Addr is the broker's host:port.
	Addr string
}

// HookRecordBuffered is called by Send, TrySend, SendCallback and SendTo
// (and TypedProducer's) on the caller's goroutine for each record they take
// from an open producer, before the record is sized and serialized into the
// buffer, so that a tracer can start a span and inject its context into the
// headers. The record may still fail afterwards (invalid topic, too large,
// no memory); HookRecordCompleted then gets that error.
//
// rec is Send's private copy of the caller's Record, with its own Headers
// slice: the hook may change or append headers (see SetHeader), and the
// record is encoded with them. Changing any other field is not supported.
// The returned context, if not nil, replaces ctx for the hooks after this
// one and is the context HookRecordCompleted gets for this record; return
// ctx to keep it.
//
// Every record that a HookRecordBuffered saw reaches HookRecordCompleted
// exactly once, also when Send then fails it. A nil record, or one sent
// after Close, reaches neither.
type HookRecordBuffered interface {
	OnRecordBuffered(ctx context.Context, rec *Record) context.Context
}

// RecordCompletion is a record's outcome, for HookRecordCompleted.
type RecordCompletion struct {
	// Metadata says where the record was written. On failure only Topic
	// and Partition (-1 when none was chosen) are set.
	Metadata RecordMetadata
	// Err is nil when the broker acknowledged the record, else the error
	// its Future gets.
	Err error
	// Elapsed is the time from Send to the outcome.
	Elapsed time.Duration
}

// HookRecordCompleted is called once per record whose outcome is known, on
// the completion goroutine, before the record's Future completes or its
// callback runs; ctx is the context the HookRecordBuffered hooks returned
// for it (Send's context without such hooks). A record that Send fails
// itself (invalid, too large, no memory) is completed on Send's goroutine,
// and so are the records a Send fails after Close gave up waiting (see
// Close).
type HookRecordCompleted interface {
	OnRecordCompleted(ctx context.Context, c RecordCompletion)
}

// BatchWritten describes one Produce attempt of a batch, for
// HookBatchWritten.
type BatchWritten struct {
	// Topic and Partition say where the batch goes.
	Topic     string
	Partition int32
	// Records is the number of records in the batch.
	Records int
	// UncompressedBytes is the batch's size before compression and
	// WireBytes its size in the request, both with the batch header.
	UncompressedBytes, WireBytes int
	// Codec is the batch's compression.
	Codec compression.Type
	// Latency is the time from writing the request to reading its answer.
	Latency time.Duration
	// Attempt is 1 for the batch's first send, 2 for its first retry, ...
	Attempt int
	// Broker is the leader the batch was sent to.
	Broker BrokerInfo
	// Err is nil when the broker wrote the batch, else its error for the
	// batch (which may be retried; the records' own outcome comes through
	// HookRecordCompleted).
	Err error
}

// HookBatchWritten is called on the IO goroutine for each batch of each
// Produce answer (or failed request) it handles.
type HookBatchWritten interface {
	OnBatchWritten(b BatchWritten)
}

// HookBrokerConnected is called on the IO goroutine when a Produce
// connection to a broker is set up (TLS, ApiVersions and SASL done) or
// failed to be: dial is the time it took, and err is nil on success.
// Metadata connections (the refresh goroutine's) are not reported.
type HookBrokerConnected interface {
	OnBrokerConnected(b BrokerInfo, dial time.Duration, err error)
}

// HookBrokerDisconnected is called on the IO goroutine when a connection
// that HookBrokerConnected reported as set up is dropped, with the error
// that broke it (nil when the producer closed it: the broker moved, it
// was idle for Config.ConnMaxIdle, or Close).
type HookBrokerDisconnected interface {
	OnBrokerDisconnected(b BrokerInfo, err error)
}

// HookBrokerThrottled is called on the IO goroutine when a Produce answer
// asks the producer to wait (KIP-219); the producer sends nothing more to
// that broker for throttle.
type HookBrokerThrottled interface {
	OnBrokerThrottled(b BrokerInfo, throttle time.Duration)
}

// RequestWritten describes a request written to a broker, for
// HookBrokerRequestWritten.
type RequestWritten struct {
	// Key and Version are the request's API key and version.
	Key, Version int16
	// Bytes is the request's size on the wire, with its length prefix.
	Bytes int
	// Queued is the time from enqueueing the request to starting its write,
	// and Write the time the write took.
	Queued, Write time.Duration
	// Err is nil when the request was written.
	Err error
}

// HookBrokerRequestWritten is called on a Produce connection's writer
// goroutine after each request is written (or failed to be).
type HookBrokerRequestWritten interface {
	OnBrokerRequestWritten(b BrokerInfo, r RequestWritten)
}

// ResponseRead describes an answer read from a broker, for
// HookBrokerResponseRead.
type ResponseRead struct {
	// Key and Version are those of the request answered.
	Key, Version int16
	// Bytes is the answer's size on the wire, with its length prefix.
	Bytes int
	// Latency is the time from writing the request to reading its answer.
	Latency time.Duration
	// Err is nil when the answer decoded (the answer itself may carry
	// error codes).
	Err error
}

// HookBrokerResponseRead is called on a Produce connection's reader
// goroutine after each answer is read (or failed to decode; an answer that
// cannot be read breaks the connection: see HookBrokerDisconnected).
type HookBrokerResponseRead interface {
	OnBrokerResponseRead(b BrokerInfo, r ResponseRead)
}

// MetadataRefresh describes one Metadata request, for HookMetadataRefreshed.
type MetadataRefresh struct {
	// Broker is the broker asked.
	Broker BrokerInfo
	// Topics and Brokers count the topics and brokers in the answer.
	Topics, Brokers int
	// Latency is the request's round trip.
	Latency time.Duration
	// Err is nil when the answer was applied.
	Err error
}

// HookMetadataRefreshed is called on the metadata refresh goroutine after
// each Metadata request.
type HookMetadataRefreshed interface {
	OnMetadataRefreshed(m MetadataRefresh)
}

// HookTopicParked is called on the IO goroutine when a topic has started
// parking records because its partitions are not known yet (see Send): the
// IO goroutine learns it from the Send that parked the topic's first
// record. It is called again only after HookTopicUnparked.
type HookTopicParked interface {
	OnTopicParked(topic string)
}

// TopicUnparked describes the end of a topic's parking, for
// HookTopicUnparked.
type TopicUnparked struct {
	// Records and Bytes are what was still parked when the step that
	// ended the parking began (moved or failed by that step).
	Records, Bytes int
	// Parked is the time since HookTopicParked.
	Parked time.Duration
	// Err is nil when the partitions arrived and the records moved into
	// batches, else the error the parked records failed with.
	Err error
}

// HookTopicUnparked is called on the IO goroutine when a parked topic's
// partitions arrive or its parked records fail.
type HookTopicUnparked interface {
	OnTopicUnparked(topic string, u TopicUnparked)
}

// HookBufferWaited is called on Send's goroutine after Send waited for buffer
// memory (Config.MaxBlock): waited is the time, and err is nil when the
// memory came, else the record's error (ErrBufferExhausted, ctx.Err(),
// ErrClosed). A Send that got memory at once does not call it.
type HookBufferWaited interface {
	OnBufferWaited(topic string, waited time.Duration, err error)
}

// HookBufferExhausted is called on Send's goroutine when a record fails with
// ErrBufferExhausted: bytes is the memory it asked for.
type HookBufferExhausted interface {
	OnBufferExhausted(topic string, bytes int)
}

// SetHeader sets the header key in hs to value: it replaces the value of the
// first header with that key and drops the later ones, or appends a header.
// It is for HookRecordBuffered, whose record's Headers the hook owns.
func SetHeader(hs []Header, key string, value []byte) []Header {
	found := false
	out := hs[:0]
	for _, h := range hs {
		if h.Key != key {
			out = append(out, h)
			continue
		}
		if !found {
			found = true
			h.Value = value
			out = append(out, h)
		}
	}
	clear(hs[len(out):]) // what was dropped must not stay reachable
	if !found {
		out = append(out, Header{Key: key, Value: value})
	}
	return out
}

// hookKind numbers the hook interfaces, for the log-once bits.
type hookKind uint8

const (
	kindRecordBuffered hookKind = iota
	kindRecordCompleted
	kindBatchWritten
	kindBrokerConnected
	kindBrokerDisconnected
	kindBrokerThrottled
	kindBrokerRequestWritten
	kindBrokerResponseRead
	kindMetadataRefreshed
	kindTopicParked
	kindTopicUnparked
	kindBufferWaited
	kindBufferExhausted
	numHookKinds
)

var hookKindNames = [numHookKinds]string{
	kindRecordBuffered:       "OnRecordBuffered",
	kindRecordCompleted:      "OnRecordCompleted",
	kindBatchWritten:         "OnBatchWritten",
	kindBrokerConnected:      "OnBrokerConnected",
	kindBrokerDisconnected:   "OnBrokerDisconnected",
	kindBrokerThrottled:      "OnBrokerThrottled",
	kindBrokerRequestWritten: "OnBrokerRequestWritten",
	kindBrokerResponseRead:   "OnBrokerResponseRead",
	kindMetadataRefreshed:    "OnMetadataRefreshed",
	kindTopicParked:          "OnTopicParked",
	kindTopicUnparked:        "OnTopicUnparked",
	kindBufferWaited:         "OnBufferWaited",
	kindBufferExhausted:      "OnBufferExhausted",
}

// hookEntry is one hook of one kind, with its index in Config.Hooks.
type hookEntry[H any] struct {
	h H
	i int
}

// hooks dispatches events to Config.Hooks. It is built once by newHooks
// and read-only afterwards (but for the log-once bits), so any goroutine
// may call it without a lock. Each kind has its own slice, nil without
// hooks of that kind: a call site tests the slice before it builds an
// event, and with no hooks that test is the whole cost.
type hooks struct {
	log      *slog.Logger
	names    []string        // %T of each hook, for logs
	reported []atomic.Uint32 // per hook: bit k set once kind k's panic was logged

	recordBuffered       []hookEntry[HookRecordBuffered]
	recordCompleted      []hookEntry[HookRecordCompleted]
	batchWritten         []hookEntry[HookBatchWritten]
	brokerConnected      []hookEntry[HookBrokerConnected]
	brokerDisconnected   []hookEntry[HookBrokerDisconnected]
	brokerThrottled      []hookEntry[HookBrokerThrottled]
	brokerRequestWritten []hookEntry[HookBrokerRequestWritten]
	brokerResponseRead   []hookEntry[HookBrokerResponseRead]
	metadataRefreshed    []hookEntry[HookMetadataRefreshed]
	topicParked          []hookEntry[HookTopicParked]
	topicUnparked        []hookEntry[HookTopicUnparked]
	bufferWaited         []hookEntry[HookBufferWaited]
	bufferExhausted      []hookEntry[HookBufferExhausted]

	// records is set when a record-level hook exists: only then does Send
	// copy the record and keep a per-record context.
	records bool

	// callers holds the goroutines running a hook of a kind called on a
	// connection's reader or writer or on the metadata goroutine, for
	// Producer.ownGoroutine: Close and Flush called from there must not
	// wait for them.
	callers hookCallers
}

// hookCallers is the set of goroutine ids running a hook call that
// dispatchMarked marked. Only those calls pay for it: a short lock, and a
// goroutineID per call on the metadata goroutine (once per connection on
// readers and writers, see goroutineCache). Close and Flush read it, and
// only when a call is running.
type hookCallers struct {
	n   atomic.Int32 // calls marked and not yet returned
	mu  sync.Mutex
	ids []uint64 // one entry per such call (nested calls repeat an id)
}

// goroutineCache holds the id of the one goroutine that uses it (a
// connection's reader, or its writer), read on its first use: a goroutineID
// costs microseconds, too much for each answer read. A nil cache reads
// the id at each call.
type goroutineCache struct{ id uint64 }

func (g *goroutineCache) get() uint64 {
	if g == nil {
		return goroutineID()
	}
	if g.id == 0 {
		g.id = goroutineID()
	}
	return g.id
}

// enter marks a call on goroutine id.
func (hc *hookCallers) enter(id uint64) {
	hc.mu.Lock()
	hc.ids = append(hc.ids, id)
	hc.mu.Unlock()
	hc.n.Add(1)
}

// leave ends a call that enter marked.
func (hc *hookCallers) leave(id uint64) {
	hc.n.Add(-1)
	hc.mu.Lock()
	if i := slices.Index(hc.ids, id); i >= 0 {
		last := len(hc.ids) - 1
		hc.ids[i] = hc.ids[last]
		hc.ids = hc.ids[:last]
	}
	hc.mu.Unlock()
}

// has reports whether goroutine id runs a marked hook call.
func (hc *hookCallers) has(id uint64) bool {
	if hc.n.Load() == 0 {
		return false
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return slices.Contains(hc.ids, id)
}

// add appends h to *list if it implements H, and reports whether it does.
func add[H any](list *[]hookEntry[H], h Hook, i int) bool {
	v, ok := h.(H)
	if ok {
		*list = append(*list, hookEntry[H]{h: v, i: i})
	}
	return ok
}

// newHooks sorts list into per-interface slices. It fails naming the index
// of a nil hook or of one that implements no Hook* interface (for New's
// ErrInvalidConfig). log receives panics; nil means the default logger
// (logging.Default).
func newHooks(list []Hook, log *slog.Logger) (*hooks, error) {
	if log == nil {
		log = logging.Default()
	}
	hs := &hooks{log: log}
	if len(list) == 0 {
		return hs, nil
	}
	hs.names = make([]string, len(list))
	hs.reported = make([]atomic.Uint32, len(list))
	for i, h := range list {
		if h == nil {
			return nil, fmt.Errorf("hook %d is nil", i)
		}
		hs.names[i] = fmt.Sprintf("%T", h)
		// Every add runs (no short-circuit): a hook joins each list it fits.
		n := 0
		for _, ok := range [...]bool{
			add(&hs.recordBuffered, h, i),
			add(&hs.recordCompleted, h, i),
			add(&hs.batchWritten, h, i),
			add(&hs.brokerConnected, h, i),
			add(&hs.brokerDisconnected, h, i),
			add(&hs.brokerThrottled, h, i),
			add(&hs.brokerRequestWritten, h, i),
			add(&hs.brokerResponseRead, h, i),
			add(&hs.metadataRefreshed, h, i),
			add(&hs.topicParked, h, i),
			add(&hs.topicUnparked, h, i),
			add(&hs.bufferWaited, h, i),
			add(&hs.bufferExhausted, h, i),
		} {
			if ok {
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("hook %d (%T) implements no Hook interface", i, h)
		}
	}
	hs.records = len(hs.recordBuffered)+len(hs.recordCompleted) > 0
	return hs, nil
}

// recovered is deferred around each hook call: it recovers a panic and logs
// the first one of hook i and kind k.
func (hs *hooks) recovered(i int, k hookKind) {
	v := recover()
	if v == nil {
		return
	}
	bit := uint32(1) << k
	if hs.reported[i].Or(bit)&bit != 0 {
		return // logged before
	}
	hs.log.Error("producer: a hook panicked; the panic was recovered, and later panics of this hook and event are not logged",
		"hook", hs.names[i], "index", i, "event", hookKindNames[k],
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
}

// onRecordBuffered runs the HookRecordBuffered hooks on rec (Send's copy)
// and returns the context the last one left. A panicking hook leaves the
// context as it was.
func (hs *hooks) onRecordBuffered(ctx context.Context, rec *Record) context.Context {
	for _, e := range hs.recordBuffered {
		ctx = hs.callRecordBuffered(e, ctx, rec)
	}
	return ctx
}

func (hs *hooks) callRecordBuffered(e hookEntry[HookRecordBuffered], ctx context.Context, rec *Record) (out context.Context) {
	out = ctx
	defer hs.recovered(e.i, kindRecordBuffered)
	if c := e.h.OnRecordBuffered(ctx, rec); c != nil {
		out = c
	}
	return out
}

// dispatch calls call with each hook of list, in order, recovering a panic
// of each (see recovered). call does not escape, so it costs no allocation.
func dispatch[H any](hs *hooks, list []hookEntry[H], k hookKind, call func(H)) {
	for _, e := range list {
		func() {
			defer hs.recovered(e.i, k)
			call(e.h)
		}()
	}
}

// dispatchMarked is dispatch for the kinds called on a goroutine that Close
// waits for and that the producer cannot tell by its id (connections'
// readers and writers, the metadata goroutine): the calls are marked in
// hs.callers while they run, with the goroutine's id from g.
func dispatchMarked[H any](hs *hooks, g *goroutineCache, list []hookEntry[H], k hookKind, call func(H)) {
	if len(list) == 0 {
		return
	}
	id := g.get()
	hs.callers.enter(id)
	defer hs.callers.leave(id)
	dispatch(hs, list, k, call)
}

func (hs *hooks) onRecordCompleted(ctx context.Context, c RecordCompletion) {
	dispatch(hs, hs.recordCompleted, kindRecordCompleted, func(h HookRecordCompleted) { h.OnRecordCompleted(ctx, c) })
}

func (hs *hooks) onBatchWritten(b BatchWritten) {
	dispatch(hs, hs.batchWritten, kindBatchWritten, func(h HookBatchWritten) { h.OnBatchWritten(b) })
}

func (hs *hooks) onBrokerConnected(b BrokerInfo, dial time.Duration, err error) {
	dispatch(hs, hs.brokerConnected, kindBrokerConnected, func(h HookBrokerConnected) { h.OnBrokerConnected(b, dial, err) })
}

func (hs *hooks) onBrokerDisconnected(b BrokerInfo, err error) {
	dispatch(hs, hs.brokerDisconnected, kindBrokerDisconnected, func(h HookBrokerDisconnected) { h.OnBrokerDisconnected(b, err) })
}

func (hs *hooks) onBrokerThrottled(b BrokerInfo, throttle time.Duration) {
	dispatch(hs, hs.brokerThrottled, kindBrokerThrottled, func(h HookBrokerThrottled) { h.OnBrokerThrottled(b, throttle) })
}

// onBrokerRequestWritten runs on the connection's writer, whose id g
// caches; onBrokerResponseRead on its reader.
func (hs *hooks) onBrokerRequestWritten(g *goroutineCache, b BrokerInfo, r RequestWritten) {
	dispatchMarked(hs, g, hs.brokerRequestWritten, kindBrokerRequestWritten, func(h HookBrokerRequestWritten) { h.OnBrokerRequestWritten(b, r) })
}

func (hs *hooks) onBrokerResponseRead(g *goroutineCache, b BrokerInfo, r ResponseRead) {
	dispatchMarked(hs, g, hs.brokerResponseRead, kindBrokerResponseRead, func(h HookBrokerResponseRead) { h.OnBrokerResponseRead(b, r) })
}

func (hs *hooks) onMetadataRefreshed(m MetadataRefresh) {
	dispatchMarked(hs, nil, hs.metadataRefreshed, kindMetadataRefreshed, func(h HookMetadataRefreshed) { h.OnMetadataRefreshed(m) })
}

func (hs *hooks) onTopicParked(topic string) {
	dispatch(hs, hs.topicParked, kindTopicParked, func(h HookTopicParked) { h.OnTopicParked(topic) })
}

func (hs *hooks) onTopicUnparked(topic string, u TopicUnparked) {
	dispatch(hs, hs.topicUnparked, kindTopicUnparked, func(h HookTopicUnparked) { h.OnTopicUnparked(topic, u) })
}

func (hs *hooks) onBufferWaited(topic string, waited time.Duration, err error) {
	dispatch(hs, hs.bufferWaited, kindBufferWaited, func(h HookBufferWaited) { h.OnBufferWaited(topic, waited, err) })
}

func (hs *hooks) onBufferExhausted(topic string, bytes int) {
	dispatch(hs, hs.bufferExhausted, kindBufferExhausted, func(h HookBufferExhausted) { h.OnBufferExhausted(topic, bytes) })
}
