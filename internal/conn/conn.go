package conn

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/logging"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// Sentinel errors. Every error a Conn reports wraps one of these or an
// error from the network (which also wraps kerr.NetworkException).
var (
	// ErrClosed is reported to requests still pending when Close is
	// called, and to requests sent after Close.
	ErrClosed = errors.New("conn: connection closed")

	// ErrTimeout is reported when a request got no response within
	// Config.RequestTimeout, or a write stalled that long. Kafka has no
	// way to cancel a request, so a timeout breaks the connection and
	// fails every pending request with an error wrapping ErrTimeout. For a
	// Produce request the outcome is ambiguous: the broker may have
	// written the batch. Its message has no "conn:" prefix: it is always
	// wrapped in one that names the broker and the request.
	ErrTimeout = errors.New("request timed out")

	// ErrNotSent is wrapped, beside the connection's error, by the error
	// of a request that failed before any byte of it was written to the
	// socket (it waited in the queue, behind a KIP-219 throttle or a
	// re-authentication, or was being encoded when the connection broke):
	// the broker never saw it, so sending it again is sending it for the
	// first time. A request without it in its error was written, in whole
	// or in part, and may have been processed.
	ErrNotSent = errors.New("the request was not sent")

	// ErrIdleClosed wraps ErrClosed: Err of a connection Config.MaxIdle
	// closed, and (with ErrNotSent) the error of a request sent to it
	// after that. Such a request was sent to a connection found open a
	// moment before: its owner dials again at once, without backoff.
	ErrIdleClosed = fmt.Errorf("%w: idle", ErrClosed)
)

const (
	// maxResponseSize bounds one response, so that a peer that is not a
	// Kafka broker (an HTTP or TLS server) cannot make us allocate
	// gigabytes. 100 MiB, like franz-go's default BrokerMaxReadBytes.
	maxResponseSize = 100 << 20
	bufSize         = 64 << 10
	// maxKeptBuf bounds the request encoding buffer a connection keeps
	// between requests: Produce requests of a few MiB are the common case
	// with large batches, and encoding each into a fresh buffer would
	// allocate and copy it all again.
	maxKeptBuf     = 32 << 20
	apiVersionsKey = 18
	produceKey     = 0
)

