package metadata

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/logging"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

// Errors returned by Client methods.
var (
	// ErrClosed is returned by Do and DoController after Close.
	ErrClosed = errors.New("metadata: client closed")
	// ErrInvalidConfig wraps every error of New about a bad Config field.
	ErrInvalidConfig = errors.New("metadata: invalid config")
	// ErrNoBroker is wrapped by the error of a request that found no
	// reachable broker, neither a known one nor a bootstrap address.
	ErrNoBroker = errors.New("metadata: no reachable broker")
	// ErrAuthentication is wrapped by the error of a connection that
	// failed TLS verification or SASL authentication (Err, Do): a broker
	// and the client do not trust each other. It is the same value as
	// producer.ErrAuthentication.
	ErrAuthentication = conn.ErrAuthentication
	// ErrClusterMismatch is wrapped by the error of a broker that is not
	// part of the client's cluster (Err): its Metadata answer names
	// another cluster id than the first answer the client applied (the
	// error names both; the answer is not applied), or, with the cluster
	// check (Config.DisableClusterCheck unset), it answered a connection's
	// ApiVersions v5 with REBOOTSTRAP_REQUIRED: it is not the node, or not
	// in the cluster, the client dialed (KIP-1242; the connection is
	// closed before any other request). It is the same value as
	// producer.ErrClusterMismatch.
	ErrClusterMismatch = conn.ErrClusterMismatch
)

// defaultRebootstrapTrigger is Config.RebootstrapTrigger's default, as
// Java's metadata.recovery.rebootstrap.trigger.ms.
const defaultRebootstrapTrigger = 5 * time.Minute

// newTopicBackoff is the first retry delay for a topic that is not usable
// yet; it doubles per attempt up to Config.RetryBackoffMax. It is shorter
// than RetryBackoff so that a topic created just before the first send
// appears quickly (10, 20, 40, 80 ms, ...).
const newTopicBackoff = 10 * time.Millisecond

// staleAnswersAccepted is how many consecutive retriable topic errors for a
// usable topic we treat as a stale broker before believing them (the topic
// was deleted).
const staleAnswersAccepted = 3

// Config configures a Client.
type Config struct {
	// Bootstrap lists "host:port" addresses of brokers to start from
	// (bootstrap.servers). Required. Names are resolved again at every
	// dial, so a DNS name that moves is followed.
	Bootstrap []string

	// ClientID is sent in every request header (client.id). Default
	// "samsa".
	ClientID string
	// DialTimeout bounds connection setup: the connect, the TLS handshake,
	// ApiVersions and SASL. Default 10s.
	DialTimeout time.Duration
	// RequestTimeout is how long a written request may wait for its
	// response (request.timeout.ms). Default 30s. A request that times out
	// breaks its connection, and Do tries the next broker. It also bounds
	// the KIP-219 throttle the client honours: a connection a broker
	// throttles for longer is closed and dialed again on its next request,
	// and a request that got no answer within twice RequestTimeout (held
	// behind a throttle, then written) is given up on that connection and
	// tried on the next broker, so one huge throttle_time_ms cannot freeze
	// metadata.
	RequestTimeout time.Duration
	// DialTimeoutMax caps the setup timeout of a broker whose last setups
	// failed: each consecutive failure doubles DialTimeout for the next
	// attempt, with ±20% jitter, up to DialTimeoutMax; a success starts
	// again from DialTimeout (socket.connection.setup.timeout.max.ms).
	// Default (or below DialTimeout): DialTimeout, no growth.
	DialTimeoutMax time.Duration
	// ConnMaxIdle closes a connection that has had no request in flight
	// for that long (connections.max.idle.ms); the next request to its
	// broker dials again, and one that found the connection open as it
	// closed (never written to it) is sent on a new connection at once,
	// not counted as the broker's failure. Default 0 (or negative): never.
	ConnMaxIdle time.Duration
	// Dialer opens the network connection to a broker (for a proxy, your
	// own name resolution, or tests), with the address as given
	// ("host:port"). Default: a net.Dialer that resolves the host and tries
	// each address in turn until one connects, within the setup timeout
	// (the Java client's client.dns.lookup=use_all_dns_ips). A panic of it
	// is recovered and logged at Error, and fails that connection.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResolveCanonicalBootstrap makes each Bootstrap address, when it is
	// used, stand for the canonical names of the addresses its host
	// resolves to (each looked up in reverse; an address without a name
	// stays an address), with its port: the Java client's
	// client.dns.lookup=resolve_canonical_bootstrap_servers_only, for
	// Kerberos. The Dialer then gets those names. Default false: the
	// addresses as given.
	ResolveCanonicalBootstrap bool
	// SendBufferBytes and ReceiveBufferBytes, when positive, set each
	// connection's socket send and receive buffers (SO_SNDBUF, SO_RCVBUF;
	// send.buffer.bytes, receive.buffer.bytes), also under TLS, when the
	// connection is a TCP one. Default 0 (or negative): the operating
	// system's, which Linux tunes to each connection.
	SendBufferBytes, ReceiveBufferBytes int
	// TLS, if not nil, makes every connection use TLS. Certificates are
	// verified; a config without ServerName verifies each broker's
	// certificate against the host it is dialed by. Default nil:
	// plaintext.
	TLS *tls.Config
	// SASL, if not nil, authenticates every connection with this mechanism
	// (package sasl) and re-authenticates before the broker's session
	// ends (KIP-368). Default nil: no SASL.
	SASL sasl.Mechanism
	// OnThrottle, if set, is called each time a broker's response carries
	// a throttle time (a quota, KIP-219), with the broker's address and
	// the throttle. It runs on a connection's goroutine and must not
	// block. Default nil.
	OnThrottle func(addr string, d time.Duration)
	// OnRefresh, if set, is called on the refresh goroutine after each
	// Metadata request it sends, answered or failed, without a lock held.
	// It must not block. Default nil.
	OnRefresh func(Refresh)
	// MaxAge is how often the topics in use are all fetched again
	// (metadata.max.age.ms). Default 5m.
	MaxAge time.Duration
	// MaxIdle drops a topic that has not been Wanted or Touched for that
	// long from the fetches and from the snapshot (metadata.max.idle.ms).
	// Default 5m.
	MaxIdle time.Duration
	// RetryBackoff and RetryBackoffMax bound the exponential backoff with
	// ±20% jitter (KIP-580) between fetches after a failure, and the rate
	// of Trigger. Defaults 100ms and 1s (retry.backoff.ms,
	// retry.backoff.max.ms). Topics that are not usable yet retry faster
	// at first: 10ms, doubled per attempt, up to RetryBackoffMax.
	RetryBackoff, RetryBackoffMax time.Duration
	// Logger receives refresh and connection events. Default:
	// slog.Default() (the logger set when a line is logged) at Warn and
	// above only; silence it with slog.New(slog.DiscardHandler). A failed
	// fetch, and a broken connection, is logged at Warn when it starts and
	// then at most once a minute (per broker, for connections) while it
	// lasts, at Debug in between.
	Logger *slog.Logger
	// DisableRebootstrap makes the bootstrap addresses serve only until
	// the first answer: from then on only the brokers that answers list
	// are asked, even when none of them can be reached (Java's
	// metadata.recovery.strategy=none). Default false: rebootstrap (Java
	// 4.x's default, KIP-899 and KIP-1102): a fetch that reaches none of
	// the known brokers goes on to the bootstrap addresses, resolved
	// again (the cluster may have moved behind the same names), and so
	// does every fetch while RebootstrapTrigger has passed without an
	// answer, and the fetch after an answer with REBOOTSTRAP_REQUIRED
	// (Metadata v13), at once.
	DisableRebootstrap bool
	// RebootstrapTrigger is how long fetches may go without an answer
	// from the known brokers before the bootstrap addresses are asked
	// instead, even if a known broker still accepts connections (it
	// bounds a fetch waiting for one) (Java's
	// metadata.recovery.rebootstrap.trigger.ms). Default 5m; a negative
	// value means as soon as a fetch got no answer (the next one asks the
	// bootstrap addresses). Unused with DisableRebootstrap.
	RebootstrapTrigger time.Duration
	// DisableClusterCheck stops sending the expected cluster and node in
	// ApiVersions v5 (KIP-1242) when dialing a known broker (Java's
	// metadata.cluster.check.enable=false). By default a broker of Kafka
	// 4.4 or later that is not that node of the client's cluster answers
	// REBOOTSTRAP_REQUIRED and the connection is closed (an error
	// wrapping ErrClusterMismatch). Metadata answers are checked either
	// way: one that names another cluster id than the first answer is
	// never applied.
	DisableClusterCheck bool
	// AllowAutoTopicCreation sets the flag of the same name in every
	// Metadata request: a broker with auto.create.topics.enable=true then
	// creates the wanted topics that do not exist (the Java producer's
	// allow.auto.create.topics). Default false. Brokers before Metadata v4
	// (Kafka 0.11) always auto-create when their own setting says so.
	AllowAutoTopicCreation bool
}

