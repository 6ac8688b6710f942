package producer

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samsa-go/samsa/internal/testutil"
)

// everyHook implements every Hook interface and counts the calls.
type everyHook struct{ calls map[string]int }

func (h *everyHook) n(k string) { h.calls[k]++ }
func (h *everyHook) OnRecordBuffered(ctx context.Context, rec *Record) context.Context {
	h.n("RecordBuffered")
	return ctx
}
func (h *everyHook) OnRecordCompleted(context.Context, RecordCompletion) { h.n("RecordCompleted") }
func (h *everyHook) OnBatchWritten(BatchWritten)                         { h.n("BatchWritten") }
func (h *everyHook) OnBrokerConnected(BrokerInfo, time.Duration, error)  { h.n("BrokerConnected") }
func (h *everyHook) OnBrokerDisconnected(BrokerInfo, error)              { h.n("BrokerDisconnected") }
func (h *everyHook) OnBrokerThrottled(BrokerInfo, time.Duration)         { h.n("BrokerThrottled") }
func (h *everyHook) OnBrokerRequestWritten(BrokerInfo, RequestWritten)   { h.n("BrokerRequestWritten") }
func (h *everyHook) OnBrokerResponseRead(BrokerInfo, ResponseRead)       { h.n("BrokerResponseRead") }
func (h *everyHook) OnMetadataRefreshed(MetadataRefresh)                 { h.n("MetadataRefreshed") }
func (h *everyHook) OnTopicParked(string)                                { h.n("TopicParked") }
func (h *everyHook) OnTopicUnparked(string, TopicUnparked)               { h.n("TopicUnparked") }
func (h *everyHook) OnBufferWaited(string, time.Duration, error)         { h.n("BufferWaited") }
func (h *everyHook) OnBufferExhausted(string, int)                       { h.n("BufferExhausted") }

// fire calls every event once.
func fire(hs *hooks, rec *Record) {
	ctx := context.Background()
	hs.onRecordBuffered(ctx, rec)
	hs.onRecordCompleted(ctx, RecordCompletion{})
	hs.onBatchWritten(BatchWritten{})
	hs.onBrokerConnected(BrokerInfo{}, 0, nil)
	hs.onBrokerDisconnected(BrokerInfo{}, nil)
	hs.onBrokerThrottled(BrokerInfo{}, 0)
	hs.onBrokerRequestWritten(nil, BrokerInfo{}, RequestWritten{})
	hs.onBrokerResponseRead(nil, BrokerInfo{}, ResponseRead{})
	hs.onMetadataRefreshed(MetadataRefresh{})
	hs.onTopicParked("t")
	hs.onTopicUnparked("t", TopicUnparked{})
	hs.onBufferWaited("t", 0, nil)
	hs.onBufferExhausted("t", 1)
}

