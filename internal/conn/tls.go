package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"time"

	"github.com/samsa-go/samsa/kerr"
)

// ErrAuthentication is wrapped by every error that says the broker and the
// client do not trust each other: a TLS certificate that does not verify
// (unknown CA, wrong host name, expired), a TLS alert from the broker (for
// example a client certificate it rejects), a listener that does not speak
// TLS to a TLS client or speaks TLS to a plaintext one,
// SASL_AUTHENTICATION_FAILED, a SASL mechanism the broker does not enable,
// or a mechanism that fails on the client. Retrying the same connection
// cannot succeed, so such errors do not wrap kerr.NetworkException. A
// connection closed during the handshake is not an authentication error.
var ErrAuthentication = errors.New("authentication failed")

// tlsClient runs the TLS handshake on nc, bounded by ctx. A config without
// ServerName gets the host of addr, so certificates are verified against
// the broker's host name unless the config says otherwise.
func tlsClient(ctx context.Context, nc net.Conn, addr string, cfg Config) (net.Conn, error) {
	tcfg := cfg.TLS
	if tcfg.ServerName == "" && !tcfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tcfg = tcfg.Clone()
		tcfg.ServerName = host
	}
	tc := tls.Client(nc, tcfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		de := tlsError(addr, err)
		if de.class == kerr.NetworkException && closedByPeer(err) && ctx.Err() == nil && speaksPlaintext(ctx, addr, cfg) {
			de = mismatch(addr, doesNotSpeakTLS, err)
		}
		return nil, de
	}
	return tc, nil
}

// tlsError classifies a handshake failure: trust problems and a peer that
// does not answer in TLS are ErrAuthentication, anything else (the broker
// closed the connection, a timeout) is a network error that is retried.
func tlsError(addr string, err error) *dialError {
	var (
		verr *tls.CertificateVerificationError
		rh   tls.RecordHeaderError
		ua   x509.UnknownAuthorityError
		he   x509.HostnameError
		ci   x509.CertificateInvalidError
	)
	auth := func(what string) *dialError {
		return &dialError{addr: addr, what: what + ": " + err.Error(), class: ErrAuthentication, cause: err}
	}
	switch {
	case errors.As(err, &verr), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return auth("TLS handshake: the broker's certificate does not verify")
	case isTLSAlert(err):
		return auth("TLS handshake: the broker refused the handshake")
	case errors.As(err, &rh):
		return mismatch(addr, doesNotSpeakTLS, err)
	}
	return ioErr(addr, "TLS handshake", err)
}

// speaksPlaintext reports whether addr answers a plaintext ApiVersions
// request as a Kafka broker does. It runs when a TLS handshake ended with
// the connection closed, which a plaintext listener does (it reads the
// ClientHello as a request of over 300 MB and drops the connection), and
// so does a TLS listener that sheds connections (max.connections.per.ip):
// only an answer in plaintext makes it a mismatch. Bounded by ctx; the
// probe's connection is closed before it returns.
func speaksPlaintext(ctx context.Context, addr string, cfg Config) bool {
	nc, err := dialNet(ctx, addr, cfg)
	if err != nil {
		return false
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	return newConn(nc, addr, cfg).negotiate(false) == nil
}

// alertErr turns a TLS alert that arrives after the handshake, during
// ApiVersions, into an authentication error: with TLS 1.3 a broker that
// rejects the client's certificate (or its absence) says so only then.
func alertErr(addr string, err error) error {
	if err == nil || !isTLSAlert(err) {
		return err
	}
	text := err.Error()
	if op := (*net.OpError)(nil); errors.As(err, &op) {
		text = op.Error() // "remote error: tls: certificate required"
	}
	return &dialError{addr: addr, what: "the broker refused the TLS connection: " + text, class: ErrAuthentication, cause: err}
}

// isTLSAlert reports whether err is an alert the peer sent: crypto/tls
// reports those as a net.OpError with Op "remote error" (tls.AlertError is
// only for QUIC).
func isTLSAlert(err error) bool {
	var op *net.OpError
	var alert tls.AlertError
	return errors.As(err, &op) && op.Op == "remote error" || errors.As(err, &alert)
}