// Pending describes the refresh goroutine's Metadata request while it
// waits for a broker (Client.Pending).
type Pending struct {
	// Addr is the broker's address.
	Addr string
	// Since is when the request started at this broker: its connection
	// was dialed then, or the request written on the open one.
	Since time.Time
	// Connecting is set while the connection to Addr is still being set
	// up (the connect, TLS, ApiVersions, SASL) and the Metadata request
	// not yet written.
	Connecting bool
}

// Refresh describes one Metadata request of the refresh goroutine, for
// Config.OnRefresh.
type Refresh struct {
	// Addr is the broker that answered ("" when none did).
	Addr string
	// Topics and Brokers count the topics and brokers in the answer.
	Topics, Brokers int
	// Latency is the time the request took, connecting included.
	Latency time.Duration
	// Err is nil when the answer was applied.
	Err error
}

func (cfg *Config) validate() error {
	if len(cfg.Bootstrap) == 0 {
		return fmt.Errorf("%w: Bootstrap is empty", ErrInvalidConfig)
	}
	for _, a := range cfg.Bootstrap {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: Bootstrap address %q: %v", ErrInvalidConfig, a, err)
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"MaxAge", cfg.MaxAge}, {"MaxIdle", cfg.MaxIdle}, {"RetryBackoff", cfg.RetryBackoff}, {"RetryBackoffMax", cfg.RetryBackoffMax}} {
		if f.d < 0 {
			return fmt.Errorf("%w: %s is negative (%v)", ErrInvalidConfig, f.name, f.d)
		}
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 5 * time.Minute
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = 5 * time.Minute
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = time.Second
	}
	if cfg.RebootstrapTrigger == 0 {
		cfg.RebootstrapTrigger = defaultRebootstrapTrigger
	}
	if cfg.RetryBackoffMax < cfg.RetryBackoff {
		return fmt.Errorf("%w: RetryBackoffMax %v is below RetryBackoff %v", ErrInvalidConfig, cfg.RetryBackoffMax, cfg.RetryBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = logging.Default()
	}
	return nil
}

// connConfig is the configuration of every connection the client opens.
func (cfg *Config) connConfig() conn.Config {
	return conn.Config{
		ClientID:       cfg.ClientID,
		DialTimeout:    cfg.DialTimeout,
		RequestTimeout: cfg.RequestTimeout,
		DialTimeoutMax: cfg.DialTimeoutMax,
		MaxIdle:        max(cfg.ConnMaxIdle, 0),
		Setups:         &conn.SetupTimeouts{},
		Dialer:         cfg.Dialer,
		Logger:         cfg.Logger,
		OnThrottle:     cfg.OnThrottle,
		TLS:            cfg.TLS,
		SASL:           cfg.SASL,

		SendBufferBytes:    cfg.SendBufferBytes,
		ReceiveBufferBytes: cfg.ReceiveBufferBytes,
	}
}

// use marks a wanted topic as used; Want and Touch set it, the refresh
// goroutine reads and clears it.
type use struct {
	used  atomic.Bool
	since time.Time // when Want first asked for the topic
}

// topicState is the refresh goroutine's view of a wanted topic.
type topicState struct {
	use         *use
	firstWanted time.Time
	lastUsed    time.Time
	attempts    int // fetches that did not return it usable
	stale       int // consecutive retriable errors while usable
	broken      int // consecutive answers with broken partition ids
	// waitBase is the first retry delay the topic asks of the shared
	// schedule while it waits for metadata (not usable yet, or a stale or
	// broken answer kept the old one); 0 while it does not wait.
	waitBase time.Duration
	// retired are the topic ids the topic had before it was recreated,
	// newest last, at most maxRetiredIDs. Kafka never reuses a topic id,
	// so an answer naming one is a lagging broker's (retiredAnswer).
	retired [][16]byte
	// id is the last non-zero topic id taken from an answer (an answer
	// without one, or with a topic error, keeps it).
	id [16]byte
}

// maxRetiredIDs bounds topicState.retired: a topic recreated more often
// than that while wanted forgets its oldest ids.
const maxRetiredIDs = 8

// retiredAnswer reports whether fresh names an id st's topic has retired:
// a broker that has not seen the recreation yet (after an idle close or a
// rolling restart the metadata connection may move to one). It is stale
// however often it comes: taking it would fail the records made for the
// current topic as if the topic had been recreated again.
func (st *topicState) retiredAnswer(fresh *Topic) bool {
	return fresh.ID != ([16]byte{}) && slices.Contains(st.retired, fresh.ID)
}

// uuidString formats a topic id as Kafka does (base64, URL alphabet,
// unpadded).
func uuidString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// retire remembers id as one the topic no longer has.
func (st *topicState) retire(id [16]byte) {
	if id == ([16]byte{}) || slices.Contains(st.retired, id) {
		return
	}
	if len(st.retired) == maxRetiredIDs {
		st.retired = slices.Delete(st.retired, 0, 1)
	}
	st.retired = append(st.retired, id)
}