// TestEveryHookKindIsDispatched guards that each interface has its own slice
// and its own call: a hook with every method is called once per event.
func TestEveryHookKindIsDispatched(t *testing.T) {
	h := &everyHook{calls: map[string]int{}}
	hs, err := newHooks([]Hook{h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fire(hs, &Record{Topic: "t"})
	if len(h.calls) != int(numHookKinds) {
		t.Fatalf("%d kinds called, want %d: %v", len(h.calls), numHookKinds, h.calls)
	}
	for k, n := range h.calls {
		if n != 1 {
			t.Errorf("%s called %d times", k, n)
		}
	}
	// Every kind has a name, and every slice of hooks got the hook.
	v := reflect.ValueOf(hs).Elem()
	slices := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && strings.HasPrefix(f.Type().Elem().Name(), "hookEntry") {
			slices++
			if f.Len() != 1 {
				t.Errorf("%s has %d hooks", v.Type().Field(i).Name, f.Len())
			}
		}
	}
	if slices != int(numHookKinds) {
		t.Errorf("%d hook slices, want %d", slices, numHookKinds)
	}
	for k, name := range hookKindNames {
		if name == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

type onlyBatches struct{ n int }

func (h *onlyBatches) OnBatchWritten(BatchWritten) { h.n++ }

type ctxKey struct{}

// tagger sets a header and puts its tag into the context.
type tagger struct {
	tag  string
	seen []string // tags of the contexts it was called with
}

func (h *tagger) OnRecordBuffered(ctx context.Context, rec *Record) context.Context {
	prev, _ := ctx.Value(ctxKey{}).(string)
	h.seen = append(h.seen, prev)
	rec.Headers = SetHeader(rec.Headers, "tag", []byte(h.tag))
	return context.WithValue(ctx, ctxKey{}, prev+h.tag)
}

func (h *tagger) OnRecordCompleted(ctx context.Context, _ RecordCompletion) {
	v, _ := ctx.Value(ctxKey{}).(string)
	h.seen = append(h.seen, "done:"+v)
}

type nilCtx struct{}

func (nilCtx) OnRecordBuffered(context.Context, *Record) context.Context { return nil }

func TestHooksSubsetsAndOrder(t *testing.T) {
	b := &onlyBatches{}
	a1, a2 := &tagger{tag: "a"}, &tagger{tag: "b"}
	hs, err := newHooks([]Hook{a1, b, nilCtx{}, a2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs.batchWritten) != 1 || len(hs.recordBuffered) != 3 || len(hs.recordCompleted) != 2 || hs.topicParked != nil {
		t.Fatalf("slices: batch %d buffered %d completed %d parked %v",
			len(hs.batchWritten), len(hs.recordBuffered), len(hs.recordCompleted), hs.topicParked)
	}
	rec := &Record{Topic: "t", Headers: []Header{{Key: "tag", Value: []byte("old")}, {Key: "k"}, {Key: "tag"}}}
	ctx := hs.onRecordBuffered(context.Background(), rec)
	hs.onRecordCompleted(ctx, RecordCompletion{})
	hs.onBatchWritten(BatchWritten{})
	if b.n != 1 {
		t.Fatalf("batch hook called %d times", b.n)
	}
	// Hooks run in the given order, each on the context the one before
	// returned (a nil context keeps it), and the completion gets the last.
	if got := strings.Join(a1.seen, ","); got != ",done:ab" {
		t.Errorf("first hook saw %q", got)
	}
	if got := strings.Join(a2.seen, ","); got != "a,done:ab" {
		t.Errorf("second hook saw %q", got)
	}
	want := []Header{{Key: "tag", Value: []byte("b")}, {Key: "k"}}
	if !reflect.DeepEqual(rec.Headers, want) {
		t.Errorf("headers %v, want %v", rec.Headers, want)
	}
}

func TestNewHooksRejects(t *testing.T) {
	cases := []struct {
		name string
		list []Hook
		want string
	}{
		{"nil", []Hook{&onlyBatches{}, nil}, "hook 1 is nil"},
		{"no interface", []Hook{struct{}{}}, "hook 0 (struct {}) implements no Hook interface"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newHooks(tc.list, nil)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

type panicky struct{ calls int }

func (p *panicky) OnBatchWritten(BatchWritten) { p.calls++; panic("batch boom") }
func (p *panicky) OnRecordBuffered(ctx context.Context, rec *Record) context.Context {
	p.calls++
	panic(errors.New("buffered boom"))
}

// TestHookPanicIsRecoveredAndLoggedOnce: a panicking hook does not stop the
// hooks after it, and its panic is logged once per hook and event kind, not
// once per record.
func TestHookPanicIsRecoveredAndLoggedOnce(t *testing.T) {
	var buf testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p := &panicky{}
	after := &tagger{tag: "x"}
	hs, err := newHooks([]Hook{p, after}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "in")
	for range 5 {
		if got := hs.onRecordBuffered(ctx, &Record{}); got.Value(ctxKey{}) != "inx" {
			t.Fatalf("context %v after a panicking hook", got.Value(ctxKey{}))
		}
		hs.onBatchWritten(BatchWritten{})
	}
	if p.calls != 10 || len(after.seen) != 5 {
		t.Fatalf("panicking hook called %d times, the next one %d", p.calls, len(after.seen))
	}
	out := buf.String()
	if n := strings.Count(out, "a hook panicked"); n != 2 {
		t.Fatalf("%d panics logged, want 2 (one per event kind):\n%s", n, out)
	}
	for _, want := range []string{"batch boom", "buffered boom", "event=OnBatchWritten", "event=OnRecordBuffered", "hook=*producer.panicky"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestSetHeader(t *testing.T) {
	cases := []struct {
		name string
		in   []Header
		want []Header
	}{
		{"empty", nil, []Header{{Key: "tp", Value: []byte("v")}}},
		{"append", []Header{{Key: "a"}}, []Header{{Key: "a"}, {Key: "tp", Value: []byte("v")}}},
		{"replace", []Header{{Key: "tp", Value: []byte("old")}, {Key: "a"}}, []Header{{Key: "tp", Value: []byte("v")}, {Key: "a"}}},
		{"drop duplicates", []Header{{Key: "a"}, {Key: "tp"}, {Key: "tp"}, {Key: "b"}}, []Header{{Key: "a"}, {Key: "tp", Value: []byte("v")}, {Key: "b"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SetHeader(tc.in, "tp", []byte("v"))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNoHooksCostsNothing: without hooks every slice is nil, so a call site's
// test is the whole cost, and the dispatch itself allocates nothing.
func TestNoHooksCostsNothing(t *testing.T) {
	hs, err := newHooks(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Topic: "t"}
	if n := testing.AllocsPerRun(100, func() { fire(hs, rec) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	b := &onlyBatches{}
	hs, _ = newHooks([]Hook{b}, nil)
	if n := testing.AllocsPerRun(100, func() { hs.onBatchWritten(BatchWritten{Topic: "t", Records: 3}) }); n != 0 {
		t.Fatalf("%v allocations per batch event with a hook", n)
	}
}

func BenchmarkHooksNone(b *testing.B) {
	hs, _ := newHooks(nil, nil)
	ctx := context.Background()
	rec := &Record{Topic: "t"}
	b.ReportAllocs()
	for b.Loop() {
		if hs.recordBuffered != nil {
			ctx = hs.onRecordBuffered(ctx, rec)
		}
		if hs.batchWritten != nil {
			hs.onBatchWritten(BatchWritten{Topic: "t"})
		}
	}
}

func BenchmarkHooksOne(b *testing.B) {
	h := &onlyBatches{}
	hs, _ := newHooks([]Hook{h}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if hs.batchWritten != nil {
			hs.onBatchWritten(BatchWritten{Topic: "t", Records: 10})
		}
	}
}
