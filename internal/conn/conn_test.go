package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/kerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dial(t testing.TB, addr string, cfg Config) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr, cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// callbacks records how often each request's callback ran, and with what.
type callbacks struct {
	mu    sync.Mutex
	order []int
	count map[int]int
	errs  map[int]error
	resps map[int]kmsg.Response
	wg    sync.WaitGroup
}

func newCallbacks(n int) *callbacks {
	cb := &callbacks{count: map[int]int{}, errs: map[int]error{}, resps: map[int]kmsg.Response{}}
	cb.wg.Add(n)
	return cb
}

func (cb *callbacks) fn(i int) func(kmsg.Response, error) {
	return func(resp kmsg.Response, err error) {
		cb.mu.Lock()
		cb.order = append(cb.order, i)
		cb.count[i]++
		cb.errs[i], cb.resps[i] = err, resp
		first := cb.count[i] == 1
		cb.mu.Unlock()
		if first {
			cb.wg.Done()
		}
	}
}

func (cb *callbacks) wait(t testing.TB) {
	t.Helper()
	ch := make(chan struct{})
	go func() { cb.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("callbacks did not all run")
	}
}

func (cb *callbacks) assertOnce(t testing.TB, n int) {
	t.Helper()
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for i := 0; i < n; i++ {
		if cb.count[i] != 1 {
			t.Errorf("callback %d ran %d times, want 1", i, cb.count[i])
		}
	}
}

func TestDialNegotiatesVersions(t *testing.T) {
	cases := []struct {
		name    string
		keys    []kmsg.ApiVersionsResponseApiKey
		caps    map[int16]int16
		want    map[int16]int16
		wantAPI int16 // ApiVersions version the handshake used
	}{
		{
			name:    "broker older than kmsg",
			keys:    defaultAPIKeys(),
			want:    map[int16]int16{0: 11, 3: 12, 18: 4, 22: 5, 1: -1, 19: -1, 500: -1, -1: -1},
			wantAPI: 4,
		},
		{
			name: "produce v13 by default",
			keys: []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: 0, MinVersion: 3, MaxVersion: 13},
				{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
			},
			want:    map[int16]int16{0: 13, 18: 4},
			wantAPI: 4,
		},
		{
			name: "explicit caps replace the default",
			keys: []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: 0, MinVersion: 3, MaxVersion: 13},
				{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
				{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
			},
			caps:    map[int16]int16{3: 9},
			want:    map[int16]int16{0: 13, 3: 9},
			wantAPI: 4,
		},
		{
			name: "broker newer than kmsg",
			keys: []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: 0, MinVersion: 3, MaxVersion: 99},
				{ApiKey: 18, MinVersion: 0, MaxVersion: 99},
			},
			caps:    map[int16]int16{},
			want:    map[int16]int16{0: (*kmsg.ProduceRequest)(nil).MaxVersion()},
			wantAPI: 4,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t, nil)
			b.apiKeys = tc.keys
			c := dial(t, b.addr(), Config{ClientID: "cid", MaxVersions: tc.caps})
			for key, want := range tc.want {
				if got := c.MaxVersion(key); got != want {
					t.Errorf("MaxVersion(%d) = %d, want %d", key, got, want)
				}
			}
			seen := b.requests()
			if len(seen) != 1 {
				t.Fatalf("broker saw %d requests, want 1 ApiVersions", len(seen))
			}
			av := seen[0].req.(*kmsg.ApiVersionsRequest)
			if seen[0].h.version != tc.wantAPI || seen[0].h.clientID != "cid" || av.ClientSoftwareName != "samsa" || av.ClientSoftwareVersion == "" {
				t.Errorf("ApiVersions request: header %+v, software %q %q", seen[0].h, av.ClientSoftwareName, av.ClientSoftwareVersion)
			}
		})
	}
}

