package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestAgainstTestbroker runs the handshake, a request and a KIP-219 throttle
// against the in-process cluster.
func TestAgainstTestbroker(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CreateTopic("t", 3); err != nil {
		t.Fatal(err)
	}
	var throttles atomic.Int32
	c := dial(t, cl.Addrs()[0], Config{OnThrottle: func(string, time.Duration) { throttles.Add(1) }})
	if v := c.MaxVersion(0); v < 3 || v > 13 {
		t.Fatalf("Produce version %d", v)
	}
	remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, Times: 1, Throttle: 100 * time.Millisecond})
	defer remove()
	resp, err := c.Do(context.Background(), metadataReq("t"))
	if err != nil {
		t.Fatal(err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) != 3 || mr.ThrottleMillis != 100 {
		t.Fatalf("metadata %+v", mr)
	}
	if throttles.Load() != 1 || c.ThrottledUntil().IsZero() {
		t.Fatalf("throttle not recorded: %d calls, until %v", throttles.Load(), c.ThrottledUntil())
	}
	// The next request waits out the throttle and then succeeds.
	if _, err := c.Do(context.Background(), metadataReq("t")); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(c.ThrottledUntil()) {
		t.Fatal("request answered before the throttle ended")
	}
}

// TestFinalizedFeaturesAndSendMax: a connection keeps the broker's
// finalized features (transaction.version, KIP-890) and their epoch from
// the ApiVersions handshake, and SendMax/DoMax cap a request's version
// below the negotiated one.
func TestFinalizedFeaturesAndSendMax(t *testing.T) {
	cases := []struct {
		name  string
		level int16
		want  int16
	}{
		{"level 2", 2, 2},
		{"level 1", 1, 1},
		{"none", -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := testbroker.New(testbroker.Config{Brokers: 1, TransactionVersion: tc.level})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			c := dial(t, cl.Addrs()[0], Config{})
			f := c.Features()
			if got := f.Level("transaction.version"); got != tc.want || f.Epoch < 0 {
				t.Fatalf("features %+v: transaction.version %d, want %d", f, got, tc.want)
			}
			if err := cl.SetTransactionVersion(1); err != nil {
				t.Fatal(err)
			}
			if got := c.Features(); got.Level("transaction.version") != tc.want {
				t.Fatalf("a connection keeps its handshake's features, got %+v", got)
			}
			if f2 := dial(t, cl.Addrs()[0], Config{}).Features(); f2.Level("transaction.version") != 1 || (tc.level != 1 && f2.Epoch <= f.Epoch) {
				t.Fatalf("a new connection: %+v after %+v", f2, f)
			}
			f3, err := c.ReadFeatures(context.Background())
			if err != nil || f3.Level("transaction.version") != 1 || c.Features().Level("transaction.version") != 1 {
				t.Fatalf("ReadFeatures: %+v, %v; then Features %+v", f3, err, c.Features())
			}
			for _, max := range []int16{4, 5, -1} {
				resp, err := c.DoMax(context.Background(), kmsg.NewPtrEndTxnRequest(), max)
				if err != nil {
					t.Fatal(err)
				}
				want := min(c.MaxVersion(26), max)
				if max < 0 {
					want = c.MaxVersion(26)
				}
				if resp.GetVersion() != want {
					t.Fatalf("DoMax(%d): EndTxn v%d, want v%d", max, resp.GetVersion(), want)
				}
			}
		})
	}
}

// Example shows a connection's lifecycle against the in-process cluster.
func Example() {
	cl, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	_ = cl.CreateTopic("orders", 2)

	c, err := Dial(context.Background(), cl.Addrs()[0], Config{ClientID: "example"})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, t)

	done := make(chan struct{})
	c.Send(req, func(resp kmsg.Response, err error) {
		defer close(done)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		mr := resp.(*kmsg.MetadataResponse)
		fmt.Println(*mr.Topics[0].Topic, "has", len(mr.Topics[0].Partitions), "partitions")
	})
	<-done
	// Output: orders has 2 partitions
}