// Config configures a connection. The zero value is usable: every field has a
// default, written on the field.
type Config struct {
	// ClientID is sent in every request header. Default "samsa".
	ClientID string

	// SoftwareName and SoftwareVersion are sent in ApiVersions v3+
	// (KIP-511). Default "samsa" and the samsa module version. Characters
	// outside [a-zA-Z0-9.-] are replaced by '-', as brokers reject them.
	SoftwareName, SoftwareVersion string

	// DialTimeout bounds connection setup: the TCP (or Dialer) connect and
	// the ApiVersions handshake. Default 10s.
	DialTimeout time.Duration

	// RequestTimeout is how long a written request may wait for its
	// response (request.timeout.ms); it also bounds a stalled write.
	// Default 30s. Requests held back by a KIP-219 throttle are not
	// written yet and do not time out.
	RequestTimeout time.Duration

	// Dialer opens the network connection. Default: a net.Dialer that
	// resolves the host with Resolver and tries each address in turn
	// (dial.go). Use it for a proxy, TLS (return a *tls.Conn) or tests. A
	// panic of it is recovered and logged at Error: Dial fails with an
	// error wrapping kerr.NetworkException and naming the panic, as for a
	// Dialer error.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialTimeoutMax caps the setup timeout that Setups grows after failed
	// attempts (socket.connection.setup.timeout.max.ms). Default, or below
	// DialTimeout: DialTimeout (no growth).
	DialTimeoutMax time.Duration

	// Setups, if not nil, counts each address's consecutive failed dials:
	// the next dial to it gets DialTimeout doubled per failure, with ±20%
	// jitter, up to DialTimeoutMax. Share one among a client's
	// connections. Default nil: every dial gets DialTimeout.
	Setups *SetupTimeouts

	// SendBufferBytes and ReceiveBufferBytes, when positive, set the
	// socket's SO_SNDBUF and SO_RCVBUF right after the Dialer returns
	// (send.buffer.bytes, receive.buffer.bytes), also under a connection
	// with a NetConn method (a *tls.Conn); a connection without such
	// buffers is left as it is.
	// Default 0: the operating system's (with Linux's autotuning).
	SendBufferBytes, ReceiveBufferBytes int

	// Logger receives connection events: a connection's first throttle at
	// Info and later ones at Debug; the peer's close (EOF or connection
	// reset) with no request outstanding (queued, being written, awaiting
	// its answer, or an acks=0 Produce not yet flushed: a broker or a NAT
	// closing an idle connection) at Info, a broker's first in the
	// process and then at most once per logging.RepeatEvery, at Debug in
	// between; other breaks, protocol violations among them, at Warn (a
	// broker's first break in the process, then at most once per
	// logging.RepeatEvery, at Debug in between: its producer and metadata
	// connections, which break together, log once); Config.MaxIdle's
	// closes and dials at Debug; nothing per request above Debug.
	// Default: discard.
	Logger *slog.Logger

	// OnThrottle, if set, is called from the reader goroutine each time a
	// response carries ThrottleTimeMs > 0, with the broker address and the
	// throttle. It must not block.
	OnThrottle func(addr string, d time.Duration)

	// OnWrite, if set, is called on the connection's writer goroutine
	// after each request is written to the socket's buffer (or failed to
	// be), and OnRead on its reader goroutine after each response is read
	// (or failed to decode), before the request's done callback. No lock
	// of the connection is held; they must not block, and must not call
	// Close. Without them the connection takes no timestamps. Default nil.
	OnWrite func(WriteInfo)
	OnRead  func(ReadInfo)

	// MaxVersions caps the version used per API key. Default (nil): no
	// cap, every API at the highest version both kmsg and the broker
	// support (Produce v13 addresses topics by id, KIP-516: the producer
	// caps a request at v12 with SendMax when a topic has no id).
	MaxVersions map[int16]int16

	// Expect, when its ClusterID is set, is the broker the dial means to
	// reach: ApiVersions v5 (KIP-1242) sends it, and a broker that is not
	// that node of that cluster fails Dial with an error wrapping
	// ErrClusterMismatch (negotiate.go). Default: none sent.
	Expect Identity

	// TLS, if not nil, runs a TLS handshake right after the Dialer
	// connects (tls.go). A config without ServerName gets the broker's
	// host, so certificates are verified against it. A certificate that
	// does not verify fails Dial with an error wrapping ErrAuthentication.
	TLS *tls.Config

	// MaxIdle, when positive, closes the connection once it has had
	// nothing to do for that long (connections.max.idle.ms): no request
	// queued, being written or awaiting its answer since it was set up or
	// its last request was done. Done is closed then, Err wraps
	// ErrIdleClosed (and so ErrClosed), and the close is logged at Debug.
	// A request is never cut: one sent before the close keeps the
	// connection (the time starts again when the last request is done),
	// and one sent after it, to a connection found open a moment before,
	// is never written and fails with an error wrapping ErrNotSent and
	// ErrIdleClosed: its owner dials again and sends it there. The owner
	// replaces the connection at its next use (Done). Its timer is the
	// runtime's (no goroutine waits for it), reset when the last request
	// is done.
	// Default 0: never; a long-lived owner that counts its own requests
	// (the producer's IO goroutine) closes its connections itself.
	MaxIdle time.Duration

	// SASL, if not nil, authenticates the connection after ApiVersions
	// and again before the broker's session lifetime ends (KIP-368;
	// sasl.go). A rejected exchange fails Dial, or breaks the
	// connection, with an error wrapping ErrAuthentication; so does a
	// panic of the mechanism's Start or its session's Step (a token
	// callback's, say), recovered and logged at Error with its value
	// capped at 200 bytes.
	SASL sasl.Mechanism
}

// WriteInfo describes a request written, for Config.OnWrite.
type WriteInfo struct {
	// Key and Version are the request's API key and version.
	Key, Version int16
	// Bytes is the request's size with its length prefix.
	Bytes int
	// Queued is the time from Send to the start of the write (a KIP-219
	// throttle holds requests here), and Write the write's own time.
	Queued, Write time.Duration
	// Err is nil when the request was written.
	Err error
}

// ReadInfo describes a response read, for Config.OnRead.
type ReadInfo struct {
	// Key and Version are those of the request answered.
	Key, Version int16
	// Bytes is the response's size with its length prefix.
	Bytes int
	// Latency is the time from writing the request to reading its answer.
	Latency time.Duration
	// Err is nil when the response decoded.
	Err error
}

