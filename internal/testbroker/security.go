package testbroker

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// Security protocols of a [Listener], as Kafka names them.
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// SASL mechanisms the test broker serves.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
)

// Security configures TLS and SASL ([Config].Security). Without it every
// broker has one PLAINTEXT listener.
type Security struct {
	// Listeners are each broker's listeners: the first one is the port of
	// [Cluster.Addrs] (and of Config.BasePort); the others get ports of
	// their own, listed by [Cluster.ListenerAddrs]. Metadata advertises,
	// to each connection, the brokers' ports of the listener it came in
	// on, as Kafka does with listener names. Default: one PLAINTEXT
	// listener.
	Listeners []Listener
	// TLS is the server config of SSL and SASL_SSL listeners (see
	// [TestCA.ServerConfig]); required when one is configured.
	TLS *tls.Config
	// Users are the SASL credentials the brokers accept. For OAUTHBEARER,
	// Password is the bearer token and Name the principal it stands for.
	Users []User
	// Mechanisms are the mechanisms SaslHandshake accepts (default: every
	// mechanism of Users).
	Mechanisms []string
	// SessionLifetime, if > 0, is the session_lifetime_ms of every SASL
	// session (KIP-368, Kafka's connections.max.reauth.ms): a connection
	// that sends anything but SaslHandshake after it is closed, as Kafka
	// does, so clients must re-authenticate in time.
	SessionLifetime time.Duration
}

// Listener is one port of every broker.
type Listener struct {
	// Name names the listener for [Cluster.ListenerAddrs] (default: the
	// protocol).
	Name string
	// Protocol is Plaintext, SSL, SASLPlaintext or SASLSSL.
	Protocol string
	// BasePort, when not 0, makes broker i listen on BasePort+i (ignored
	// for the first listener, which uses Config.BasePort).
	BasePort int
}

// User is one SASL credential.
type User struct {
	Mechanism, Name, Password string
}

func (l Listener) tls() bool  { return l.Protocol == SSL || l.Protocol == SASLSSL }
func (l Listener) sasl() bool { return l.Protocol == SASLPlaintext || l.Protocol == SASLSSL }

// clusterSecurity is the cluster's validated security state.
type clusterSecurity struct {
	cfg        Security
	mechanisms []string
	scram      map[string]*scram.Server // by mechanism
	scramCreds map[string]map[string]scram.StoredCredentials
	plain      map[string]string // user → password
	tokens     map[string]string // token → principal

	auths, reauths, failures atomic.Int64
}