// Client keeps the cluster metadata of the topics in use. It is safe for
// concurrent use. It owns one refresh goroutine and the connections it uses
// for Metadata (and for Do); Close ends both.
type Client struct {
	cfg     Config
	connCfg conn.Config
	// logRepeat rates the Warn of failed fetches.
	logRepeat logging.Repeat

	snap   atomic.Pointer[Snapshot]
	err    atomic.Pointer[error]           // why the last fetch failed; nil after a success
	wanted atomic.Pointer[map[string]*use] // copy on write, under wantMu
	wantMu sync.Mutex

	wake    chan struct{} // 1-buffered
	updates chan struct{} // 1-buffered
	trigger atomic.Bool

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup

	connMu sync.Mutex
	conns  map[string]*conn.Conn // by connKey
	// verified holds, by connKey, the connection known to reach the
	// client's cluster: its Metadata answer passed checkCluster. Once
	// the cluster id is known, Do and DoController use only those and
	// connections the broker identified itself on (ApiVersions v5).
	verified map[string]*conn.Conn
	lastGood string
	closed   bool
	// rebootstrap makes the next request skip the known brokers
	// (REBOOTSTRAP_REQUIRED, RebootstrapTrigger, Rebootstrap).
	rebootstrap bool

	// cluster is the cluster id of the first applied answer that had
	// one, as the broker sent it; nil before. Metadata answers for
	// another id are refused, and dials to known brokers expect it
	// (ApiVersions v5).
	cluster atomic.Pointer[string]

	// Owned by the refresh goroutine.
	topics    map[string]*topicState
	lastFull  time.Time
	lastFetch time.Time
	failures  int       // consecutive fetches that reached no broker
	retryAt   time.Time // after a failure: no fetch before this
	badHosts  int       // consecutive answers that listed a broker with an invalid host
	// attemptStart is when fetches started going without an answer
	// (zero after an answer): RebootstrapTrigger counts from it.
	attemptStart time.Time
	// The one retry schedule of every topic waiting for metadata
	// (topicState.waitBase > 0): each fetch asks for all of them, so
	// the rate of Metadata requests does not grow with their number.
	waitNext     time.Time // when they are asked for again; zero: none waits
	waitAttempts int       // fetches of them in a row that brought no topic out of waiting
	waitFetch    time.Time // the last fetch that asked for them

	// pending is the refresh goroutine's Metadata request outstanding at
	// a broker, for Pending; nil while none is.
	pending atomic.Pointer[Pending]
}

// New validates cfg and starts the refresh goroutine. It does no network
// I/O: the first fetch happens when a topic is wanted (or on Do).
func New(cfg Config) (*Client, error) {
	cfg.Bootstrap = append([]string(nil), cfg.Bootstrap...)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		connCfg: cfg.connConfig(),
		wake:    make(chan struct{}, 1),
		updates: make(chan struct{}, 1),
		conns:   map[string]*conn.Conn{},

		verified: map[string]*conn.Conn{},
		topics:   map[string]*topicState{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.snap.Store(emptySnapshot)
	empty := map[string]*use{}
	c.wanted.Store(&empty)
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// Snapshot returns the current snapshot; never nil (empty before the first
// fetch). It is one atomic load.
func (c *Client) Snapshot() *Snapshot { return c.snap.Load() }

// Updates receives after each published snapshot, and after each fetch
// that failed (Err then says why). It has a buffer of one and sends never
// block, so several updates may coalesce into one receive.
func (c *Client) Updates() <-chan struct{} { return c.updates }

// Err returns why the last metadata fetch failed, or nil if it succeeded
// (or none has run yet). The error names the broker addresses tried and
// what each did: a refused or timed-out dial, an unresolvable host, a
// failed ApiVersions handshake, a broken connection. It wraps ErrNoBroker
// when no broker answered. It is one atomic load.
func (c *Client) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Pending reports the refresh goroutine's Metadata request that is waiting
// for a broker right now (ok false when none is): for a caller that gives
// up on metadata, it tells which broker has not answered and for how long,
// which Err cannot say until the request fails (up to twice
// RequestTimeout). It is one atomic load.
func (c *Client) Pending() (p Pending, ok bool) {
	if pp := c.pending.Load(); pp != nil {
		return *pp, true
	}
	return Pending{}, false
}

// Want asks for topic's metadata: the refresh goroutine fetches it at once
// and, while it is not usable, again with backoff. It never blocks; for a
// topic already wanted it does not allocate. It also counts as a Touch.
func (c *Client) Want(topic string) {
	if u := (*c.wanted.Load())[topic]; u != nil {
		if !u.used.Load() {
			u.used.Store(true)
		}
		// Re-check: the refresh goroutine may have just dropped it
		// as idle (it drops first, then looks at the flag).
		if (*c.wanted.Load())[topic] == u {
			return
		}
	}
	c.wantMu.Lock()
	m := *c.wanted.Load()
	if m[topic] != nil {
		c.wantMu.Unlock()
		return
	}
	next := make(map[string]*use, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	u := &use{since: time.Now()}
	u.used.Store(true)
	next[topic] = u
	c.wanted.Store(&next)
	c.wantMu.Unlock()
	c.kick()
}

// Touch marks topic as in use so that MaxIdle does not drop it. It never
// blocks nor allocates; it does nothing for a topic that is not wanted.
func (c *Client) Touch(topic string) {
	if u := (*c.wanted.Load())[topic]; u != nil && !u.used.Load() {
		u.used.Store(true)
	}
}

// Trigger asks for a refresh of every wanted topic soon, for example after
// NOT_LEADER_OR_FOLLOWER. It never blocks; calls coalesce, and refreshes
// are at least RetryBackoff apart.
func (c *Client) Trigger() {
	c.trigger.Store(true)
	c.kick()
}

func (c *Client) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close stops the refresh goroutine and closes the client's connections. It
// is idempotent and returns after the goroutine has exited.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.connMu.Lock()
		c.closed = true
		conns := c.conns
		c.conns = nil
		c.connMu.Unlock()
		for _, cn := range conns {
			_ = cn.Close()
		}
	})
	return nil
}