// TestDialFallsBackToBrokerApiVersions protects KIP-511's fallback: an old
// broker answers UNSUPPORTED_VERSION with a v0 body and we retry lower.
func TestDialFallsBackToBrokerApiVersions(t *testing.T) {
	b := newFakeBroker(t, nil)
	b.maxAPIVersions = 2
	b.apiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 0, MaxVersion: 7},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 2},
	}
	c := dial(t, b.addr(), Config{})
	if got := c.MaxVersion(0); got != 7 {
		t.Fatalf("Produce version %d, want 7", got)
	}
	var versions []int16
	for _, r := range b.requests() {
		versions = append(versions, r.h.version)
	}
	if fmt.Sprint(versions) != "[4 2]" {
		t.Fatalf("ApiVersions versions sent %v, want [4 2]", versions)
	}
}

func TestDialFailures(t *testing.T) {
	old := newFakeBroker(t, nil)
	old.apiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MaxVersion: 2}, {ApiKey: 18, MaxVersion: 3}}

	cases := []struct {
		name string
		addr string
		cfg  Config
		want error
	}{
		{"broker without produce v3", old.addr(), Config{}, kerr.UnsupportedVersion},
		// A Dialer is user code: its panic fails the dial, it does not
		// crash the program.
		{"panicking Dialer", old.addr(), Config{Dialer: func(context.Context, string, string) (net.Conn, error) {
			panic("dialer bug")
		}}, kerr.NetworkException},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tc.addr, tc.cfg)
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial error %v, want one wrapping %v", err, tc.want)
			}
			if tc.cfg.Dialer != nil && !strings.Contains(err.Error(), "the Dialer panicked: dialer bug") {
				t.Fatalf("Dial error %v does not name the panic", err)
			}
		})
	}
}

// TestPipelinedCallbacksInOrder sends many requests without waiting and
// checks each callback runs once, in send order, with its own response.
func TestPipelinedCallbacksInOrder(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	c := dial(t, b.addr(), Config{})
	const n = 2000
	cb := newCallbacks(n)
	for i := 0; i < n; i++ {
		c.Send(metadataReq(fmt.Sprintf("t%d", i)), cb.fn(i))
	}
	cb.wait(t)
	cb.assertOnce(t, n)
	for i, got := range cb.order {
		if got != i {
			t.Fatalf("callback %d ran at position %d", got, i)
		}
		resp, err := cb.resps[i].(*kmsg.MetadataResponse), cb.errs[i]
		if err != nil || len(resp.Topics) != 1 || *resp.Topics[0].Topic != fmt.Sprintf("t%d", i) {
			t.Fatalf("request %d got %+v, %v", i, resp, err)
		}
		if resp.Version != 12 {
			t.Fatalf("response version %d, want the negotiated 12", resp.Version)
		}
	}
	var corrs []int32
	for _, r := range b.requests()[1:] {
		corrs = append(corrs, r.h.corr)
	}
	for i := 1; i < len(corrs); i++ {
		if corrs[i] != corrs[i-1]+1 {
			t.Fatalf("correlation ids not consecutive: %d then %d", corrs[i-1], corrs[i])
		}
	}
}

func TestConcurrentSendersEachGetTheirResponse(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	c := dial(t, b.addr(), Config{})
	var wg sync.WaitGroup
	var bad atomic.Int32
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				topic := fmt.Sprintf("g%d-%d", g, i)
				resp, err := c.Do(context.Background(), metadataReq(topic))
				if err != nil || *resp.(*kmsg.MetadataResponse).Topics[0].Topic != topic {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests got a wrong response", bad.Load())
	}
}

