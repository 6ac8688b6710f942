package interop

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// A client set up for another listener than the one it dials: what it meets
// on the 1-node cluster (started with -sasl-ssl, as make test does), for the
// tests of what such a client is told.
//
//	listener   address variable              what it speaks
//	PLAINTEXT  SAMSA_KAFKA_BROKERS           Kafka frames, no TLS, no SASL (User:ANONYMOUS)
//	SASL_SSL   SAMSA_KAFKA_SASL_SSL_BROKERS  TLS first (a certificate for IP:127.0.0.1
//	                                         and DNS:localhost, signed by the CA of
//	                                         SAMSA_KAFKA_CA, a PEM file), then SASL
//
// A plaintext client on the SASL_SSL listener (plaintextOnSASLSSL) writes a
// Kafka frame that the broker reads as a TLS record: it answers a TLS alert
// (7 bytes, 0x15 0x03 0x03 ...) and closes, so the client reads 0x15030300
// as a response size. A TLS client on the PLAINTEXT listener
// (tlsOnPlaintext) writes a ClientHello that the broker reads as a frame
// size far over socket.request.max.bytes: it closes the connection without
// a byte, and the handshake ends with EOF (or a reset).

// realListeners are the 1-node cluster's two client listeners and the CA of
// the SASL_SSL one.
type realListeners struct {
	plaintext []string    // SAMSA_KAFKA_BROKERS
	saslSSL   []string    // SAMSA_KAFKA_SASL_SSL_BROKERS
	caFile    string      // SAMSA_KAFKA_CA
	tls       *tls.Config // trusts caFile's CA only; TLS 1.2+
}

// realKafkaListeners returns the 1-node cluster and its listeners, or skips
// the test when the cluster or its SASL_SSL listener is missing.
func realKafkaListeners(t *testing.T) (*realCluster, realListeners) {
	t.Helper()
	c := realKafka(t)
	l := realListeners{
		plaintext: c.addrs,
		saslSSL:   strings.Split(realEnv(t, "SAMSA_KAFKA_SASL_SSL_BROKERS", "the 1-node cluster was started without -sasl-ssl"), ","),
		caFile:    realEnv(t, "SAMSA_KAFKA_CA", "the 1-node cluster was started without -sasl-ssl"),
	}
	pem, err := os.ReadFile(l.caFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem), "no certificate in %s", l.caFile)
	l.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return c, l
}

// plaintextOnSASLSSL is a producer Config without TLS or SASL whose
// bootstrap brokers are the SASL_SSL listener's.
func (l realListeners) plaintextOnSASLSSL() producer.Config {
	return producer.Config{Brokers: l.saslSSL}
}

// tlsOnPlaintext is a producer Config with TLS that trusts the cluster's CA
// (it would verify the SASL_SSL listener's certificate) whose bootstrap
// brokers are the PLAINTEXT listener's.
func (l realListeners) tlsOnPlaintext() producer.Config {
	return producer.Config{Brokers: l.plaintext, TLS: l.tls.Clone()}
}

// TestRealKafkaListenersOfMismatchedClients checks the listeners' side of
// the mismatches above, on the wire, so that the tests of what samsa says
// stand on known ground: TLS with the CA completes on the SASL_SSL
// listener, a plaintext Kafka frame there gets a TLS alert record and the
// connection closed, and a TLS handshake on the PLAINTEXT listener gets the
// connection closed without an answer.
func TestRealKafkaListenersOfMismatchedClients(t *testing.T) {
	_, l := realKafkaListeners(t)
	dialer := &net.Dialer{Timeout: 10 * time.Second}

	t.Run("TLS on SASL_SSL", func(t *testing.T) {
		cn, err := tls.DialWithDialer(dialer, "tcp", l.saslSSL[0], l.tls.Clone())
		require.NoError(t, err, "the CA of SAMSA_KAFKA_CA must verify the SASL_SSL listener")
		require.NoError(t, cn.Close())
	})

	t.Run("plaintext on SASL_SSL", func(t *testing.T) {
		cfg := l.plaintextOnSASLSSL()
		require.Nil(t, cfg.TLS)
		cn, err := dialer.Dial("tcp", cfg.Brokers[0])
		require.NoError(t, err)
		defer cn.Close()
		// ApiVersions v0, correlation id 1, client id "x".
		body := []byte{0, 18, 0, 0, 0, 0, 0, 1, 0, 1, 'x'}
		_, err = cn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		require.NoError(t, err)
		require.NoError(t, cn.SetReadDeadline(time.Now().Add(10*time.Second)))
		got, err := io.ReadAll(cn)
		if err != nil {
			require.ErrorIs(t, err, syscall.ECONNRESET, "the broker closes the connection after its alert")
		}
		require.GreaterOrEqual(t, len(got), 5, "a TLS record: %x", got)
		require.Equal(t, byte(0x15), got[0], "a TLS alert record: %x", got)
		require.Equal(t, byte(0x03), got[1], "TLS record version: %x", got)
	})

	t.Run("TLS on PLAINTEXT", func(t *testing.T) {
		cfg := l.tlsOnPlaintext()
		require.NotNil(t, cfg.TLS)
		cn, err := tls.DialWithDialer(dialer, "tcp", cfg.Brokers[0], cfg.TLS)
		if err == nil {
			cn.Close()
		}
		require.Error(t, err, "a TLS handshake with the PLAINTEXT listener")
		if !errors.Is(err, syscall.ECONNRESET) {
			require.ErrorIs(t, err, io.EOF, "the PLAINTEXT listener closes a TLS handshake without an answer")
		}
	})
}