func (c *Client) loop() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		c.syncTopics(now)
		c.maybeFetch(now)
		if c.ctx.Err() != nil {
			return
		}
		d := time.Until(c.nextWake())
		timer.Reset(max(d, 0))
		select {
		case <-c.wake:
		case <-timer.C:
		case <-c.ctx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// syncTopics picks up new wanted topics, records use, and drops topics idle
// for MaxIdle.
func (c *Client) syncTopics(now time.Time) {
	wanted := *c.wanted.Load()
	for name, u := range wanted {
		st := c.topics[name]
		if st == nil || st.use != u {
			st = &topicState{use: u, firstWanted: u.since, lastUsed: now}
			c.topics[name] = st
			c.joinWaiting(st, now)
		}
		if u.used.Load() {
			u.used.Store(false)
			st.lastUsed = now
		}
	}
	var idle []string
	for name, st := range c.topics {
		if wanted[name] != st.use {
			delete(c.topics, name) // replaced or gone
			continue
		}
		if now.Sub(st.lastUsed) >= c.cfg.MaxIdle {
			idle = append(idle, name)
		}
	}
	if len(idle) == 0 {
		return
	}
	c.wantMu.Lock()
	m := *c.wanted.Load()
	next := make(map[string]*use, len(m))
	for k, v := range m {
		next[k] = v
	}
	for _, name := range idle {
		delete(next, name)
	}
	c.wanted.Store(&next)
	// A Want or Touch racing with the drop set the flag before it looked
	// at the map again: keep those topics.
	var kept, dropped []string
	for _, name := range idle {
		if m[name].used.Load() {
			kept = append(kept, name)
		} else {
			dropped = append(dropped, name)
			delete(c.topics, name)
		}
	}
	if len(kept) > 0 {
		restored := make(map[string]*use, len(next)+len(kept))
		for k, v := range next {
			restored[k] = v
		}
		for _, name := range kept {
			u := m[name]
			u.used.Store(false)
			restored[name] = u
			c.topics[name].lastUsed = now
		}
		c.wanted.Store(&restored)
	}
	c.wantMu.Unlock()
	if len(dropped) == 0 {
		return
	}
	c.cfg.Logger.Debug("dropping idle topics from metadata", "topics", dropped, "max_idle", c.cfg.MaxIdle)
	old := c.snap.Load()
	s := *old
	s.Topics = make(map[string]*Topic, len(old.Topics))
	for k, v := range old.Topics {
		s.Topics[k] = v
	}
	for _, name := range dropped {
		delete(s.Topics, name)
	}
	c.publish(&s, now)
}

// nextWake is when the loop must run again without being woken.
func (c *Client) nextWake() time.Time {
	next := time.Now().Add(c.cfg.MaxAge)
	if len(c.topics) > 0 && !c.lastFull.IsZero() {
		next = c.lastFull.Add(c.cfg.MaxAge)
	}
	if !c.waitNext.IsZero() && c.waitNext.Before(next) {
		next = c.waitNext
	}
	for _, st := range c.topics {
		if idle := st.lastUsed.Add(c.cfg.MaxIdle); idle.Before(next) {
			next = idle
		}
	}
	if c.trigger.Load() && len(c.topics) > 0 {
		if t := c.lastFetch.Add(c.cfg.RetryBackoff); t.Before(next) {
			next = t
		}
	}
	if next.Before(c.retryAt) {
		next = c.retryAt
	}
	return next
}

// maybeFetch fetches the topics that are due: all of them when MaxAge has
// passed or a Trigger is due, else, when their shared retry is due, every
// topic waiting for metadata.
func (c *Client) maybeFetch(now time.Time) {
	if len(c.topics) == 0 {
		// Nothing to fetch: a Trigger (or Rebootstrap) is moot, and
		// kept it would make nextWake spin. A topic wanted later is
		// fetched at once anyway (joinWaiting); a rebootstrap asked
		// for still applies to that fetch.
		c.trigger.Store(false)
		return
	}
	if now.Before(c.retryAt) {
		return
	}
	full := now.Sub(c.lastFull) >= c.cfg.MaxAge ||
		(c.trigger.Load() && now.Sub(c.lastFetch) >= c.cfg.RetryBackoff)
	var names []string
	if full {
		names = sortedNames(c.topics)
	} else {
		if c.waitNext.IsZero() || now.Before(c.waitNext) {
			return
		}
		for _, name := range sortedNames(c.topics) {
			if c.topics[name].waitBase > 0 {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			c.waitNext, c.waitAttempts = time.Time{}, 0 // the waiting topics were dropped as idle
			return
		}
	}
	if full {
		c.trigger.Store(false)
	}
	start := time.Now()
	resp, again, err := c.fetch(names, start)
	if again && c.ctx.Err() == nil {
		// KIP-1102: the broker says our view is stale: ask the
		// bootstrap addresses at once, not after a backoff.
		resp, _, err = c.fetch(names, time.Now())
	}
	now = time.Now()
	c.lastFetch = now
	if c.cfg.OnRefresh != nil && c.ctx.Err() == nil {
		r := Refresh{Latency: now.Sub(start), Err: err}
		if err == nil {
			r.Topics, r.Brokers = len(resp.Topics), len(resp.Brokers)
			c.connMu.Lock()
			r.Addr = c.lastGood
			c.connMu.Unlock()
		}
		defer c.cfg.OnRefresh(r) // after the answer is applied
	}
	if err != nil {
		if c.ctx.Err() != nil {
			return
		}
		c.failures++
		wait := conn.Backoff(c.failures-1, c.cfg.RetryBackoff, c.cfg.RetryBackoffMax)
		c.retryAt = now.Add(wait)
		if full {
			c.trigger.Store(true) // still owed
		}
		c.err.Store(&err)
		// At Warn when the outage starts and once a minute while it
		// lasts (Err keeps the cause for whoever fails a record over
		// it), at Debug in between.
		level := c.logRepeat.Level("fetch", now)
		c.cfg.Logger.Log(context.Background(), level, "metadata fetch failed", "topics", names, "err", err, "retry_in", wait, "failures", c.failures)
		c.notify()
		return
	}
	c.logRepeat.Reset("rebootstrap") // the next one is news
	c.logRepeat.Reset("rebootstrap trigger")
	if c.failures > 0 {
		c.logRepeat.Reset("fetch")
		c.cfg.Logger.Info("metadata fetch succeeded again", "failures", c.failures)
	}
	c.failures, c.retryAt = 0, time.Time{}
	c.attemptStart = time.Time{}
	c.err.Store(nil)
	if full {
		c.lastFull = now
	}
	c.apply(resp, names, now)
}

// apply merges a Metadata response for names into a new snapshot.
func (c *Client) apply(resp *kmsg.MetadataResponse, names []string, now time.Time) {
	old := c.snap.Load()
	s := &Snapshot{
		Brokers:      make(map[int32]Broker, len(resp.Brokers)),
		Topics:       make(map[string]*Topic, len(c.topics)),
		ControllerID: resp.ControllerID,
		At:           now,
	}
	// What the broker names reaches logs and errors: the cluster id and
	// racks bounded and cleaned (conn.BrokerText), a broker whose host
	// cannot be one left out (conn.CheckHost), as a broker missing from
	// the answer is.
	if resp.ClusterID != nil {
		s.ClusterID = conn.BrokerText(c.cfg.SASL, *resp.ClusterID)
		if c.cluster.Load() == nil && *resp.ClusterID != "" {
			if id := *resp.ClusterID; validClusterID(id) {
				c.cluster.Store(&id) // checkCluster refuses others from now on
				c.cfg.Logger.Info("cluster id", "cluster_id", id)
			} else {
				c.logRare("bad cluster id", slog.LevelWarn, "the cluster id of a Metadata answer is not one (over 64 bytes, or not printable): not kept, answers are not checked against it", "cluster_id", s.ClusterID)
			}
		}
	}
	var badHost error
	for _, b := range resp.Brokers {
		if err := conn.CheckHost(b.Host); err != nil {
			badHost = fmt.Errorf("broker %d: %w", b.NodeID, err)
			continue
		}
		br := Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = conn.BrokerText(c.cfg.SASL, *b.Rack)
		}
		s.Brokers[b.NodeID] = br
	}
	if badHost == nil {
		c.badHosts = 0
	} else {
		c.badHosts++
		level := slog.LevelDebug
		if c.badHosts == 1 {
			level = slog.LevelWarn
		}
		c.cfg.Logger.Log(context.Background(), level, "ignoring a broker with an invalid host in a Metadata answer", "err", badHost, "answers", c.badHosts)
	}
	if len(s.Brokers) == 0 {
		s.Brokers = old.Brokers // a broker that lists nobody is not believed
	}
	for name, t := range old.Topics {
		if c.topics[name] != nil {
			s.Topics[name] = t
		}
	}
	got := make(map[string]*kmsg.MetadataResponseTopic, len(resp.Topics))
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.Topic != nil {
			got[*t.Topic] = t
		}
	}
	progress := false // a topic stopped waiting
	for _, name := range names {
		st := c.topics[name]
		if st == nil {
			continue
		}
		waited := st.waitBase > 0
		var fresh *Topic
		old := s.Topics[name]
		if rt := got[name]; rt != nil {
			var broken error
			fresh, broken = topicFromResponse(rt)
			if broken != nil {
				st.broken++
				level := slog.LevelDebug
				if st.broken == 1 {
					level = slog.LevelWarn
				}
				c.cfg.Logger.Log(context.Background(), level, "ignoring a broken topic in a Metadata answer", "topic", name, "err", broken, "answers", st.broken)
				if old != nil {
					// Keep what we had; ask again with backoff.
					st.waitBase = c.cfg.RetryBackoff
					continue
				}
				fresh = &Topic{ID: rt.TopicID, Err: kerr.LeaderNotAvailable.WithMessage(broken.Error())}
			} else {
				st.broken = 0
			}
		} else {
			fresh = &Topic{Name: name, Err: kerr.UnknownTopicOrPartition.WithMessage("the broker's Metadata response did not list the topic")}
		}
		fresh.Name = name
		var t *Topic
		var taken bool
		if st.retiredAnswer(fresh) {
			// A lagging broker's answer about the topic before its
			// recreation: keep ours, whatever the count of stale
			// answers, and ask again soon (another broker, or this one
			// once it catches up).
			if st.stale == 0 {
				c.cfg.Logger.Info("ignoring a Metadata answer naming a retired topic id (a broker lagging behind the topic's recreation)",
					"topic", name, "id", uuidString(fresh.ID))
			}
			st.stale++
			st.waitBase = newTopicBackoff
			continue
		} else if st.stale+1 >= staleAnswersAccepted {
			t, taken = fresh, true
		} else {
			t, taken = mergeTopic(old, fresh)
		}
		if !taken {
			st.stale++
			st.waitBase = newTopicBackoff
			continue
		}
		st.stale = 0
		if t.ID != ([16]byte{}) {
			if st.id != ([16]byte{}) && st.id != t.ID {
				st.retire(st.id) // recreated: the old id never comes back
			}
			st.id = t.ID
		}
		if t.Usable() {
			st.attempts = 0
			st.waitBase = 0
			progress = progress || waited
		} else {
			st.attempts++
			st.waitBase = newTopicBackoff
			if t.Err != nil && !kerr.IsRetriable(t.Err) {
				// Authorization and invalid names do not fix
				// themselves quickly.
				st.waitBase = c.cfg.RetryBackoffMax
			}
			if st.attempts == 1 || st.attempts%10 == 0 {
				c.cfg.Logger.Info("topic metadata not usable yet", "topic", name, "err", t.Err, "attempts", st.attempts)
			}
		}
		t.FirstWanted, t.Attempts = st.firstWanted, st.attempts
		s.Topics[name] = t
	}
	c.scheduleWaiting(names, progress, now)
	c.publish(s, now)
}