// TestRequestTimeoutFailsPendingOnce: a request without response breaks the
// connection and fails every pending request exactly once with ErrTimeout.
func TestRequestTimeoutFailsPendingOnce(t *testing.T) {
	b := newFakeBroker(t, func(h reqHeader, req kmsg.Request) kmsg.Response {
		if mr := req.(*kmsg.MetadataRequest); *mr.Topics[0].Topic == "hang" {
			return nil
		}
		return metadataEcho(h, req)
	})
	c := dial(t, b.addr(), Config{RequestTimeout: 100 * time.Millisecond})
	const n = 5
	cb := newCallbacks(n)
	c.Send(metadataReq("hang"), cb.fn(0))
	for i := 1; i < n; i++ {
		c.Send(metadataReq("hang"), cb.fn(i))
	}
	cb.wait(t)
	cb.assertOnce(t, n)
	for i := 0; i < n; i++ {
		if !errors.Is(cb.errs[i], ErrTimeout) {
			t.Errorf("request %d: %v, want ErrTimeout", i, cb.errs[i])
		}
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after a timeout")
	}
	if !errors.Is(c.Err(), ErrTimeout) {
		t.Fatalf("Err() = %v", c.Err())
	}
	// Sending on a broken connection fails at once with the same error.
	_, err := c.Do(context.Background(), metadataReq("x"))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Do after break: %v", err)
	}
	_ = c.Close()
	cb.assertOnce(t, n)
}

func TestIdleConnectionDoesNotTimeOut(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	// A round trip to the in-process broker takes microseconds; the timeout
	// leaves room for a stall of the loaded machine (-race).
	c := dial(t, b.addr(), Config{RequestTimeout: 300 * time.Millisecond})
	for i := 0; i < 3; i++ {
		if _, err := c.Do(context.Background(), metadataReq("a")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond) // idle for longer than the timeout
	}
	if err := c.Err(); err != nil {
		t.Fatalf("idle connection broke: %v", err)
	}
}

func TestCloseFailsPendingOnce(t *testing.T) {
	b := newFakeBroker(t, func(reqHeader, kmsg.Request) kmsg.Response { return nil })
	c := dial(t, b.addr(), Config{})
	const n = 50
	cb := newCallbacks(n + 1)
	for i := 0; i < n; i++ {
		c.Send(metadataReq("x"), cb.fn(i))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Close returns after every callback has run.
	cb.mu.Lock()
	ran := len(cb.order)
	cb.mu.Unlock()
	if ran != n {
		t.Fatalf("%d callbacks ran before Close returned, want %d", ran, n)
	}
	_ = c.Close() // idempotent
	c.Send(metadataReq("late"), cb.fn(n))
	cb.wait(t)
	cb.assertOnce(t, n+1)
	for i := 0; i <= n; i++ {
		if !errors.Is(cb.errs[i], ErrClosed) {
			t.Fatalf("request %d: %v, want ErrClosed", i, cb.errs[i])
		}
	}
	for i, got := range cb.order {
		if got != i {
			t.Fatalf("failed out of order: %v", cb.order)
		}
	}
}

func TestBrokerDropFailsPending(t *testing.T) {
	b := newFakeBroker(t, func(reqHeader, kmsg.Request) kmsg.Response { return nil })
	c := dial(t, b.addr(), Config{})
	cb := newCallbacks(3)
	for i := 0; i < 3; i++ {
		c.Send(metadataReq("x"), cb.fn(i))
	}
	// Wait until the broker has read them, then drop the connection.
	deadline := time.Now().Add(10 * time.Second)
	for len(b.requests()) < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.dropConns()
	cb.wait(t)
	cb.assertOnce(t, 3)
	for i := 0; i < 3; i++ {
		if !errors.Is(cb.errs[i], kerr.NetworkException) {
			t.Fatalf("request %d: %v, want NETWORK_EXCEPTION", i, cb.errs[i])
		}
	}
	<-c.Done()
}

// TestFailedRequestsTellWhetherTheyWereWritten: a request that fails
// before any byte of it reached the socket (held behind a KIP-219
// throttle when the connection breaks or is closed) wraps ErrNotSent,
// so that its owner may send it again as never sent; one the broker had
// read does not, as the broker may have processed it.
func TestFailedRequestsTellWhetherTheyWereWritten(t *testing.T) {
	cases := []struct {
		name    string
		held    bool // the second request waits behind a throttle
		end     func(b *fakeBroker, c *Conn)
		wantErr error
	}{
		{"written, then dropped", false, func(b *fakeBroker, _ *Conn) { b.dropConns() }, kerr.NetworkException},
		{"written, then closed", false, func(_ *fakeBroker, c *Conn) { _ = c.Close() }, ErrClosed},
		{"held, then dropped", true, func(b *fakeBroker, _ *Conn) { b.dropConns() }, kerr.NetworkException},
		{"held, then closed", true, func(_ *fakeBroker, c *Conn) { _ = c.Close() }, ErrClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			b := newFakeBroker(t, func(h reqHeader, req kmsg.Request) kmsg.Response {
				if n.Add(1) > 1 {
					return nil // the second request is read, never answered
				}
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				if tc.held {
					resp.ThrottleMillis = 60_000 // Produce v6+: the client holds what follows
				}
				return resp
			})
			c := dial(t, b.addr(), Config{})
			pr := func() *kmsg.ProduceRequest { r := kmsg.NewPtrProduceRequest(); r.Acks = -1; return r }
			if _, err := c.Do(context.Background(), pr()); err != nil {
				t.Fatal(err)
			}
			cb := newCallbacks(1)
			c.Send(pr(), cb.fn(0))
			if !tc.held {
				deadline := time.Now().Add(10 * time.Second)
				for n.Load() < 2 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			tc.end(b, c)
			cb.wait(t)
			cb.assertOnce(t, 1)
			err := cb.errs[0]
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNotSent); got != tc.held {
				t.Fatalf("error %q wraps ErrNotSent: %v, want %v", err, got, tc.held)
			}
			if tc.held && n.Load() != 1 {
				t.Fatalf("the broker read %d requests; the held one reached it", n.Load())
			}
		})
	}
}

