package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/samsa-go/samsa/kerr"
)

// ErrAuthentication is wrapped by every error that says the broker and the
// client do not trust each other: a TLS certificate that does not verify
// (unknown CA, wrong host name, expired), a TLS alert from the broker (for
// example a client certificate it rejects), a peer that does not speak TLS,
// SASL_AUTHENTICATION_FAILED, a SASL mechanism the broker does not enable,
// or a mechanism that fails on the client. Retrying the same connection
// cannot succeed, so such errors do not wrap kerr.NetworkException. A
// connection closed during the handshake is not an authentication error.
var ErrAuthentication = errors.New("authentication failed")

// tlsClient runs the TLS handshake on nc, bounded by ctx. A config without
// ServerName gets the host of addr, so certificates are verified against
// the broker's host name unless the config says otherwise.
func tlsClient(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, tlsError(addr, err)
	}
	return tc, nil
}

// tlsError classifies a handshake failure: trust problems are
// ErrAuthentication, anything else (the broker closed the connection, a
// timeout) is a network error that is retried.
func tlsError(addr string, err error) error {
	var (
		verr *tls.CertificateVerificationError
		rh   tls.RecordHeaderError
		ua   x509.UnknownAuthorityError
		he   x509.HostnameError
		ci   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return fmt.Errorf("conn: %s: TLS handshake: %w: the broker's certificate does not verify: %w", addr, ErrAuthentication, err)
	case isTLSAlert(err):
		return fmt.Errorf("conn: %s: TLS handshake: %w: the broker refused the handshake: %w", addr, ErrAuthentication, err)
	case errors.As(err, &rh):
		return fmt.Errorf("conn: %s: TLS handshake: %w: the broker does not speak TLS on this port (a PLAINTEXT listener?): %w", addr, ErrAuthentication, err)
	}
	return fmt.Errorf("conn: %s: TLS handshake: %w: %w", addr, kerr.NetworkException, err)
}

// alertErr turns a TLS alert that arrives after the handshake, during
// ApiVersions, into an authentication error: with TLS 1.3 a broker that
// rejects the client's certificate (or its absence) says so only then.
func alertErr(addr string, err error) error {
	if err == nil || !isTLSAlert(err) {
		return err
	}
	return fmt.Errorf("conn: %s: TLS: %w: the broker refused the connection: %w", addr, ErrAuthentication, err)
}

// isTLSAlert reports whether err is an alert the peer sent: crypto/tls
// reports those as a net.OpError with Op "remote error" (tls.AlertError is
// only for QUIC).
func isTLSAlert(err error) bool {
	var op *net.OpError
	var alert tls.AlertError
	return errors.As(err, &op) && op.Op == "remote error" || errors.As(err, &alert)
}