// joinWaiting adds a topic just wanted to the topics waiting for metadata.
// When none waited, it is fetched at once and the shared backoff starts
// over. Otherwise it is fetched with them, at their next fetch, brought
// forward to RetryBackoff after their last one: topics wanted one after
// another while others stay missing cost at most a request per
// RetryBackoff (as Java's metadata backoff: every update waits for it),
// and a burst of new topics costs one.
func (c *Client) joinWaiting(st *topicState, now time.Time) {
	st.waitBase = newTopicBackoff
	if c.waitNext.IsZero() {
		c.waitNext, c.waitAttempts = now, 0
		return
	}
	if at := c.waitFetch.Add(c.cfg.RetryBackoff); at.Before(c.waitNext) {
		c.waitNext = at // in the past: at once
	}
}

// scheduleWaiting sets the shared retry of the topics still waiting for
// metadata after a fetch of names (which held all of them): exponential
// backoff with jitter from the smallest first delay they ask for (10ms for
// a topic not usable yet, RetryBackoff after a broken answer,
// RetryBackoffMax after a non-retriable error) up to RetryBackoffMax,
// starting over when a topic stopped waiting (progress: others may follow,
// as topics being created do).
func (c *Client) scheduleWaiting(names []string, progress bool, now time.Time) {
	c.waitFetch = now
	var base time.Duration
	for _, name := range names {
		if st := c.topics[name]; st != nil && st.waitBase > 0 && (base == 0 || st.waitBase < base) {
			base = st.waitBase
		}
	}
	if base == 0 {
		c.waitNext, c.waitAttempts = time.Time{}, 0
		return
	}
	if progress {
		c.waitAttempts = 0
	}
	c.waitAttempts++
	c.waitNext = now.Add(conn.Backoff(c.waitAttempts-1, base, c.cfg.RetryBackoffMax))
}

func (c *Client) publish(s *Snapshot, now time.Time) {
	s.At = now
	c.snap.Store(s)
	c.notify()
}

func (c *Client) notify() {
	select {
	case c.updates <- struct{}{}:
	default:
	}
}

// fetch sends one Metadata request for names to some broker; now is when
// it starts (RebootstrapTrigger counts from the first fetch without an
// answer). again is set when the answer itself was REBOOTSTRAP_REQUIRED
// and rebootstrap is on: the caller fetches again at once. A failure that
// merely wraps that code (a dial refused by ApiVersions v5, KIP-1242) is
// not such an answer: it waits for the backoff.
func (c *Client) fetch(names []string, now time.Time) (resp *kmsg.MetadataResponse, again bool, err error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = c.cfg.AllowAutoTopicCreation
	req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(names))
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	opts := &doOpts{check: c.checkCluster}
	if !c.cfg.DisableRebootstrap {
		// KIP-1102: fetches that got no answer for RebootstrapTrigger
		// go to the bootstrap addresses, and the known brokers may
		// hold one fetch only until then.
		first := c.attemptStart.IsZero()
		if first {
			c.attemptStart = now
		}
		trigger := max(c.cfg.RebootstrapTrigger, 0)
		if !first && now.Sub(c.attemptStart) > trigger {
			c.logRare("rebootstrap trigger", slog.LevelInfo, "no metadata from the known brokers for metadata.recovery.rebootstrap.trigger.ms: rebootstrapping", "since", c.attemptStart, "trigger", c.cfg.RebootstrapTrigger, "bootstrap", c.cfg.Bootstrap)
			c.connMu.Lock()
			c.rebootstrap = true
			c.connMu.Unlock()
			c.attemptStart = now
		}
		if trigger > 0 {
			opts.knownUntil = c.attemptStart.Add(trigger)
		}
	}
	r, err := c.do(c.ctx, req, -1, false, &c.pending, opts)
	c.pending.Store(nil)
	if err != nil {
		return nil, false, err
	}
	mr := r.(*kmsg.MetadataResponse)
	if err := kerr.ForCode(mr.ErrorCode); err != nil {
		// Metadata v13+ (KIP-1102): REBOOTSTRAP_REQUIRED means our
		// view of the cluster is too old; start again from Bootstrap
		// (maybeFetch does at once), unless rebootstrap is off.
		again = mr.ErrorCode == kerr.RebootstrapRequired.Code && !c.cfg.DisableRebootstrap
		c.connMu.Lock()
		c.lastGood = ""
		// Or-ed: a Rebootstrap of the IO goroutine meanwhile stays.
		c.rebootstrap = c.rebootstrap || again
		c.connMu.Unlock()
		return nil, again, fmt.Errorf("metadata: Metadata response: %w", err)
	}
	return mr, false, nil
}