func (cfg *Config) setDefaults() {
	if cfg.ClientID == "" {
		cfg.ClientID = "samsa"
	}
	if cfg.SoftwareName == "" {
		cfg.SoftwareName = "samsa"
	}
	if cfg.SoftwareVersion == "" {
		cfg.SoftwareVersion = moduleVersion()
	}
	cfg.SoftwareName = sanitizeSoftware(cfg.SoftwareName)
	cfg.SoftwareVersion = sanitizeSoftware(cfg.SoftwareVersion)
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.DialTimeoutMax < cfg.DialTimeout {
		cfg.DialTimeoutMax = cfg.DialTimeout
	}
	if cfg.Dialer == nil {
		cfg.Dialer = dialEachAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// Conn is one pipelined connection to a broker. It is safe for concurrent
// use. It owns two goroutines, a writer and a reader, that end when the
// connection breaks or is closed.
type Conn struct {
	addr     string
	cfg      Config
	nc       net.Conn
	format   *kmsg.RequestFormatter
	versions []int16 // negotiated version per key, -1 if unusable
	release  string  // the Kafka releases the broker's API versions are those of (brokerRelease)
	// identified is set when the broker accepted Config.Expect in an
	// ApiVersions v5 (KIP-1242): it is that node of that cluster.
	identified bool
	features   atomic.Pointer[Features] // the broker's finalized features, from ApiVersions

	mu       sync.Mutex
	queue    fifo // sent, not yet written; owned by the writer
	inflight fifo // written, awaiting a response; owned by the reader
	err      error
	seq      uint64     // next send sequence number
	orphans  []*pending // handed back by the writer after the break, for failPending
	exited   int        // goroutines that have exited; the second fails what is pending
	drained  bool       // failPending is done: Send fails new requests itself
	notSent  error      // err with ErrNotSent, for requests never written; set with drained

	// The writer's: wire counts the bytes the socket took, and queued the
	// bytes handed to the write buffer (a request's offset in the byte
	// stream is queued when it is written); failPending reads them once
	// the writer has exited.
	wire   socketWriter
	queued int64

	// answered: the reader delivered a response past the handshake (the
	// reader's; see saslListenerErr).
	answered bool

	wake          chan struct{} // 1-buffered: Send → writer
	done          chan struct{} // closed once err is set
	throttleUntil atomic.Int64  // unix nanos; 0 if never throttled
	reauthAt      int64         // unix nanos of the next SASL re-authentication; 0: none; the writer's
	corr          int32         // next correlation id; written under mu
	wg            sync.WaitGroup
	throttleSeen  atomic.Bool // the first throttle was logged at Info
	timed         bool        // OnWrite or OnRead is set: take timestamps

	// Under mu: busy counts the requests sent and not done (answered, or
	// flushed for acks=0), wherever they are (queued, held by the writer,
	// in flight); fail reads it. Config.MaxIdle's timer is idle (nil
	// without it), and idleSince is when busy last fell to 0.
	idle      *time.Timer
	busy      int
	idleSince time.Time
}

// pending is one request on its way through the connection.
type pending struct {
	req      kmsg.Request
	fn       func(kmsg.Response, error)
	corr     int32
	seq      uint64 // send order: pending requests are failed in this order
	deadline time.Time
	noResp   bool // Produce with acks=0: the broker sends nothing back
	// placed: the writer put the request in the byte stream, at offset
	// off; it reached the socket if the socket took a byte past off.
	placed bool
	off    int64
	// queued and written are taken only with Config.OnWrite or OnRead.
	queued, written time.Time
}

var pendingPool = sync.Pool{New: func() any { return new(pending) }}

func getPending() *pending { return pendingPool.Get().(*pending) }

func putPending(p *pending) {
	*p = pending{}
	pendingPool.Put(p)
}

// Dial connects to addr, negotiates versions with ApiVersions and starts the
// connection's reader and writer goroutines. ctx and Config.DialTimeout (or
// the longer timeout Config.Setups gives an address after failures) bound
// the whole setup; ctx has no effect once Dial returns.
//
// A connection that cannot be set up fails with an error that names the
// broker and the cause ("cannot connect to broker 127.0.0.1:9: connection
// refused (nothing is listening there)", "... no such host \"kafka.invalid\"",
// "... timed out after 10s"; dialerr.go) and wraps kerr.NetworkException,
// except trust failures and listener mismatches (a plaintext client on a TLS
// listener, a TLS client on a plaintext one), which wrap ErrAuthentication.
// Dial fails if the broker does not support Produce v3 or later (Kafka 0.11),
// with an error wrapping kerr.UnsupportedVersion.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	cfg.setDefaults()
	c, err := dialSetup(ctx, addr, cfg, cfg.Setups.timeout(addr, cfg.DialTimeout, cfg.DialTimeoutMax))
	if err == nil || ctx.Err() == nil { // the caller's giving up is no failed setup
		cfg.Setups.done(addr, err == nil)
	}
	return c, err
}

func dialSetup(ctx context.Context, addr string, cfg Config, timeout time.Duration) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	nc, err := dialNet(dctx, addr, cfg)
	if err == nil {
		if err = setBuffers(nc, &cfg); err != nil {
			_ = nc.Close()
		}
	}
	if err != nil {
		return nil, endedErr(ctx, dctx, timeout, connectErr(addr, err))
	}
	if cfg.TLS != nil {
		if nc, err = tlsClient(dctx, nc, addr, cfg); err != nil {
			return nil, endedErr(ctx, dctx, timeout, err)
		}
	}
	c := newConn(nc, addr, cfg)

	// A cancelled ctx interrupts the handshake by expiring the deadline.
	// The interrupting goroutine, if it started, is waited for: Dial
	// leaves nothing running when it fails.
	interrupted := make(chan struct{})
	stop := context.AfterFunc(dctx, func() {
		defer close(interrupted)
		_ = nc.SetDeadline(time.Unix(1, 0))
	})
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	err = alertErr(addr, c.negotiate(cfg.TLS != nil))
	if err == nil && cfg.SASL != nil {
		err = c.authenticate(dctx)
	}
	if !stop() {
		<-interrupted
		if err == nil {
			err = dctx.Err()
		}
	}
	if err != nil {
		_ = nc.Close()
		return nil, endedErr(ctx, dctx, timeout, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if v := c.MaxVersion(produceKey); v < 3 {
		_ = nc.Close()
		return nil, fmt.Errorf("conn: %s: %w: the broker supports Produce up to v%d; samsa needs v3+ (Kafka 0.11+)", addr, kerr.UnsupportedVersion, v)
	}
	cfg.Logger.Debug("connected", "addr", addr, "produce_version", c.MaxVersion(produceKey))

	c.wg.Add(2)
	if cfg.MaxIdle > 0 {
		c.mu.Lock()
		c.idleSince = time.Now()
		c.idle = time.AfterFunc(cfg.MaxIdle, c.idleExpired)
		c.mu.Unlock()
	}
	go c.writeLoop()
	go c.readLoop()
	return c, nil
}

// newConn returns the Conn of nc before its handshakes, its goroutines not
// started.
func newConn(nc net.Conn, addr string, cfg Config) *Conn {
	c := &Conn{
		addr:   addr,
		cfg:    cfg,
		nc:     nc,
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		timed:  cfg.OnWrite != nil || cfg.OnRead != nil,
	}
	c.wire.nc = nc
	return c
}

// dialNet runs cfg.Dialer, user code: a panic of it is recovered (and
// logged with its stack at Error) and fails the dial like a Dialer's error,
// instead of crashing the program from the goroutine that dials.
func dialNet(ctx context.Context, addr string, cfg Config) (nc net.Conn, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		text := panicText(v)
		cfg.Logger.Error("conn: the Dialer panicked; the panic was recovered", "addr", addr, "panic", text, "stack", string(debug.Stack()))
		nc, err = nil, fmt.Errorf("the Dialer panicked: %s", text)
	}()
	return cfg.Dialer(ctx, "tcp", addr)
}

// Addr returns the address Dial was given.
func (c *Conn) Addr() string { return c.addr }

// Identified reports whether the broker confirmed Config.Expect: it
// answered an ApiVersions v5 naming that cluster and node without error
// (Kafka 4.4+, KIP-1242). False without Expect, and for a broker that
// cannot check (before Kafka 4.4: it negotiated an older ApiVersions).
func (c *Conn) Identified() bool { return c.identified }

// MaxVersion returns the version Send uses for key: the highest version both
// kmsg and the broker support, capped by Config.MaxVersions; -1 if there is
// none.
func (c *Conn) MaxVersion(key int16) int16 {
	if key < 0 || int(key) >= len(c.versions) {
		return -1
	}
	return c.versions[key]
}

// Features are a broker's finalized feature levels (KIP-584), read from
// its ApiVersions answer (v3+; Kafka 2.7+). Epoch is the answer's
// FinalizedFeaturesEpoch, which grows with every change of a level: of two
// connections' Features, the one with the higher Epoch is the newer. A
// broker that reports no finalized features has Epoch -1 and no Levels.
type Features struct {
	Epoch  int64
	Levels map[string]int16 // the finalized max version level per feature name
}

// Level returns the finalized level of feature name, 0 when the broker
// finalizes none.
func (f Features) Level(name string) int16 { return f.Levels[name] }

// Features returns the finalized features of the broker's last
// ApiVersions answer on this connection: the handshake's, or
// ReadFeatures'. The map must not be modified.
func (c *Conn) Features() Features {
	if f := c.features.Load(); f != nil {
		return *f
	}
	return Features{Epoch: -1}
}

// ReadFeatures asks the broker its finalized features again with an
// ApiVersions request on this connection (Kafka answers one at any time),
// keeps them for Features, and returns them. A broker changes them at run
// time (FeatureCommand upgrade or downgrade) without telling its
// connections.
func (c *Conn) ReadFeatures(ctx context.Context) (Features, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = c.cfg.SoftwareName, c.cfg.SoftwareVersion
	resp, err := c.Do(ctx, req)
	if err != nil {
		return Features{Epoch: -1}, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ForCode(r.ErrorCode); err != nil {
		return Features{Epoch: -1}, fmt.Errorf("conn: %s: ApiVersions: %w", c.addr, err)
	}
	f := finalizedFeatures(r)
	c.features.Store(&f)
	return f, nil
}

// Done returns a channel closed once the connection is broken or closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection broke (ErrClosed after Close), or nil while
// it is usable.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// ThrottledUntil returns when the last KIP-219 throttle from this broker
// ends, or the zero time if it never throttled. Writes are held until then.
func (c *Conn) ThrottledUntil() time.Time {
	n := c.throttleUntil.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Send queues req and returns at once; it never blocks on I/O. It sets req's
// version to MaxVersion(req.Key()) (callers must not pin one), so req must not
// be sent on two connections at the same time.
//
// done is called exactly once:
//   - from the reader goroutine with the response (or a decode error), in the
//     order requests were sent;
//   - from the writer goroutine with (nil, nil) once a Produce request with
//     Acks 0 is written, as the broker sends no response;
//   - with an error wrapping ErrClosed, ErrTimeout or kerr.NetworkException
//     when the connection is closed or breaks first: once both of the
//     connection's goroutines have exited, the last of them fails every
//     request still pending, one after the other in the order they were
//     sent, oldest first (a request sent meanwhile, even from a callback,
//     is failed after them by the same goroutine); the error of a request
//     no byte of which was written to the socket also wraps ErrNotSent;
//   - before Send returns, on the caller's goroutine, if the connection
//     broke and everything sent before has already been failed, or if the
//     broker does not support req's key (an error wrapping
//     kerr.UnsupportedVersion).
//
// So per connection, answers come in send order, and failures too, after
// every answer. The one exception is acks=0: such a request completes when
// written, which may be before an older request on the same connection has
// its answer (or its failure).
//
// done must not block for long and must not call Close. The caller bounds the
// number of requests in flight; Send itself does not.
func (c *Conn) Send(req kmsg.Request, done func(kmsg.Response, error)) {
	c.SendMax(req, math.MaxInt16, done)
}

// SendMax is Send with req's version at most max, for a request whose
// version is a choice of the caller (a transactional producer picks
// Produce v11 or v12, EndTxn v4 or v5, by the cluster's transaction
// version). A max below 0 sends at MaxVersion.
func (c *Conn) SendMax(req kmsg.Request, max int16, done func(kmsg.Response, error)) {
	v := c.MaxVersion(req.Key())
	if max >= 0 && v > max {
		v = max
	}
	if v < 0 {
		done(nil, fmt.Errorf("conn: %s: %w: the broker offers no %s (its API versions are those of %s)", c.addr, kerr.UnsupportedVersion, kmsg.NameForKey(req.Key()), c.release))
		return
	}
	req.SetVersion(v)
	p := getPending()
	p.req, p.fn = req, done
	if c.timed {
		p.queued = time.Now()
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		p.noResp = true
	}
	c.mu.Lock()
	if c.drained {
		err := c.notSent
		c.mu.Unlock()
		putPending(p)
		done(nil, err)
		return
	}
	// Queued even when broken, until failPending is done: it then fails
	// this request after the older ones.
	p.seq = c.seq
	c.seq++
	c.queue.push(p)
	c.busy++
	if c.busy == 1 && c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

type result struct {
	resp kmsg.Response
	err  error
}

// Do sends req (as Send does) and waits for its response, ctx or the request
// timeout. If ctx ends first Do returns ctx.Err(), but the request stays on
// the wire and the broker may still process it: Kafka cannot cancel a request.
// A Produce request with Acks 0 returns (nil, nil) once written.
func (c *Conn) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.DoMax(ctx, req, math.MaxInt16)
}

// DoMax is Do with req's version at most max (see SendMax).
func (c *Conn) DoMax(ctx context.Context, req kmsg.Request, max int16) (kmsg.Response, error) {
	ch := make(chan result, 1)
	c.SendMax(req, max, func(resp kmsg.Response, err error) { ch <- result{resp, err} })
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes the connection and fails every pending request with an error
// wrapping ErrClosed (and ErrNotSent for those not written yet), each
// exactly once. It returns after the connection's
// goroutines have exited and every callback has returned. It is idempotent
// and returns nil. It must not be called from a Send callback.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}

// fail marks the connection broken with err (the first error wins) and
// closes the socket, which ends both goroutines. The last of them to exit
// then fails everything pending (exit, failPending).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	if c.idle != nil {
		c.idle.Stop()
	}
	// No request outstanding and the peer closed (FIN or RST): a
	// broker's connections.max.idle.ms, a NAT or a load balancer closed
	// an idle connection, which costs its owner a reconnect and nothing
	// else. A protocol violation (a response with nothing in flight, a
	// bad size) is a break, idle or not.
	idle := c.busy == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
	c.mu.Unlock()
	_ = c.nc.Close()
	switch {
	case errors.Is(err, ErrClosed):
	case idle:
		level := slog.LevelInfo
		if idleBreaks.Level(c.addr, time.Now()) != slog.LevelWarn {
			level = slog.LevelDebug
		}
		c.cfg.Logger.Log(context.Background(), level, "broker closed an idle connection", "addr", c.addr, "err", err)
	default:
		level := breaks.Level(c.addr, time.Now())
		c.cfg.Logger.Log(context.Background(), level, "broker connection broken", "addr", c.addr, "err", err)
	}
}

// breaks rates the Warn of broken connections per broker address, for
// every connection of the process (see Config.Logger), and idleBreaks
// the Info of idle connections the peer closed, apart: an idle close
// does not silence the Warn of an outage that follows it.
var breaks, idleBreaks logging.Repeat

// brokenErr returns the error to report for an I/O error: the error that
// already broke the connection if any (so Close reports ErrClosed, not "use
// of closed network connection"), ErrTimeout for an expired deadline, and the
// network error wrapped in kerr.NetworkException otherwise.
func (c *Conn) brokenErr(ioErr error, what string) error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if errors.Is(ioErr, os.ErrDeadlineExceeded) {
		return fmt.Errorf("conn: %s: %s: %w after %v", c.addr, what, ErrTimeout, c.cfg.RequestTimeout)
	}
	return fmt.Errorf("conn: %s: %s: %w: %w", c.addr, what, kerr.NetworkException, ioErr)
}

// next pops the next request to write and gives it its correlation id. It
// returns nil when the queue is empty or the connection is broken. The
// request is then in no queue: only the writer holds it until launch.
func (c *Conn) next() *pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.queue.len() == 0 {
		return nil
	}
	p := c.queue.pop()
	p.corr = c.corr
	c.corr++
	return p
}