// initSecurity validates Config.Security; called by New before the brokers
// listen.
func (c *Cluster) initSecurity() error {
	s := c.cfg.Security
	if s == nil {
		return nil
	}
	cs := &clusterSecurity{cfg: *s, scram: map[string]*scram.Server{}, plain: map[string]string{}, tokens: map[string]string{}}
	if len(cs.cfg.Listeners) == 0 {
		cs.cfg.Listeners = []Listener{{Protocol: Plaintext}}
	}
	for i := range cs.cfg.Listeners {
		l := &cs.cfg.Listeners[i]
		switch l.Protocol {
		case Plaintext, SSL, SASLPlaintext, SASLSSL:
		default:
			return fmt.Errorf("%w: listener %d: unknown security protocol %q", ErrInvalidConfig, i, l.Protocol)
		}
		if l.Name == "" {
			l.Name = l.Protocol
		}
		if l.tls() && s.TLS == nil {
			return fmt.Errorf("%w: listener %s needs Security.TLS", ErrInvalidConfig, l.Name)
		}
	}
	scramCreds := map[string]map[string]scram.StoredCredentials{}
	seen := map[string]bool{}
	for _, u := range s.Users {
		switch u.Mechanism {
		case MechPlain:
			cs.plain[u.Name] = u.Password
		case MechOAuthBearer:
			cs.tokens[u.Password] = u.Name
		case MechScramSHA256, MechScramSHA512:
			hash := scram.SHA256
			if u.Mechanism == MechScramSHA512 {
				hash = scram.SHA512
			}
			cl, err := hash.NewClient(u.Name, u.Password, "")
			if err != nil {
				return fmt.Errorf("%w: user %q: %v", ErrInvalidConfig, u.Name, err)
			}
			if scramCreds[u.Mechanism] == nil {
				scramCreds[u.Mechanism] = map[string]scram.StoredCredentials{}
			}
			scramCreds[u.Mechanism][u.Name] = cl.GetStoredCredentials(scram.KeyFactors{Salt: "testbroker-" + u.Name, Iters: 4096})
		default:
			return fmt.Errorf("%w: user %q: unknown mechanism %q", ErrInvalidConfig, u.Name, u.Mechanism)
		}
		if !seen[u.Mechanism] {
			seen[u.Mechanism] = true
			cs.mechanisms = append(cs.mechanisms, u.Mechanism)
		}
	}
	cs.scramCreds = scramCreds
	for mech, creds := range scramCreds {
		hash := scram.SHA256
		if mech == MechScramSHA512 {
			hash = scram.SHA512
		}
		srv, err := hash.NewServer(func(user string) (scram.StoredCredentials, error) {
			if c, ok := creds[user]; ok {
				return c, nil
			}
			return scram.StoredCredentials{}, errors.New("unknown user")
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		cs.scram[mech] = srv
	}
	if len(s.Mechanisms) > 0 {
		cs.mechanisms = append([]string(nil), s.Mechanisms...)
	}
	c.sec = cs
	return nil
}

// ListenerAddrs returns the host:port of every broker's listener called
// name, indexed by broker id, or nil if there is no such listener.
func (c *Cluster) ListenerAddrs(name string) []string {
	if c.sec == nil {
		if name == Plaintext {
			return c.Addrs()
		}
		return nil
	}
	for i, l := range c.sec.cfg.Listeners {
		if l.Name != name {
			continue
		}
		if i == 0 {
			return c.Addrs()
		}
		addrs := make([]string, len(c.brokers))
		for j, b := range c.brokers {
			host, port := b.addrOn(i)
			addrs[j] = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		return addrs
	}
	return nil
}

// SecurityStats counts SASL exchanges.
type SecurityStats struct {
	// Authentications and Reauthentications count successful exchanges on
	// new connections and KIP-368 ones; Failures the rejected ones.
	Authentications, Reauthentications, Failures int64
}

// SecurityStats returns the SASL counters (zero without Config.Security).
func (c *Cluster) SecurityStats() SecurityStats {
	if c.sec == nil {
		return SecurityStats{}
	}
	return SecurityStats{c.sec.auths.Load(), c.sec.reauths.Load(), c.sec.failures.Load()}
}

// extraListener is a broker's listener beyond the first.
type extraListener struct {
	index int
	port  int32
	ln    net.Listener
}

// brokerListeners are a broker's listeners beyond the first.
type brokerListeners struct {
	mu    sync.Mutex
	extra []*extraListener
}

// listenExtra starts the broker's listeners beyond the first; called by
// listen. A restarted broker keeps their ports.
func (b *broker) listenExtra() error {
	if b.c.sec == nil {
		return nil
	}
	bl := &b.listeners
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for i := 1; i < len(b.c.sec.cfg.Listeners); i++ {
		if len(bl.extra) < i {
			port := int32(0)
			if bp := b.c.sec.cfg.Listeners[i].BasePort; bp != 0 {
				port = int32(bp) + b.id
			}
			bl.extra = append(bl.extra, &extraListener{index: i, port: port})
		}
		el := bl.extra[i-1]
		ln, err := listenTCP(b.host, int(el.port))
		if err != nil {
			return err
		}
		el.port = int32(ln.Addr().(*net.TCPAddr).Port)
		el.ln = b.wrapListener(i, ln)
		b.c.wg.Add(1)
		go b.accept(el.ln, el.index)
	}
	return nil
}

// stopExtra closes the listeners beyond the first; stop closes their
// connections with the others.
func (b *broker) stopExtra() {
	bl := &b.listeners
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, el := range bl.extra {
		if el.ln != nil {
			_ = el.ln.Close()
			el.ln = nil
		}
	}
}

// addrOn returns the broker's address on listener i.
func (b *broker) addrOn(i int) (string, int32) {
	if i == 0 {
		return b.addr()
	}
	bl := &b.listeners
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if i-1 < len(bl.extra) {
		return b.host, bl.extra[i-1].port
	}
	return b.addr()
}

// advertised returns b's address as the client of cn should reach it: on
// cn's listener.
func (b *broker) advertised(cn *conn) (string, int32) {
	return b.addrOn(cn.sec.listener)
}

// connSecurity is a connection's SASL state, owned by its serve goroutine.
type connSecurity struct {
	// principal is the authenticated SASL user, "" before authentication
	// and on listeners without SASL; per-user quotas key on it.
	principal string
	listener  int    // index into Security.Listeners
	mechanism string // of the handshake in progress or done
	handshook bool   // SaslHandshake done, SaslAuthenticate expected
	scram     *scram.ServerConversation
	// The SCRAM messages so far, for scramDoubledNonce.
	scramFirst, scramServerFirst string
	expires                      time.Time // session end; zero: none
	authed                       bool
}

// wrapListener makes ln a TLS listener if listener i is SSL or SASL_SSL:
// each accepted connection then runs the handshake on its first read, in
// its own goroutine.
func (b *broker) wrapListener(i int, ln net.Listener) net.Listener {
	s := b.c.sec
	if s == nil || !s.cfg.Listeners[i].tls() {
		return ln
	}
	return tls.NewListener(ln, s.cfg.TLS)
}

// errSASLState closes a connection that sends a request its SASL state
// does not allow, as Kafka does.
var errSASLState = errors.New("request not allowed before SASL authentication")

// checkAuth lets a request through the connection's SASL state: before
// authentication only ApiVersions and the SASL requests; after the session
// expired only a new SaslHandshake (KIP-368).
func (cn *conn) checkAuth(key int16) error {
	s := cn.c.sec
	if s == nil || !s.cfg.Listeners[cn.sec.listener].sasl() {
		return nil
	}
	switch key {
	case saslHandshakeKey, saslAuthenticateKey:
		return nil
	case apiVersionsKey:
		if !cn.sec.authed {
			return nil
		}
	}
	if !cn.sec.authed || cn.sec.handshook {
		return fmt.Errorf("%w: %s", errSASLState, kmsg.NameForKey(key))
	}
	if !cn.sec.expires.IsZero() && time.Now().After(cn.sec.expires) {
		return fmt.Errorf("%s after the SASL session expired (KIP-368): closing the connection", kmsg.NameForKey(key))
	}
	return nil
}

const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36

	ecSASLAuthenticationFailed int16 = 58
	ecUnsupportedSASLMechanism int16 = 33
	ecIllegalSASLState         int16 = 34
)

// The SASL APIs join the table before apis.go's init builds it.
var _ = func() bool {
	apis[saslHandshakeKey] = &api{min: 0, max: new(kmsg.SASLHandshakeRequest).MaxVersion(), request: newRequest(saslHandshakeKey), handle: handleSASLHandshake}
	apis[saslAuthenticateKey] = &api{min: 0, max: new(kmsg.SASLAuthenticateRequest).MaxVersion(), request: newRequest(saslAuthenticateKey), handle: handleSASLAuthenticate}
	return true
}()

func handleSASLHandshake(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	s := cn.c.sec
	if s == nil || !s.cfg.Listeners[cn.sec.listener].sasl() || req.Version < 1 {
		resp.ErrorCode = ecIllegalSASLState
		return result{resp: resp, closeConn: true}
	}
	resp.SupportedMechanisms = s.mechanisms
	ok := false
	for _, m := range s.mechanisms {
		ok = ok || m == req.Mechanism
	}
	if !ok || cn.sec.authed && req.Mechanism != cn.sec.mechanism {
		resp.ErrorCode = ecUnsupportedSASLMechanism
		s.failures.Add(1)
		return result{resp: resp, closeConn: true}
	}
	cn.sec.mechanism = req.Mechanism
	cn.sec.handshook = true
	cn.sec.scram = nil
	cn.sec.scramFirst, cn.sec.scramServerFirst = "", ""
	return result{resp: resp}
}

func handleSASLAuthenticate(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s := cn.c.sec
	if s == nil || !cn.sec.handshook {
		resp.ErrorCode = ecIllegalSASLState
		return result{resp: resp, closeConn: true}
	}
	fail := func(msg string) result {
		s.failures.Add(1)
		resp.ErrorCode = ecSASLAuthenticationFailed
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: " + msg)
		resp.SASLAuthBytes = nil
		return result{resp: resp, closeConn: true}
	}
	var principal string
	switch cn.sec.mechanism {
	case MechPlain:
		parts := bytes.Split(req.SASLAuthBytes, []byte{0})
		if len(parts) != 3 {
			return fail("malformed PLAIN message")
		}
		user, pass := string(parts[1]), string(parts[2])
		if want, ok := s.plain[user]; !ok || want != pass {
			return fail("Invalid username or password")
		}
		principal = user
	case MechOAuthBearer:
		msg := string(req.SASLAuthBytes)
		if msg == "\x01" { // the client's answer to our error challenge
			return fail("invalid token")
		}
		tok, ok := oauthToken(msg)
		who, known := s.tokens[tok]
		if !ok || !known {
			s.failures.Add(1)
			// RFC 7628: an error challenge, then the client's kvsep.
			resp.SASLAuthBytes = []byte(`{"status":"invalid_token"}`)
			return result{resp: resp}
		}
		principal = who
	case MechScramSHA256, MechScramSHA512:
		if cn.sec.scram == nil {
			cn.sec.scram = s.scram[cn.sec.mechanism].NewConversation()
		}
		msg := string(req.SASLAuthBytes)
		first := cn.sec.scramFirst == ""
		out, err := cn.sec.scram.Step(msg)
		if err != nil && !first {
			// librdkafka before 2.6.1 repeats its nonce in the
			// client-final message; Kafka 3.8.1 to 3.9.0 accept that
			// (KAFKA-17584's endsWith), and so does the test broker.
			var ok bool
			if out, principal, ok = s.scramDoubledNonce(cn, msg); ok {
				resp.SASLAuthBytes = []byte(out)
				break
			}
		}
		if err != nil {
			return fail("Invalid username or password")
		}
		if first {
			cn.sec.scramFirst, cn.sec.scramServerFirst = msg, out
		}
		resp.SASLAuthBytes = []byte(out)
		if !cn.sec.scram.Done() {
			return result{resp: resp}
		}
		if !cn.sec.scram.Valid() {
			return fail("Invalid username or password")
		}
		principal = cn.sec.scram.Username()
	default:
		return fail("unknown mechanism")
	}
	if cn.sec.authed && principal != cn.sec.principal {
		return fail("re-authentication must keep the principal (KIP-368)")
	}
	if cn.sec.authed {
		s.reauths.Add(1)
	} else {
		s.auths.Add(1)
	}
	cn.sec.authed, cn.sec.handshook, cn.sec.scram = true, false, nil
	cn.sec.scramFirst, cn.sec.scramServerFirst = "", ""
	cn.sec.principal = principal
	cn.sec.expires = time.Time{}
	if lt := s.cfg.SessionLifetime; lt > 0 {
		cn.sec.expires = time.Now().Add(lt)
		resp.SessionLifetimeMillis = lt.Milliseconds()
	}
	return result{resp: resp}
}

// oauthToken extracts the bearer token of an RFC 7628 client response.
func oauthToken(msg string) (string, bool) {
	if !strings.HasPrefix(msg, "n,") {
		return "", false
	}
	for _, kv := range strings.Split(msg, "\x01") {
		if tok, ok := strings.CutPrefix(kv, "auth=Bearer "); ok {
			return tok, tok != ""
		}
	}
	return "", false
}

// scramDoubledNonce verifies a SCRAM client-final message whose nonce is
// the client nonce followed by the whole server nonce (librdkafka before
// 2.6.1, confluentinc/librdkafka#4895), as Kafka 3.8.1 to 3.9.0 accept it:
// the proof is checked over the messages as they were sent (RFC 5802
// section 3), with the credentials xdg-go/scram derived. It returns the
// server-final message and the user.
func (s *clusterSecurity) scramDoubledNonce(cn *conn, final string) (string, string, bool) {
	bare, ok := strings.CutPrefix(cn.sec.scramFirst, "n,,")
	if !ok {
		return "", "", false
	}
	attr := func(msg, key string) string {
		for _, kv := range strings.Split(msg, ",") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok {
				return v
			}
		}
		return ""
	}
	user, cnonce, snonce := attr(bare, "n"), attr(bare, "r"), attr(cn.sec.scramServerFirst, "r")
	i := strings.LastIndex(final, ",p=")
	if i < 0 || cnonce == "" || attr(final, "r") != cnonce+snonce || attr(final, "c") != "biws" {
		return "", "", false
	}
	proof, err := base64.StdEncoding.DecodeString(final[i+3:])
	creds, known := s.scramCreds[cn.sec.mechanism][user]
	if err != nil || !known {
		return "", "", false
	}
	h := sha256.New
	if cn.sec.mechanism == MechScramSHA512 {
		h = sha512.New
	}
	authMsg := []byte(bare + "," + cn.sec.scramServerFirst + "," + final[:i])
	mac := hmac.New(h, creds.StoredKey)
	mac.Write(authMsg)
	sig := mac.Sum(nil)
	if len(proof) != len(sig) {
		return "", "", false
	}
	for j := range sig {
		sig[j] ^= proof[j] // the client key
	}
	sum := h()
	sum.Write(sig)
	if !hmac.Equal(sum.Sum(nil), creds.StoredKey) {
		return "", "", false
	}
	mac = hmac.New(h, creds.ServerKey)
	mac.Write(authMsg)
	return "v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)), user, true
}