// TestOnWriteAndOnRead: the callbacks see every request written and every
// response read after the handshake, with sizes and timings, in order.
func TestOnWriteAndOnRead(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	writes := make(chan WriteInfo, 8)
	reads := make(chan ReadInfo, 8)
	c := dial(t, cl.Addrs()[0], Config{
		OnWrite: func(w WriteInfo) { writes <- w },
		OnRead:  func(r ReadInfo) { reads <- r },
	})
	remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, Times: 1, Delay: 20 * time.Millisecond})
	defer remove()
	for range 2 {
		if _, err := c.Do(context.Background(), metadataReq("t")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		w, r := <-writes, <-reads
		if w.Key != 3 || w.Version != c.MaxVersion(3) || w.Bytes <= 4 || w.Err != nil || w.Queued < 0 || w.Write < 0 {
			t.Errorf("write %d: %+v", i, w)
		}
		if r.Key != 3 || r.Version != w.Version || r.Bytes <= 4 || r.Err != nil {
			t.Errorf("read %d: %+v", i, r)
		}
		if i == 0 && r.Latency < 20*time.Millisecond {
			t.Errorf("read %d: latency %v, want the 20ms delay", i, r.Latency)
		}
	}
	select {
	case w := <-writes:
		t.Errorf("unexpected write %+v (the handshake is not reported)", w)
	default:
	}
}

// Config.MaxIdle closes a connection that had nothing to do for that long,
// never one whose request is still awaiting its answer, however long the
// answer takes; without it a connection stays open.
func TestMaxIdleClosesOnlyIdleConnections(t *testing.T) {
	const maxIdle = 150 * time.Millisecond
	cl, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	kept := dial(t, cl.Addrs()[0], Config{})
	c := dial(t, cl.Addrs()[0], Config{MaxIdle: maxIdle})

	// An answer that takes three times MaxIdle.
	remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, Times: 1, Delay: 3 * maxIdle})
	defer remove()
	if _, err := c.Do(context.Background(), metadataReq("t")); err != nil {
		t.Fatalf("a request longer than MaxIdle was cut: %v", err)
	}
	answered := time.Now()
	if err := c.Err(); err != nil {
		t.Fatalf("closed as its answer came: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	if idle := time.Since(answered); idle < maxIdle-10*time.Millisecond {
		t.Fatalf("closed after %v idle, before MaxIdle %v", idle, maxIdle)
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", err)
	}
	if _, err := c.Do(context.Background(), metadataReq("t")); !errors.Is(err, ErrNotSent) {
		t.Fatalf("a request on the closed connection: %v, want ErrNotSent", err)
	}
	if err := kept.Err(); err != nil {
		t.Fatalf("a connection without MaxIdle was closed: %v", err)
	}
}

// gateHandler is a slog handler that blocks on one message until its gate
// is closed, to hold a goroutine at the point it logs.
type gateHandler struct {
	msg     string
	entered chan struct{} // closed when msg is first logged
	once    *sync.Once
	gate    chan struct{}
}

func (h gateHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h gateHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h gateHandler) WithGroup(string) slog.Handler            { return h }
func (h gateHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.entered) })
		<-h.gate
	}
	return nil
}