// launch moves a formatted request that expects a response to the
// in-flight queue, with its deadline, before its bytes are written. The
// writer formats the request first, so that once the request is in flight
// (where the reader may complete it, and its owner reuse its memory, at any
// moment) the writer never touches it again. If the connection broke
// meanwhile, launch hands the request back for failPending, which fails it
// in its place in send order, and reports false.
func (c *Conn) launch(p *pending) bool {
	c.mu.Lock()
	if c.err != nil {
		c.orphans = append(c.orphans, p)
		c.mu.Unlock()
		return false
	}
	p.deadline = time.Now().Add(c.cfg.RequestTimeout)
	if c.inflight.len() == 0 {
		_ = c.nc.SetReadDeadline(p.deadline)
	}
	c.inflight.push(p)
	c.mu.Unlock()
	return true
}

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	bw := bufio.NewWriterSize(&c.wire, bufSize)
	var (
		buf       []byte
		unflushed []*pending // acks=0 requests written since the last flush
		timer     = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()
	// The writer only returns once the connection is broken. Acks=0
	// requests not flushed by then are handed back, to be failed with the
	// rest in send order.
	defer func() { c.exit(unflushed) }()

	flush := func() bool {
		if bw.Buffered() > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.RequestTimeout))
			if err := bw.Flush(); err != nil {
				c.fail(c.brokenErr(err, "write"))
				return false
			}
		}
		for _, p := range unflushed {
			p.fn(nil, nil)
			putPending(p)
		}
		if len(unflushed) > 0 {
			c.mu.Lock()
			c.requestsDone(len(unflushed))
			c.mu.Unlock()
		}
		clear(unflushed)
		unflushed = unflushed[:0]
		return true
	}

	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			// KIP-219: send nothing while the broker throttles us.
			if until := c.throttleUntil.Load(); until != 0 {
				if d := time.Until(time.Unix(0, until)); d > 0 {
					if !flush() {
						return
					}
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-c.done:
						return
					}
					continue // the throttle may have been extended
				}
			}
			if c.reauthAt != 0 && c.reauthDue() {
				if !flush() {
					return
				}
				if err := c.reauthenticate(); err != nil {
					c.fail(err)
					return
				}
			}
			p := c.next()
			if p == nil {
				break
			}
			if hint := sizeHint(p.req, len(c.cfg.ClientID)); cap(buf) < hint {
				// One allocation with room to spare, rather than
				// append's series of copies (and fresh pages) as
				// Produce requests grow under load.
				buf = make([]byte, 0, hint+hint/4)
			}
			buf = c.format.AppendRequest(buf[:0], p.req, p.corr)
			if len(buf) > bufSize {
				// Large requests go straight to the socket; keep
				// the write deadline fresh for them.
				_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.RequestTimeout))
			}
			var start time.Time
			var info WriteInfo
			if c.cfg.OnWrite != nil {
				// Read before launch: once in flight, the reader may
				// complete p and its owner reuse the request.
				start = time.Now()
				info = WriteInfo{Key: p.req.Key(), Version: p.req.GetVersion(), Bytes: len(buf), Queued: start.Sub(p.queued)}
			}
			if c.timed {
				p.written = time.Now()
			}
			p.placed, p.off = true, c.queued
			if p.noResp {
				unflushed = append(unflushed, p)
			} else if !c.launch(p) {
				return
			}
			n, err := bw.Write(buf)
			c.queued += int64(n)
			if c.cfg.OnWrite != nil {
				info.Write, info.Err = time.Since(start), err
				c.cfg.OnWrite(info)
			}
			if err != nil {
				c.fail(c.brokenErr(err, "write"))
				return
			}
		}
		if !flush() {
			return
		}
		if cap(buf) > maxKeptBuf {
			buf = nil // do not pin one huge request's buffer forever
		}
	}
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	br := bufio.NewReaderSize(c.nc, bufSize)
	err := c.readResponses(br)
	if !c.answered && c.cfg.SASL == nil {
		err = c.saslListenerErr(err) // dialerr.go
	}
	c.fail(err)
	c.exit(nil)
}