// TestPendingFailInSendOrder: however the connection ends (Close, a
// dropped connection, a timeout) and wherever its requests are (in flight,
// queued, held by the writer, acks=0 and not yet flushed, sent by a
// callback while the pending ones are being failed), every callback runs
// once, in send order: answers first, then failures. The producer's
// in-order retries rely on that.
func TestPendingFailInSendOrder(t *testing.T) {
	const n = 200
	// answerUpTo answers Metadata requests until the one for topic k, and
	// then nothing more, as a broker answers in order.
	answerUpTo := func(k int) func(<-chan struct{}) func(reqHeader, kmsg.Request) kmsg.Response {
		return func(<-chan struct{}) func(reqHeader, kmsg.Request) kmsg.Response {
			var hung atomic.Bool
			return func(h reqHeader, req kmsg.Request) kmsg.Response {
				if mr, ok := req.(*kmsg.MetadataRequest); ok && *mr.Topics[0].Topic == fmt.Sprint(k) {
					hung.Store(true)
				}
				if hung.Load() {
					return nil
				}
				return metadataEcho(h, req)
			}
		}
	}
	// stall stops reading at the first request until the test ends, so
	// that the connection's buffers fill and the writer has requests
	// written but not flushed when the connection ends.
	stall := func(release <-chan struct{}) func(reqHeader, kmsg.Request) kmsg.Response {
		return func(reqHeader, kmsg.Request) kmsg.Response { <-release; return nil }
	}
	records := make([]byte, 64<<10)
	acks0 := func(int) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks = 0
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = records
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
	meta := func(i int) kmsg.Request { return metadataReq(fmt.Sprint(i)) }
	closeConn := func(c *Conn, _ *fakeBroker) { _ = c.Close() }
	dropConns := func(_ *Conn, b *fakeBroker) {
		deadline := time.Now().Add(10 * time.Second)
		for len(b.requests()) < 2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		b.dropConns()
	}
	cases := []struct {
		name   string
		cfg    Config
		handle func(release <-chan struct{}) func(reqHeader, kmsg.Request) kmsg.Response
		req    func(i int) kmsg.Request
		// answered: requests before this one may succeed.
		answered int
		end      func(c *Conn, b *fakeBroker)
		resend   bool // request 0's callback sends request n
		want     error
	}{
		{name: "close", handle: answerUpTo(0), req: meta, end: closeConn, want: ErrClosed},
		{name: "close, answers first", handle: answerUpTo(n / 2), req: meta, answered: n / 2, end: closeConn, want: ErrClosed},
		{name: "close, acks=0", handle: stall, req: acks0, answered: n, end: closeConn, want: ErrClosed},
		{name: "close, a callback sends", handle: answerUpTo(0), req: meta, end: closeConn, resend: true, want: ErrClosed},
		{name: "broker drops", handle: answerUpTo(0), req: meta, end: dropConns, want: kerr.NetworkException},
		{name: "broker drops, acks=0", handle: stall, req: acks0, answered: n, end: dropConns, want: kerr.NetworkException},
		{name: "timeout, answers first", cfg: Config{RequestTimeout: 100 * time.Millisecond}, handle: answerUpTo(n / 2), req: meta,
			answered: n / 2, end: func(*Conn, *fakeBroker) {}, want: ErrTimeout},
		{name: "timeout, a callback sends", cfg: Config{RequestTimeout: 100 * time.Millisecond}, handle: answerUpTo(0), req: meta,
			end: func(*Conn, *fakeBroker) {}, resend: true, want: ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			b := newFakeBroker(t, tc.handle(release))
			t.Cleanup(func() { close(release) }) // runs before the broker's cleanup
			c := dial(t, b.addr(), tc.cfg)
			total := n
			if tc.resend {
				total++
			}
			cb := newCallbacks(total)
			for i := 0; i < n; i++ {
				fn := cb.fn(i)
				if i == 0 && tc.resend {
					fn = func(resp kmsg.Response, err error) {
						c.Send(tc.req(n), cb.fn(n)) // the newest: fails last
						cb.fn(0)(resp, err)
					}
				}
				c.Send(tc.req(i), fn)
			}
			tc.end(c, b)
			cb.wait(t)
			<-c.Done()
			cb.assertOnce(t, total)
			cb.mu.Lock()
			defer cb.mu.Unlock()
			for i, got := range cb.order {
				if got != i {
					t.Fatalf("callbacks ran in the order %v, want send order", cb.order)
				}
			}
			failed := 0
			for i := 0; i < total; i++ {
				switch err := cb.errs[i]; {
				case err == nil && (i >= tc.answered || failed > 0):
					t.Fatalf("request %d succeeded after %d failed (answers end before %d)", i, failed, tc.answered)
				case err != nil && !errors.Is(err, tc.want):
					t.Fatalf("request %d: %v, want %v", i, err, tc.want)
				case err != nil:
					failed++
				}
			}
			if failed == 0 {
				t.Fatal("no request failed")
			}
		})
	}
}