// checkCluster refuses a Metadata answer from addr for another cluster
// than the one of the first answer applied (doOpts.check).
func (c *Client) checkCluster(addr string, resp kmsg.Response) error {
	mr, ok := resp.(*kmsg.MetadataResponse)
	want := c.cluster.Load()
	if !ok || want == nil || (mr.ClusterID != nil && *mr.ClusterID == *want) {
		return nil
	}
	if mr.ClusterID == nil {
		if mr.ErrorCode != 0 {
			// A top-level error (REBOOTSTRAP_REQUIRED): the
			// answer is not applied; fetch reads its code.
			return nil
		}
		// Every broker of a cluster that has an id sends it (Metadata
		// v2+, Kafka 0.10.1+): one that does not is not of ours, or
		// cannot say which cluster it is of.
		return fmt.Errorf("metadata: %s: %w: it names no cluster id, this client's cluster is %q (the answer is not used; restart the producer to move to another cluster)",
			addr, ErrClusterMismatch, *want)
	}
	return fmt.Errorf("metadata: %s: %w: it answers for cluster %q, this client's cluster is %q (the answer is not used; restart the producer to move to another cluster)",
		addr, ErrClusterMismatch, conn.BrokerText(c.cfg.SASL, *mr.ClusterID), *want)
}

// maxClusterIDLen bounds the cluster id the client keeps (Kafka's are 22
// characters: a base64 UUID).
const maxClusterIDLen = 64

// validClusterID reports whether id can be kept as the client's cluster
// id: it is sent in every ApiVersions v5 and returned by ClusterID, so it
// is short (at most maxClusterIDLen bytes) and printable ASCII without
// spaces (invariant 13).
func validClusterID(id string) bool {
	if id == "" || len(id) > maxClusterIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// ClusterID returns the cluster id of the first Metadata answer the client
// applied ("" before one, or when the brokers send none: Kafka before
// 0.10.1; also "" when that id is over 64 bytes or not printable ASCII:
// it is then not kept, and answers are not checked against it). Once it
// is set, an answer that names no cluster id is refused too. Answers that name another id are refused from then on
// (ErrClusterMismatch). It is one atomic load.
func (c *Client) ClusterID() string {
	if p := c.cluster.Load(); p != nil {
		return *p
	}
	return ""
}

// Rebootstrap makes the next fetch skip the known brokers and ask the
// bootstrap addresses, soon (as Trigger), for a caller that found a known
// broker's address leading elsewhere (ErrClusterMismatch). It does
// nothing more than Trigger with Config.DisableRebootstrap. It never
// blocks.
func (c *Client) Rebootstrap() {
	if !c.cfg.DisableRebootstrap {
		c.connMu.Lock()
		c.rebootstrap = true
		c.connMu.Unlock()
	}
	c.Trigger()
}

// expect is the identity a dial to addr checks (ApiVersions v5): the
// client's cluster and the node the last snapshot lists at addr; none for
// an address no known broker has, or before an answer, or with
// DisableClusterCheck.
func (c *Client) expect(addr string) conn.Identity {
	id := c.cluster.Load()
	if c.cfg.DisableClusterCheck || id == nil || *id == "" {
		return conn.Identity{}
	}
	for _, b := range c.Snapshot().Brokers {
		if b.Addr() == addr {
			return conn.Identity{ClusterID: *id, NodeID: b.NodeID}
		}
	}
	return conn.Identity{}
}

// doOpts are the refresh goroutine's options of do.
type doOpts struct {
	// check, when set, refuses an answer from addr: do then tries the
	// next address, as for a broken connection.
	check func(addr string, resp kmsg.Response) error
	// knownUntil, when not zero, is when do stops waiting for the
	// known brokers and goes on to the bootstrap addresses.
	knownUntil time.Time
}

// Do sends req to some reachable broker and returns its response: the
// broker used last if it is still connected, else the known brokers in
// random order, else the bootstrap addresses in random order. A request
// that fails because its connection broke is tried on the next broker, so
// use Do only for requests that are safe to repeat (Metadata,
// InitProducerId, CreateTopics). Kafka errors inside the response are the
// caller's to read. Once the cluster id is known (ClusterID), req is
// written only on a connection known to reach that cluster: the broker
// identified itself (ApiVersions v5), or its Metadata answer on that
// connection named the cluster (Do sends one for no topic first when
// needed); another cluster's broker is skipped, its error wrapping
// ErrClusterMismatch. It returns ctx.Err() when ctx ends, ErrClosed after
// Close, and an error wrapping ErrNoBroker when no broker answered.
func (c *Client) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, stop := c.joinCtx(ctx)
	defer stop()
	return c.do(ctx, req, -1, false, nil, nil)
}

// DoPrefer is Do, sent first to broker node when the snapshot knows it
// (a Fetch or ListOffsets for a partition goes to its leader), and to the
// other brokers as Do tries them if that one cannot be reached. A broker
// that is not the partition's leader answers NOT_LEADER_OR_FOLLOWER: the
// caller refreshes and asks again.
func (c *Client) DoPrefer(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	ctx, stop := c.joinCtx(ctx)
	defer stop()
	return c.do(ctx, req, node, false, nil, nil)
}

// DoController is Do, sent to the controller of the last snapshot when it
// is known (for CreateTopics; with KRaft any broker forwards to the
// controller), else to any broker. It uses connections of its own, apart
// from the ones Metadata and Do use: a broker enforcing a KIP-599 mutation
// quota answers a throttled CreateTopics and then mutes that connection for
// the throttle time (KIP-219), which would hold a Metadata request written
// behind it past its request timeout.
func (c *Client) DoController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, stop := c.joinCtx(ctx)
	defer stop()
	return c.do(ctx, req, c.Snapshot().ControllerID, true, nil, nil)
}

// connKey is the key of addr's connection in Client.conns: the address, or
// for the admin connections of DoController, the address behind a prefix no
// address has. A bootstrap address's connection (boot) has a prefix of its
// own: it is dialed as no known node (Java gives bootstrap nodes negative
// ids), without an identity to check (ApiVersions v5), even when a known
// broker has the same address, and a rebootstrap dials it again.
func connKey(addr string, admin, boot bool) string {
	if boot {
		addr = "boot\x00" + addr
	}
	if admin {
		return "admin\x00" + addr
	}
	return addr
}