// exit is the last thing the writer and the reader do, once the connection
// is broken; the writer passes the acks=0 requests it wrote but did not
// flush. The second goroutine to exit fails everything pending: then
// nothing else holds a request, so no request is failed twice or out of
// its place, and every answer the reader delivered comes before.
func (c *Conn) exit(held []*pending) {
	c.mu.Lock()
	c.orphans = append(c.orphans, held...)
	c.exited++
	last := c.exited == 2
	c.mu.Unlock()
	if last {
		c.failPending()
	}
}

// failPending fails every pending request with the connection's error, in
// send order, on the calling goroutine, then sets drained. Requests sent
// while it runs (from callbacks or other goroutines) are queued, and failed
// in a further round, after the ones before them.
//
// A request no byte of which reached the socket fails with an error that
// also wraps ErrNotSent: the writer, which has exited, placed every request
// it wrote at its offset in the byte stream, and counted the bytes the
// socket took.
func (c *Conn) failPending() {
	c.mu.Lock()
	c.notSent = fmt.Errorf("%w (%w)", c.err, ErrNotSent)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		err, notSent := c.err, c.notSent
		list := append(c.inflight.drain(), c.orphans...)
		list = append(list, c.queue.drain()...)
		clear(c.orphans)
		c.orphans = c.orphans[:0]
		if len(list) == 0 {
			c.drained = true
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		// In flight and handed-back acks=0 requests interleave; the
		// queue holds only newer ones.
		slices.SortFunc(list, func(a, b *pending) int { return cmp.Compare(a.seq, b.seq) })
		for _, p := range list {
			if p.placed && p.off < c.wire.n {
				p.fn(nil, err)
			} else {
				p.fn(nil, notSent)
			}
			putPending(p)
		}
	}
}