// TestCorrelationMismatchBreaksConnection: a broker answering with the wrong
// correlation id breaks the connection with a clear error.
func TestCorrelationMismatchBreaksConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		defer sc.Close()
		fb := &fakeBroker{apiKeys: defaultAPIKeys(), maxAPIVersions: -1}
		for {
			frame, err := readFrame(sc)
			if err != nil {
				return
			}
			h, req, _ := decodeRequest(frame)
			var resp kmsg.Response
			if h.key == 18 {
				resp = fb.apiVersions(h)
			} else {
				resp = metadataEcho(h, req)
				h.corr += 7
			}
			if _, err := sc.Write(encodeResponse(h, resp)); err != nil {
				return
			}
		}
	}()
	c, err := Dial(context.Background(), ln.Addr().String(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), metadataReq("x"))
	if !errors.Is(err, kerr.NetworkException) || !strings.Contains(err.Error(), "correlation id") {
		t.Fatalf("Do: %v, want a correlation mismatch", err)
	}
	<-c.Done()
	_ = c.Close()
	<-serverDone
}

func TestAcksZeroCompletesAfterWrite(t *testing.T) {
	b := newFakeBroker(t, func(h reqHeader, req kmsg.Request) kmsg.Response {
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			if pr.Acks == 0 {
				return nil
			}
		}
		return metadataEcho(h, req)
	})
	c := dial(t, b.addr(), Config{})
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = 0
	resp, err := c.Do(context.Background(), pr)
	if resp != nil || err != nil {
		t.Fatalf("acks=0 produce: %v, %v; want nil, nil", resp, err)
	}
	// The connection keeps matching responses after a request without one.
	resp, err = c.Do(context.Background(), metadataReq("after"))
	if err != nil || *resp.(*kmsg.MetadataResponse).Topics[0].Topic != "after" {
		t.Fatalf("metadata after acks=0: %v, %v", resp, err)
	}
}