// A request sent while Config.MaxIdle's timer closes the connection (held
// at its log line) is never written and then cut: it fails with ErrNotSent
// (the connection is marked closed, with ErrIdleClosed, in the same
// critical section that found it idle), and Close waits for the timer's
// goroutine, which logs nothing after Close returned.
func TestMaxIdleCloseRacingASend(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	h := gateHandler{msg: "closing idle connection", entered: make(chan struct{}), once: new(sync.Once), gate: make(chan struct{})}
	written := make(chan struct{}, 1)
	c, err := Dial(context.Background(), cl.Addrs()[0], Config{
		MaxIdle: 20 * time.Millisecond,
		Logger:  slog.New(h),
		OnWrite: func(WriteInfo) {
			select {
			case written <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(h.gate)
		}
	}
	defer func() { release(); _ = c.Close() }()

	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), metadataReq("t"))
		res <- err
	}()
	var sendErr error
	select {
	case <-written:
		// Written to a connection about to be closed: wait for its fate
		// once Close has run (below).
	case sendErr = <-res:
		res <- sendErr
	case <-time.After(time.Second):
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Error("Close returned while the idle timer's goroutine was still logging")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	<-closed
	sendErr = <-res
	if !errors.Is(sendErr, ErrNotSent) || !errors.Is(sendErr, ErrIdleClosed) {
		t.Fatalf("a request sent as the idle connection closed: %v, want ErrNotSent and ErrIdleClosed", sendErr)
	}
	if err := c.Err(); !errors.Is(err, ErrIdleClosed) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Err %v, want ErrIdleClosed wrapping ErrClosed", err)
	}
}

// recordHandler keeps every record's level and message.
type recordHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newRecordHandler() recordHandler {
	return recordHandler{mu: new(sync.Mutex), recs: new([]slog.Record)}
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r)
	return nil
}

// level returns the level msg was logged at, and whether it was.
func (h recordHandler) level(msg string) (slog.Level, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.recs {
		if r.Message == msg {
			return r.Level, true
		}
	}
	return 0, false
}

// A break is logged as a peer's idle close (Info) only when no request is
// outstanding and the peer closed the connection; at most once per broker
// per logging.RepeatEvery (Debug in between). A protocol violation with
// nothing in flight, or a close with a request awaiting its answer, is a
// broken connection (Warn).
func TestBreakLoggedAsIdleCloseOnlyWhenIdle(t *testing.T) {
	const (
		idleMsg   = "broker closed an idle connection"
		brokenMsg = "broker connection broken"
	)
	cases := []struct {
		name string
		// raw answers the Metadata request the case sends, if any.
		raw       func(c net.Conn, h reqHeader, req kmsg.Request) bool
		send      bool
		closes    int // connections the broker closes, one after the other
		wantMsg   string
		wantLevel slog.Level // of the last connection's log
	}{
		{name: "closed while idle", closes: 1, wantMsg: idleMsg, wantLevel: slog.LevelInfo},
		{name: "closed while idle, again within RepeatEvery", closes: 2, wantMsg: idleMsg, wantLevel: slog.LevelDebug},
		{
			name: "a response with nothing in flight",
			raw: func(c net.Conn, h reqHeader, req kmsg.Request) bool {
				frame := encodeResponse(h, metadataEcho(h, req))
				_, _ = c.Write(append(frame, frame...)) // the answer, then one nobody asked for
				return true
			},
			send: true, closes: 1, wantMsg: brokenMsg, wantLevel: slog.LevelWarn,
		},
		{
			name:   "closed with a request awaiting its answer",
			raw:    func(net.Conn, reqHeader, kmsg.Request) bool { return false },
			send:   true,
			closes: 1, wantMsg: brokenMsg, wantLevel: slog.LevelWarn,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t, metadataEcho)
			b.raw = tc.raw
			var h recordHandler
			for range tc.closes {
				h = newRecordHandler()
				c, err := Dial(context.Background(), b.addr(), Config{Logger: slog.New(h)})
				if err != nil {
					t.Fatal(err)
				}
				if tc.send {
					_, _ = c.Do(context.Background(), metadataReq("t"))
				} else {
					if _, err := c.Do(context.Background(), metadataReq("t")); err != nil {
						t.Fatal(err)
					}
					b.dropConns()
				}
				select {
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the connection did not break")
				}
				_ = c.Close() // its goroutines have logged
			}
			other := brokenMsg
			if tc.wantMsg == brokenMsg {
				other = idleMsg
			}
			if _, ok := h.level(other); ok {
				t.Errorf("logged %q", other)
			}
			if level, ok := h.level(tc.wantMsg); !ok || level != tc.wantLevel {
				t.Errorf("%q logged: %v at %v, want at %v", tc.wantMsg, ok, level, tc.wantLevel)
			}
		})
	}
}