// socketWriter is the writer's way to the socket: it counts the bytes the
// socket took, so that a broken connection tells the requests that
// reached it (in whole or in part) from those that never did.
type socketWriter struct {
	nc net.Conn
	n  int64
}

func (w *socketWriter) Write(b []byte) (int, error) {
	n, err := w.nc.Write(b)
	w.n += int64(n)
	return n, err
}

// readResponses reads responses until the connection fails, and returns the
// error that broke it.
func (c *Conn) readResponses(br *bufio.Reader) error {
	var size [4]byte
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return c.brokenErr(err, "read")
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > maxResponseSize {
			return fmt.Errorf("conn: %s: %w: invalid response size %d", c.addr, kerr.NetworkException, n)
		}
		// Only the oldest request in flight can be answered: bound the
		// response by what that request can produce before reading it.
		c.mu.Lock()
		head := c.inflight.peek()
		c.mu.Unlock()
		if head == nil {
			return fmt.Errorf("conn: %s: %w: a response of %d bytes, but no request in flight", c.addr, kerr.NetworkException, n)
		}
		if limit := maxResponseFor(head.req); n > limit {
			return fmt.Errorf("conn: %s: %w: a %s response of %d bytes is larger than that request can produce (%d)",
				c.addr, kerr.NetworkException, kmsg.NameForKey(head.req.Key()), n, limit)
		}
		body, err := readBody(br, int(n))
		if err != nil {
			return c.brokenErr(err, "read")
		}
		corr := int32(binary.BigEndian.Uint32(body))

		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return c.err
		}
		p := c.inflight.peek()
		if p != head {
			c.mu.Unlock()
			return fmt.Errorf("conn: %s: %w: the request in flight changed while its response was read", c.addr, kerr.NetworkException)
		}
		if p.corr != corr {
			c.mu.Unlock()
			return fmt.Errorf("conn: %s: %w: response correlation id %d, want %d (%s)", c.addr, kerr.NetworkException, corr, p.corr, kmsg.NameForKey(p.req.Key()))
		}
		c.inflight.pop()
		c.requestsDone(1)
		if next := c.inflight.peek(); next != nil {
			_ = c.nc.SetReadDeadline(next.deadline)
		} else {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		c.mu.Unlock()

		resp, err := decodeResponse(p.req, body)
		if err != nil {
			err = fmt.Errorf("conn: %s: %w", c.addr, err)
		} else {
			c.noteThrottle(resp)
		}
		if c.cfg.OnRead != nil {
			c.cfg.OnRead(ReadInfo{Key: p.req.Key(), Version: p.req.GetVersion(), Bytes: int(n) + 4, Latency: time.Since(p.written), Err: err})
		}
		c.answered = true
		p.fn(resp, err)
		putPending(p)
	}
}