// TestUnsupportedKeyFailsAtOnce: a request whose key the broker does not
// offer fails before anything is written, with UNSUPPORTED_VERSION and a
// text that names the API and the Kafka release the broker's versions are
// those of (the fake broker offers Produce up to v11: Kafka 3.8 or 3.9).
func TestUnsupportedKeyFailsAtOnce(t *testing.T) {
	b := newFakeBroker(t, nil)
	c := dial(t, b.addr(), Config{})
	_, err := c.Do(context.Background(), kmsg.NewPtrFetchRequest())
	if !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("Do(Fetch): %v, want UNSUPPORTED_VERSION", err)
	}
	if want := "the broker offers no Fetch (its API versions are those of Kafka 3.8 or 3.9)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("Do(Fetch): %q, want it to say %q", err, want)
	}
}

// TestBrokerRelease: the release named from a broker's highest Produce
// version, at each version where Kafka raised it (the matrix of
// interop/realkafka_versions_test.go checks 2.8, 3.6, 3.9, 4.0 and 4.4
// against real brokers).
func TestBrokerRelease(t *testing.T) {
	for _, tc := range []struct {
		produceMax int16
		want       string
	}{
		{-1, "no Kafka release (no Produce)"},
		{2, "Kafka older than 0.11"},
		{3, "Kafka 0.11"},
		{5, "Kafka 1.0 or 1.1"},
		{6, "Kafka 2.0"},
		{7, "Kafka 2.1 to 2.3"},
		{8, "Kafka 2.4 to 2.7"},
		{9, "Kafka 2.8 to 3.6"},
		{10, "Kafka 3.7"},
		{11, "Kafka 3.8 or 3.9"},
		{12, "Kafka 4.0"},
		{13, "Kafka 4.1 or later"},
		{14, "Kafka 4.1 or later"},
	} {
		keys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 4}}
		if tc.produceMax >= 0 {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: 0, MinVersion: 3, MaxVersion: tc.produceMax})
		}
		if got := brokerRelease(keys); got != tc.want {
			t.Errorf("Produce up to v%d: %q, want %q", tc.produceMax, got, tc.want)
		}
	}
}

