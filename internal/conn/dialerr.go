package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
)

// dialError is the error of a connection that could not be set up: the
// connect, the TLS handshake or the ApiVersions handshake failed. Its text
// names the broker and what happened in words a user can act on ("cannot
// connect to broker 127.0.0.1:9: connection refused (nothing is listening
// there)"), and it wraps its class, kerr.NetworkException (retried) or
// ErrAuthentication (a mismatch retrying cannot fix), the underlying error
// (errors.Is(err, syscall.ECONNREFUSED) holds), and for a dial that ran out
// of time, the context's error.
type dialError struct {
	addr   string
	what   string // what happened, after "cannot connect to broker <addr>: "
	during string // the step, for a timeout's text: "" (the connect), " in the TLS handshake", ...
	class  error  // kerr.NetworkException or ErrAuthentication
	cause  error  // the error the step returned; nil when what says it all
	ctxErr error  // the dial's context error, when it ended the dial
}

func (e *dialError) Error() string { return "cannot connect to broker " + e.addr + ": " + e.what }

func (e *dialError) Unwrap() []error {
	out := make([]error, 0, 3)
	for _, err := range []error{e.class, e.cause, e.ctxErr} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Hints after "the broker closed the connection during the ApiVersions
// handshake", which a Kafka listener of the client's protocol never does:
// it answers ApiVersions, also one it does not support (with its v0
// answer). The error stays retriable (a broker may also have gone down
// at that moment); the hint says what to check.
const (
	closedInPlaintext = " without answering: is it a TLS listener (a TLS proxy or load balancer that sends no alert: set security.protocol=SSL or SASL_SSL, Config.TLS), or not a Kafka listener at all?"
	closedInTLS       = " without answering, after the TLS handshake: is it a Kafka listener (not a TLS proxy or another TLS service), and of the protocol the client speaks (security.protocol)?"
)

// Texts of the listener mismatches, which both wrap ErrAuthentication.
const (
	speaksTLS       = "the listener speaks TLS, but the client connects in plaintext: set security.protocol=SSL or SASL_SSL (Config.TLS)"
	doesNotSpeakTLS = "the listener does not speak TLS, but the client connects with TLS: set security.protocol=PLAINTEXT or SASL_PLAINTEXT (no Config.TLS)"
	// needsSASL is followed by the mechanisms the listener enables and
	// the protocol to set.
	needsSASL = "the listener requires SASL authentication, but the client connects without it (the broker closed the connection at its first request after ApiVersions): set security.protocol=%s and sasl.mechanism (Config.SASL); the listener enables %s"
)

// saslListenerErr is the error of a connection without SASL that the
// broker closed before answering its first request after the handshake
// (err): a SASL listener answers ApiVersions, then closes the connection
// at any request but SaslHandshake (Kafka's SaslServerAuthenticator:
// "Unexpected Kafka request of type ... during SASL handshake"), and the
// client sees only EOF. A broker going down closes connections too, so a
// second connection asks (requiresSASL): only a SaslHandshake answer that
// lists mechanisms makes it a mismatch, which wraps ErrAuthentication as
// the TLS mismatches do; otherwise err is returned as it is. It runs on
// the reader goroutine, bounded by Config.DialTimeout and by the
// connection's end (Close), before the pending requests fail.
func (c *Conn) saslListenerErr(err error) error {
	if !closedByPeer(err) {
		return err
	}
	c.mu.Lock()
	broken := c.err != nil
	c.mu.Unlock()
	if broken {
		return err // closed by us, or the writer failed first
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	mechs, ok := requiresSASL(ctx, c.addr, c.cfg)
	cancel()
	<-watched
	if !ok {
		return err
	}
	proto := "SASL_PLAINTEXT or SASL_SSL"
	if c.cfg.TLS != nil {
		proto = "SASL_SSL"
	}
	return mismatch(c.addr, fmt.Sprintf(needsSASL, proto, BrokerTexts(nil, mechs)), peerClosed(err))
}

// peerClosed is the cause closedByPeer found in err, without the
// kerr.NetworkException that err wraps (a mismatch is not retried).
func peerClosed(err error) error {
	for _, cause := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, cause) {
			return cause
		}
	}
	return err
}