// requestsDone notes n requests done, under mu: with Config.MaxIdle, the
// last one starts the idle time.
func (c *Conn) requestsDone(n int) {
	c.busy -= n
	if c.busy == 0 && c.err == nil && c.idle != nil {
		c.idleSince = time.Now()
		c.idle.Reset(c.cfg.MaxIdle)
	}
}

// idleExpired closes the connection if it has had nothing to do for
// Config.MaxIdle. The timer may fire late, racing a request sent or done
// meanwhile: the state under mu decides, and a request done later resets
// the timer again. The decision and the marking (err, done) are one
// critical section: a request sent after it fails with ErrNotSent
// (next and launch check err), and one sent before it keeps the
// connection. The goroutine counts in wg until it has logged, so nothing
// is logged after Close returns.
func (c *Conn) idleExpired() {
	c.mu.Lock()
	if c.err != nil || c.busy > 0 || time.Since(c.idleSince) < c.cfg.MaxIdle {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("%w for %v", ErrIdleClosed, c.cfg.MaxIdle)
	close(c.done)
	// err was nil: neither goroutine has exited, so wg is above zero.
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	_ = c.nc.Close()
	c.cfg.Logger.Debug("closing idle connection", "addr", c.addr, "max_idle", c.cfg.MaxIdle)
}

// readChunk is the most a frame's buffer grows by before that many bytes
// have arrived: a peer announcing a huge frame gets memory only as fast as
// it actually sends.
const readChunk = 64 << 10

// readBody reads a frame body of n bytes (its size already checked). Large
// bodies are read into a buffer that starts at readChunk and doubles as the
// bytes arrive, so that a size prefix alone never allocates much.
func readBody(r io.Reader, n int) ([]byte, error) {
	if n <= readChunk {
		body := make([]byte, n)
		_, err := io.ReadFull(r, body)
		return body, err
	}
	body := make([]byte, readChunk)
	got := 0
	for {
		k, err := io.ReadFull(r, body[got:])
		got += k
		if err != nil {
			return nil, err
		}
		if got == n {
			return body, nil
		}
		grown := make([]byte, min(2*len(body), n))
		copy(grown, body)
		body = grown
	}
}

// Response size bounds per request (see maxResponseFor). Kafka's answers to
// these requests are a few hundred bytes per partition or topic; the bounds
// leave room for long error messages and tagged fields.
const (
	tinyResponseMax     = 64 << 10 // InitProducerId: a few fixed fields
	smallResponseMax    = 1 << 20  // ApiVersions, and the base of the others
	perPartitionMax     = 16 << 10 // Produce: error message, record errors, current leader
	perTopicResponseMax = 64 << 10 // CreateTopics: the topic's configs
)

// maxResponseFor bounds the size of the response to req: a Produce answer
// is small, whatever its batches weighed, and so are InitProducerId,
// ApiVersions and CreateTopics answers. Metadata (and everything else) may
// be as large as maxResponseSize, and is read as it arrives.
func maxResponseFor(req kmsg.Request) int32 {
	var n int
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		n = smallResponseMax
		for i := range r.Topics {
			n += perPartitionMax * (1 + len(r.Topics[i].Partitions))
		}
	case *kmsg.InitProducerIDRequest:
		n = tinyResponseMax
	case *kmsg.ApiVersionsRequest:
		n = smallResponseMax
	case *kmsg.CreateTopicsRequest:
		n = smallResponseMax + perTopicResponseMax*len(r.Topics)
	default:
		return maxResponseSize
	}
	return int32(min(n, maxResponseSize))
}