func TestDoHonorsContext(t *testing.T) {
	b := newFakeBroker(t, func(reqHeader, kmsg.Request) kmsg.Response { return nil })
	c := dial(t, b.addr(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, metadataReq("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do: %v", err)
	}
}

// TestThrottleHoldsWrites protects KIP-219: after a response with a throttle
// applied after responding, nothing reaches the broker until it has passed.
func TestThrottleHoldsWrites(t *testing.T) {
	cases := []struct {
		name        string
		produceV    int16 // broker's max Produce version
		wantHold    bool
		throttleFor time.Duration
	}{
		{"v6+ client-side throttle", 11, true, 150 * time.Millisecond},
		{"pre-v6 broker-side throttle", 5, false, 150 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var first atomic.Bool
			b := newFakeBroker(t, func(h reqHeader, req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				if first.CompareAndSwap(false, true) {
					resp.ThrottleMillis = int32(tc.throttleFor / time.Millisecond)
				}
				return resp
			})
			b.apiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: tc.produceV}, {ApiKey: 18, MaxVersion: 3}}
			var throttled atomic.Int64
			c := dial(t, b.addr(), Config{OnThrottle: func(addr string, d time.Duration) {
				if addr != b.addr() {
					t.Errorf("OnThrottle addr %q", addr)
				}
				throttled.Store(int64(d))
			}})
			pr := func() *kmsg.ProduceRequest { r := kmsg.NewPtrProduceRequest(); r.Acks = -1; return r }
			if _, err := c.Do(context.Background(), pr()); err != nil {
				t.Fatal(err)
			}
			if time.Duration(throttled.Load()) != tc.throttleFor {
				t.Fatalf("OnThrottle got %v, want %v", time.Duration(throttled.Load()), tc.throttleFor)
			}
			until := c.ThrottledUntil()
			if until.IsZero() != !tc.wantHold {
				t.Fatalf("ThrottledUntil = %v, want hold %v", until, tc.wantHold)
			}
			// The held request is delayed, not failed.
			if _, err := c.Do(context.Background(), pr()); err != nil {
				t.Fatal(err)
			}
			seen := b.requests()
			second := seen[len(seen)-1].at
			if tc.wantHold && second.Before(until) {
				t.Fatalf("second request reached the broker %v before the throttle ended", until.Sub(second))
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		attempt int
		base    time.Duration
		max     time.Duration
		lo, hi  time.Duration
	}{
		{0, 100 * time.Millisecond, time.Second, 80 * time.Millisecond, 120 * time.Millisecond},
		{1, 100 * time.Millisecond, time.Second, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 100 * time.Millisecond, time.Second, 640 * time.Millisecond, time.Second},
		{50, 100 * time.Millisecond, time.Second, 800 * time.Millisecond, time.Second},
		{0, 0, time.Second, 0, 0},
		{2, 10 * time.Millisecond, 0, 8 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tc := range cases {
		for i := 0; i < 100; i++ {
			if d := Backoff(tc.attempt, tc.base, tc.max); d < tc.lo || d > tc.hi {
				t.Fatalf("Backoff(%d, %v, %v) = %v, want in [%v, %v]", tc.attempt, tc.base, tc.max, d, tc.lo, tc.hi)
			}
		}
	}
}

func TestSanitizeSoftware(t *testing.T) {
	cases := []struct{ in, want string }{
		{"samsa", "samsa"},
		{"v1.2.3", "v1.2.3"},
		{"(devel)", "devel"},
		{"v0.0.0-2026+dirty", "v0.0.0-2026-dirty"},
		{"---", "unknown"},
	}
	for _, tc := range cases {
		if got := sanitizeSoftware(tc.in); got != tc.want {
			t.Errorf("sanitizeSoftware(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func BenchmarkDoRoundTrip(b *testing.B) {
	fb := newFakeBroker(b, metadataEcho)
	c := dial(b, fb.addr(), Config{})
	req := metadataReq("bench")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Do(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendPipelined measures throughput with up to 64 requests in flight.
func BenchmarkSendPipelined(b *testing.B) {
	fb := newFakeBroker(b, metadataEcho)
	c := dial(b, fb.addr(), Config{})
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	done := func(kmsg.Response, error) { <-sem; wg.Done() }
	// Responses complete in order and at most 64 are outstanding, so
	// request i%128 has completed before it is sent again.
	reqs := make([]*kmsg.MetadataRequest, 128)
	for i := range reqs {
		reqs[i] = metadataReq("bench")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		c.Send(reqs[i%128], done)
	}
	wg.Wait()
}