// requiresSASL reports whether addr, dialled as cfg says (TLS included)
// without SASL, answers a SaslHandshake v1 as a SASL listener does (no
// error, or UNSUPPORTED_SASL_MECHANISM, with the mechanisms it enables)
// rather than as a listener without SASL (ILLEGAL_SASL_STATE), and with
// which mechanisms. Bounded by ctx; the connection is closed before it
// returns.
func requiresSASL(ctx context.Context, addr string, cfg Config) ([]string, bool) {
	nc, err := dialNet(ctx, addr, cfg)
	if err != nil {
		return nil, false
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if cfg.TLS != nil {
		if nc, err = tlsClient(ctx, nc, addr, cfg); err != nil {
			return nil, false
		}
		defer nc.Close()
	}
	pc := newConn(nc, addr, cfg)
	if pc.negotiate(cfg.TLS != nil) != nil {
		return nil, false
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = "PLAIN"
	corr := pc.corr
	if _, err := nc.Write(pc.format.AppendRequest(nil, req, corr)); err != nil {
		return nil, false
	}
	body, err := readFrameMax(nc, smallResponseMax)
	if err != nil {
		return nil, false
	}
	got, rest, err := parseResponseHeader(body, false) // SaslHandshake v1: header v0
	if err != nil || got != corr {
		return nil, false
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if resp.ReadFrom(rest) != nil {
		return nil, false
	}
	switch resp.ErrorCode {
	case 0, 33: // 33: UNSUPPORTED_SASL_MECHANISM
		return resp.SupportedMechanisms, true
	}
	return nil, false
}

// connectErr names the cause of a failed connect (the Dialer's error):
// connection refused, no such host, the Dialer's own text.
func connectErr(addr string, err error) *dialError {
	de := &dialError{addr: addr, class: kerr.NetworkException, cause: err}
	var (
		dns   *net.DNSError
		errno syscall.Errno
		op    *net.OpError
		addrs *addrsError
	)
	switch {
	case errors.As(err, &addrs):
		de.what = addrs.Error() // each address's failure
	case errors.Is(err, syscall.ECONNREFUSED):
		de.what = "connection refused (nothing is listening there)"
	case errors.As(err, &dns) && dns.IsNotFound:
		de.what = fmt.Sprintf("no such host %q", dns.Name)
	case errors.As(err, &dns):
		de.what = fmt.Sprintf("cannot resolve %q: %s", dns.Name, dns.Err)
	case errors.As(err, &errno):
		de.what = errno.Error() // "no route to host", "network is unreachable"
	case errors.As(err, &op) && op.Err != nil:
		de.what = op.Err.Error()
	default:
		de.what = err.Error() // a Dialer's own error, or its panic
	}
	return de
}

// ioErr names what an I/O error during the TLS or ApiVersions handshake
// (step: "TLS handshake", "ApiVersions handshake") says happened. A
// timeout's words are set by endedErr, which knows why the dial ended.
func ioErr(addr, step string, err error) *dialError {
	de := &dialError{addr: addr, during: " in the " + step, class: kerr.NetworkException, cause: err}
	if closedByPeer(err) {
		de.what = "the broker closed the connection during the " + step
	} else {
		de.what = step + ": " + err.Error()
	}
	return de
}

// closedByPeer reports whether err says the peer closed or reset the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// mismatch is the error of a listener that does not speak what the client
// does (what: speaksTLS or doesNotSpeakTLS): not retried, like a failed
// authentication (Java reports a failed TLS handshake as an
// SslAuthenticationException).
func mismatch(addr, what string, cause error) *dialError {
	return &dialError{addr: addr, what: what, class: ErrAuthentication, cause: cause}
}

// endedErr returns err, a failed step of Dial, with the reason when the
// dial's context (dctx: ctx bounded by Config.DialTimeout) ended it: a
// network failure then says "timed out after <DialTimeout>" (in which
// step), or the caller's ctx error, and wraps that error.
func endedErr(ctx, dctx context.Context, timeout time.Duration, err error) error {
	cerr := dctx.Err()
	if dl, ok := dctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		// The socket deadline (set to dctx's) can fire just before
		// dctx's own timer.
		cerr = context.DeadlineExceeded
	}
	if cerr == nil {
		return err
	}
	var de *dialError
	if errors.As(err, &de) && de.class == kerr.NetworkException {
		if ctx.Err() != nil {
			cerr = ctx.Err()
			de.what = fmt.Sprintf("stopped%s: %v", de.during, cerr)
		} else {
			de.what = fmt.Sprintf("timed out after %v%s", timeout, de.during)
		}
		de.ctxErr = cerr
		return de
	}
	if !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}