// decodeResponse decodes body (correlation id included) as the response to
// req. A response that does not decode fails only its own request: the
// framing is intact, so the connection stays usable.
func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	// ApiVersions responses always use header v0 (KIP-511).
	flexible := resp.IsFlexible() && req.Key() != apiVersionsKey
	_, rest, err := parseResponseHeader(body, flexible)
	if err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// noteThrottle applies KIP-219: a response that says the broker throttles
// after responding holds our writes until the throttle has passed.
func (c *Conn) noteThrottle(resp kmsg.Response) {
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	ms, after := tr.Throttle()
	if ms <= 0 {
		return
	}
	d := time.Duration(ms) * time.Millisecond
	if after {
		until := time.Now().Add(d).UnixNano()
		for {
			cur := c.throttleUntil.Load()
			if cur >= until || c.throttleUntil.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	// Once at Info per connection, then at Debug: a quota throttles
	// every answer, and a line per request at Info would flood the log.
	level := slog.LevelDebug
	if !c.throttleSeen.Load() && !c.throttleSeen.Swap(true) {
		level = slog.LevelInfo
	}
	c.cfg.Logger.Log(context.Background(), level, "broker throttled requests", "addr", c.addr, "throttle", d, "api", kmsg.NameForKey(resp.Key()), "client_side", after)
	if c.cfg.OnThrottle != nil {
		c.cfg.OnThrottle(c.addr, d)
	}
}

// fifo is a queue of pending requests that reuses its backing array.
type fifo struct {
	buf  []*pending
	head int
}

func (q *fifo) len() int { return len(q.buf) - q.head }

func (q *fifo) push(p *pending) {
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, p)
}

func (q *fifo) peek() *pending {
	if q.head == len(q.buf) {
		return nil
	}
	return q.buf[q.head]
}

func (q *fifo) pop() *pending {
	p := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return p
}

// drain removes and returns everything queued, oldest first.
func (q *fifo) drain() []*pending {
	out := append([]*pending(nil), q.buf[q.head:]...)
	clear(q.buf)
	q.buf, q.head = q.buf[:0], 0
	return out
}

// sizeHint bounds the encoded size of a Produce request, header with a
// client id of clientID bytes included, from its batches; 0 for other
// requests.
func sizeHint(req kmsg.Request, clientID int) int {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return 0
	}
	n := 64 + clientID
	if pr.TransactionID != nil {
		n += len(*pr.TransactionID)
	}
	for i := range pr.Topics {
		t := &pr.Topics[i]
		n += 32 + len(t.Topic)
		for j := range t.Partitions {
			n += 16 + len(t.Partitions[j].Records)
		}
	}
	return n
}