// joinCtx returns ctx, also cancelled by Close.
func (c *Client) joinCtx(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// candidates lists the addresses to try, in order, each list without
// duplicates (a bootstrap address may be a known broker's too: it is then
// dialed again, as no known node):
// the known brokers (prefer's first, then the last that answered, then the
// rest in random order), then the bootstrap addresses in random order
// (before ResolveCanonicalBootstrap expands them). A rebootstrap leaves
// out the known brokers (rebootstrap is then true; only the refresh
// goroutine's fetches, refresh, rebootstrap); DisableRebootstrap leaves
// out the bootstrap addresses once an answer listed brokers.
func (c *Client) candidates(prefer int32, refresh bool) (known, boot []string, rebootstrap bool) {
	snap := c.Snapshot()
	c.connMu.Lock()
	skipKnown := refresh && c.rebootstrap
	if refresh {
		c.rebootstrap = false
	}
	lastGood := c.lastGood
	c.connMu.Unlock()
	seen := map[string]bool{}
	add := func(out []string, a string) []string {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
		return out
	}
	if skipKnown {
		c.logRare("rebootstrap", slog.LevelInfo, "rebootstrapping: asking the bootstrap addresses, not the known brokers", "bootstrap", c.cfg.Bootstrap)
	} else {
		if b, ok := snap.Brokers[prefer]; ok && prefer >= 0 {
			known = add(known, b.Addr())
		}
		for _, b := range snap.Brokers {
			if b.Addr() == lastGood {
				// A bootstrap address is no known broker: it
				// is asked as one (below), not first.
				known = add(known, lastGood)
				break
			}
		}
	}
	others := make([]string, 0, len(snap.Brokers))
	for _, b := range snap.Brokers {
		if !skipKnown {
			others = append(others, b.Addr())
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, a := range others {
		known = add(known, a)
	}
	if c.cfg.DisableRebootstrap && len(snap.Brokers) > 0 {
		return known, nil, false // metadata.recovery.strategy=none
	}
	shuffled := append([]string(nil), c.cfg.Bootstrap...)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	seen = map[string]bool{} // a bootstrap address is no known node, even at a known broker's address
	for _, a := range shuffled {
		boot = add(boot, a)
	}
	return known, boot, skipKnown
}

// rebootstrapConns closes every connection the client keeps, as Java's
// handleRebootstrap does: the known brokers' (the rebootstrap leaves them
// because they failed, went silent or said REBOOTSTRAP_REQUIRED) and the
// bootstrap addresses' (bootKey), which the rebootstrap dials again, so
// their names are resolved again (the name may lead elsewhere now).
func (c *Client) rebootstrapConns() {
	c.connMu.Lock()
	old := make([]*conn.Conn, 0, len(c.conns))
	for key, cn := range c.conns {
		delete(c.conns, key)
		delete(c.verified, key)
		old = append(old, cn)
	}
	c.lastGood = ""
	c.connMu.Unlock()
	for _, cn := range old {
		_ = cn.Close()
	}
}

// do sends req as Do does; pending, when not nil, follows the broker it is
// waiting for (Client.Pending).
func (c *Client) do(ctx context.Context, req kmsg.Request, prefer int32, admin bool, pending *atomic.Pointer[Pending], opts *doOpts) (kmsg.Response, error) {
	var errs []error
	known, boot, rebootstrap := c.candidates(prefer, opts != nil)
	var check func(string, kmsg.Response) error
	if opts != nil {
		check = opts.check
	}
	tried := map[string]bool{} // by connKey
	try := func(ctx context.Context, addr string, bootAddr bool) (kmsg.Response, bool, error) {
		key := connKey(addr, admin, bootAddr)
		if tried[key] {
			return nil, false, nil
		}
		tried[key] = true
		resp, done, err := c.tryAddr(ctx, req, addr, key, !bootAddr, pending, check)
		if !done && err != nil {
			errs = append(errs, err)
		}
		return resp, done, err
	}
	kctx := ctx // bounded by knownUntil for the known brokers
	if opts != nil && !opts.knownUntil.IsZero() && len(known) > 0 {
		var cancel context.CancelFunc
		kctx, cancel = context.WithDeadline(ctx, opts.knownUntil)
		defer cancel()
	}
	for _, addr := range known {
		if resp, done, err := try(kctx, addr, false); done {
			if err != nil && kctx.Err() != nil && ctx.Err() == nil {
				// KIP-1102: the rebootstrap trigger passed while
				// a known broker held the fetch.
				errs = append(errs, fmt.Errorf("metadata: %s: no answer before metadata.recovery.rebootstrap.trigger.ms (%v) passed: rebootstrapping", addr, c.cfg.RebootstrapTrigger))
				rebootstrap = true
				break
			}
			return resp, err
		}
	}
	if opts != nil && len(known) > 0 {
		rebootstrap = true // KIP-899: no known broker answered
	}
	if rebootstrap {
		c.rebootstrapConns()
	}
	for _, b := range boot {
		addrs := []string{b}
		if c.cfg.ResolveCanonicalBootstrap {
			var err error
			if addrs, err = conn.CanonicalAddrs(ctx, b); err != nil {
				if done, cerr := c.ended(ctx); done {
					return nil, cerr
				}
				errs = append(errs, fmt.Errorf("metadata: resolving bootstrap %s: %w", b, err))
				continue
			}
		}
		for _, addr := range addrs {
			if resp, done, err := try(ctx, addr, true); done {
				return resp, err
			}
		}
	}
	return nil, fmt.Errorf("%w: %w", ErrNoBroker, joinedErrs(errs))
}

// tryAddr sends req to addr (pending, when not nil, follows it: see do).
// done is true when do must return resp and err as they are: an answer, an
// error another broker would not do better with, or the end of ctx or of
// the client; otherwise err is why addr failed.
func (c *Client) tryAddr(ctx context.Context, req kmsg.Request, addr, key string, known bool, pending *atomic.Pointer[Pending], check func(string, kmsg.Response) error) (resp kmsg.Response, done bool, err error) {
	var at Pending
	if pending != nil {
		at = Pending{Addr: addr, Since: time.Now(), Connecting: true}
		pending.Store(&at)
	}
	cn, err := c.connTo(ctx, addr, key, known)
	if err == nil && pending != nil {
		written := at
		written.Connecting = false
		pending.Store(&written)
	}
	if err == nil {
		if until := cn.ThrottledUntil(); time.Until(until) > c.cfg.RequestTimeout {
			// A throttle longer than a request may wait (a
			// buggy broker's MaxInt32 ms): a fresh connection
			// rather than no metadata for days.
			c.cfg.Logger.Warn("broker throttles the connection for longer than RequestTimeout: reconnecting", "addr", addr, "throttled_until", until, "request_timeout", c.cfg.RequestTimeout)
			c.dropConn(addr, key, cn)
			cn, err = c.connTo(ctx, addr, key, known)
		}
	}
	if err == nil && check == nil {
		// Do, DoController: only a connection known to reach our
		// cluster carries their requests.
		if err = c.verify(ctx, addr, key, cn); err != nil {
			if errors.Is(err, ErrClusterMismatch) {
				c.logRare("refused "+addr, slog.LevelWarn, "broker refused", "addr", addr, "err", err)
			}
			if ctx.Err() == nil {
				c.dropConn(addr, key, cn)
			}
			if done, cerr := c.ended(ctx); done {
				return nil, true, cerr
			}
			return nil, false, err
		}
	}
	if err == nil {
		resp, err = c.attempt(ctx, cn, req)
		if errors.Is(err, conn.ErrIdleClosed) && errors.Is(err, conn.ErrNotSent) && ctx.Err() == nil {
			// Found open, then closed for ConnMaxIdle before the
			// request reached it: no failure of addr's; dial it
			// again at once, once.
			c.dropConn(addr, key, cn)
			var fresh *conn.Conn
			if fresh, err = c.connTo(ctx, addr, key, known); err == nil {
				cn = fresh
				if check == nil {
					// As the first connection was: Do and
					// DoController write only where verified.
					if err = c.verify(ctx, addr, key, cn); err != nil {
						if errors.Is(err, ErrClusterMismatch) {
							c.logRare("refused "+addr, slog.LevelWarn, "broker refused", "addr", addr, "err", err)
						}
						if ctx.Err() == nil {
							c.dropConn(addr, key, cn)
						}
						return nil, false, err
					}
				}
				resp, err = c.attempt(ctx, cn, req)
			}
		}
		if err == nil && check != nil {
			if err = check(addr, resp); err != nil {
				// Not our cluster: nothing more goes there.
				c.logRare("refused "+addr, slog.LevelWarn, "broker refused", "addr", addr, "err", err)
				c.dropConn(addr, key, cn)
				return nil, false, err
			}
			// Verified only by an answer that names our cluster: one
			// that names none (a top-level error, passed by
			// checkCluster for fetch to read) vouches for nothing.
			if mr, ok := resp.(*kmsg.MetadataResponse); ok && mr.ClusterID != nil {
				if want := c.cluster.Load(); want != nil && *mr.ClusterID == *want {
					c.connMu.Lock()
					if c.conns[key] == cn {
						c.verified[key] = cn
					}
					c.connMu.Unlock()
				}
			}
		}
		if err == nil {
			c.connMu.Lock()
			c.lastGood = addr
			c.connMu.Unlock()
			return resp, true, nil
		}
		if ctx.Err() == nil && cn.Err() == nil {
			// Not the connection's fault (a decode error,
			// an unsupported API): another broker would
			// not do better.
			return nil, true, err
		}
		if ctx.Err() == nil {
			c.dropConn(addr, key, cn)
		}
	}
	if done, cerr := c.ended(ctx); done {
		return nil, true, cerr
	}
	return nil, false, err
}

// logRare logs msg at level the first time for key and then at most once
// a minute (logging.RepeatEvery), at Debug in between (invariant 12: a
// condition that lasts, a refused broker or rebootstrapping at every
// fetch, does not flood the log).
func (c *Client) logRare(key string, level slog.Level, msg string, args ...any) {
	if c.logRepeat.Level(key, time.Now()) != slog.LevelWarn {
		level = slog.LevelDebug
	}
	c.cfg.Logger.Log(context.Background(), level, msg, args...)
}

// verify makes sure, once the cluster id is known, that cn (addr's
// connection under key) reaches the client's cluster before Do or
// DoController write a request on it: the broker identified itself
// (ApiVersions v5, Kafka 4.4+), or a Metadata answer on cn passed
// checkCluster, or verify asks for one now, for no topic (one round trip
// per connection, off the per-record path). It fails with an error
// wrapping ErrClusterMismatch when cn reaches another cluster, or with the
// request's error.
func (c *Client) verify(ctx context.Context, addr, key string, cn *conn.Conn) error {
	if c.cluster.Load() == nil || cn.Identified() {
		return nil
	}
	c.connMu.Lock()
	ok := c.verified[key] == cn
	c.connMu.Unlock()
	if ok {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil is all, v1+)
	resp, err := c.attempt(ctx, cn, req)
	if err != nil {
		return fmt.Errorf("metadata: %s: checking its cluster: %w", addr, err)
	}
	if mr := resp.(*kmsg.MetadataResponse); mr.ClusterID == nil {
		// checkCluster lets one with a top-level error pass (it is
		// not applied); this one would vouch for the connection.
		return fmt.Errorf("metadata: %s: %w: it names no cluster id (%v), this client's cluster is %q", addr, ErrClusterMismatch, kerr.ForCode(mr.ErrorCode), c.ClusterID())
	} else if err := c.checkCluster(addr, resp); err != nil {
		return err
	}
	c.connMu.Lock()
	if c.conns[key] == cn {
		c.verified[key] = cn
	}
	c.connMu.Unlock()
	return nil
}

// ended reports whether ctx or the client ended, with the error do returns
// then: ErrClosed after Close, else ctx's error.
func (c *Client) ended(ctx context.Context) (bool, error) {
	if cerr := ctx.Err(); cerr != nil {
		if c.ctx.Err() != nil {
			return true, ErrClosed
		}
		return true, cerr
	}
	return false, nil
}

// errNoAnswer is the error of an attempt that got no answer within twice
// RequestTimeout: the request waited behind a throttle that came after it.
var errNoAnswer = errors.New("no answer")

// attempt sends req on cn and waits for its answer, at most twice
// RequestTimeout: up to one RequestTimeout held behind a KIP-219 throttle
// that arrived after it was queued (do replaces connections throttled for
// longer), then the request's own timeout, which cn enforces once it is
// written. Past that, it fails with an error for which cn.Err is set (cn is
// closed), so that do tries the next broker.
func (c *Client) attempt(ctx context.Context, cn *conn.Conn, req kmsg.Request) (kmsg.Response, error) {
	actx, cancel := context.WithTimeout(ctx, 2*c.cfg.RequestTimeout)
	defer cancel()
	resp, err := cn.Do(actx, req)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		_ = cn.Close()
		return nil, fmt.Errorf("metadata: %s: %w within %v (throttled until %v)", cn.Addr(), errNoAnswer, 2*c.cfg.RequestTimeout, cn.ThrottledUntil().Format(time.RFC3339))
	}
	return resp, err
}

// joinedErrs is errors.Join on one line: the causes, "; "-separated.
type joinedErrs []error

func (e joinedErrs) Error() string {
	var b strings.Builder
	for i, err := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e joinedErrs) Unwrap() []error { return e }

// connTo returns the open connection to addr kept under key (connKey),
// dialing one if needed. The lock is not held while dialing.
func (c *Client) connTo(ctx context.Context, addr, key string, known bool) (*conn.Conn, error) {
	c.connMu.Lock()
	if c.closed {
		c.connMu.Unlock()
		return nil, ErrClosed
	}
	cn := c.conns[key]
	if cn != nil {
		select {
		case <-cn.Done():
			delete(c.conns, key)
		default:
			c.connMu.Unlock()
			return cn, nil
		}
	}
	c.connMu.Unlock()
	if cn != nil {
		// Broken: Close waits for its goroutines, which are ending, so
		// that none outlives the client's Close.
		_ = cn.Close()
	}

	cfg := c.connCfg
	if known {
		cfg.Expect = c.expect(addr) // KIP-1242
	}
	cn, err := conn.Dial(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	c.connMu.Lock()
	if c.closed {
		c.connMu.Unlock()
		_ = cn.Close()
		return nil, ErrClosed
	}
	other := c.conns[key]
	if other != nil && other.Err() == nil {
		c.connMu.Unlock()
		_ = cn.Close() // lost a dial race
		return other, nil
	}
	c.conns[key] = cn
	c.connMu.Unlock()
	if other != nil {
		_ = other.Close() // broken meanwhile
	}
	return cn, nil
}

func (c *Client) dropConn(addr, key string, cn *conn.Conn) {
	c.connMu.Lock()
	if c.conns[key] == cn {
		delete(c.conns, key)
	}
	if c.verified[key] == cn {
		delete(c.verified, key)
	}
	if c.lastGood == addr {
		c.lastGood = ""
	}
	c.connMu.Unlock()
	_ = cn.Close()
}
