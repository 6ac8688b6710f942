// What a connection's setup needs before the Kafka handshake: the default
// Dialer (every resolved address tried in turn, Java's
// client.dns.lookup=use_all_dns_ips), canonical bootstrap names
// (resolve_canonical_bootstrap_servers_only), the setup timeout that grows
// per failed attempt (socket.connection.setup.timeout.max.ms), and the
// socket buffer sizes (send.buffer.bytes, receive.buffer.bytes).

package conn

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// DNSResolver is what the default Dialer and CanonicalAddrs ask;
// *net.Resolver implements it.
type DNSResolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// Resolver is the resolver of the default Dialer and of CanonicalAddrs:
// net.DefaultResolver. Tests replace it while no connection dials.
var Resolver DNSResolver = net.DefaultResolver

// minAddrShare is the least time the default Dialer gives one address of a
// host when the setup timeout allows it, as Go's own dialer does: an
// address that never answers takes its share, not the whole timeout.
const minAddrShare = 2 * time.Second

// dialEachAddr is the default Dialer: it resolves addr's host with Resolver
// and connects to each address in the order resolved until one accepts
// (Java's client.dns.lookup=use_all_dns_ips), each with an equal share of
// the time ctx leaves (at least minAddrShare, when there is that much). An
// IP address is dialed as it is.
func dialEachAddr(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.DialContext(ctx, network, addr)
	}
	ips, err := Resolver.LookupHost(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	var errs []error
	for i, ip := range ips {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			share := max(left/time.Duration(len(ips)-i), min(minAddrShare, left))
			actx, cancel = context.WithTimeout(ctx, share)
		}
		nc, err := d.DialContext(actx, network, net.JoinHostPort(ip, port))
		cancel()
		if err == nil {
			return nc, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(ips) == 1 {
		return nil, errs[0] // as net.Dialer's: connectErr names its cause
	}
	return nil, &addrsError{host: host, resolved: len(ips), errs: errs}
}

// addrsError is the default Dialer's error when no address of a host
// accepted the connection: its text names each address's failure, and it
// wraps each (errors.Is(err, syscall.ECONNREFUSED) holds).
type addrsError struct {
	host     string
	resolved int
	errs     []error
}

func (e *addrsError) Error() string {
	texts := make([]string, len(e.errs))
	for i, err := range e.errs {
		texts[i] = err.Error()
	}
	return fmt.Sprintf("no address of %s accepted the connection (%d resolved): %s", e.host, e.resolved, strings.Join(texts, "; "))
}

func (e *addrsError) Unwrap() []error { return e.errs }

// CanonicalAddrs returns the bootstrap addresses addr stands for under
// Java's client.dns.lookup=resolve_canonical_bootstrap_servers_only: its
// host resolved with Resolver (an IP address is taken as it is), each
// address looked up in reverse, and "name:port" for each address's first
// canonical name (the address itself when it has none, as Java's
// getCanonicalHostName), in the order resolved and without duplicates.
func CanonicalAddrs(ctx context.Context, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips := []string{host}
	if _, err := netip.ParseAddr(host); err != nil {
		if ips, err = Resolver.LookupHost(ctx, host); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, ip := range ips {
		name := ip
		if names, err := Resolver.LookupAddr(ctx, ip); err == nil && len(names) > 0 && names[0] != "" {
			name = strings.TrimSuffix(names[0], ".")
		}
		a := net.JoinHostPort(name, port)
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return out, nil
}

// SetupTimeouts counts each address's consecutive failed setups, so that
// Dial gives the next attempt a longer timeout (Java's
// socket.connection.setup.timeout.max.ms): Config.DialTimeout after a
// success, then doubled per failed attempt with ±20% jitter, up to
// Config.DialTimeoutMax. One value is shared by the connections of one
// client (their Config.Setups); it is safe for concurrent use. The zero
// value is ready; a nil *SetupTimeouts keeps every timeout at DialTimeout.
type SetupTimeouts struct {
	mu       sync.Mutex
	failures map[string]int // by address; absent after a success
}

// timeout is the setup timeout of the next dial to addr.
func (s *SetupTimeouts) timeout(addr string, base, limit time.Duration) time.Duration {
	if s == nil || limit <= base {
		return base
	}
	s.mu.Lock()
	n := s.failures[addr]
	s.mu.Unlock()
	if n == 0 {
		return base
	}
	return Backoff(n, base, limit)
}

// done records the outcome of a dial to addr.
func (s *SetupTimeouts) done(addr string, ok bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		delete(s.failures, addr)
		return
	}
	if s.failures == nil {
		s.failures = map[string]int{}
	}
	s.failures[addr]++
}

// socketBuffers is a connection whose socket buffers can be sized: a
// *net.TCPConn.
type socketBuffers interface {
	SetReadBuffer(int) error
	SetWriteBuffer(int) error
}

// setBuffers sets the socket's send and receive buffers (SO_SNDBUF,
// SO_RCVBUF) to cfg's positive sizes, on nc or on the connection under it:
// a *tls.Conn, or a Dialer's own wrapper with the same NetConn method,
// is unwrapped. A connection without such buffers is left as it is.
func setBuffers(nc net.Conn, cfg *Config) error {
	if cfg.SendBufferBytes <= 0 && cfg.ReceiveBufferBytes <= 0 {
		return nil
	}
	sock, ok := nc.(socketBuffers)
	for depth := 0; !ok && depth < 8; depth++ {
		w, unwraps := nc.(interface{ NetConn() net.Conn })
		if !unwraps {
			return nil
		}
		nc = w.NetConn()
		sock, ok = nc.(socketBuffers)
	}
	if !ok {
		return nil
	}
	if n := cfg.SendBufferBytes; n > 0 {
		if err := sock.SetWriteBuffer(n); err != nil {
			return fmt.Errorf("setting the send buffer to %d bytes: %w", n, err)
		}
	}
	if n := cfg.ReceiveBufferBytes; n > 0 {
		if err := sock.SetReadBuffer(n); err != nil {
			return fmt.Errorf("setting the receive buffer to %d bytes: %w", n, err)
		}
	}
	return nil
}
