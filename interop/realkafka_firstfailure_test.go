package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testutil"
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

// tlsOnSASLSSL is a producer Config with TLS that trusts the cluster's CA
// but without SASL, whose bootstrap brokers are the SASL_SSL listener's:
// Kafka answers its ApiVersions, then closes the connection at its first
// Metadata request.
func (l realListeners) tlsOnSASLSSL() producer.Config {
	return producer.Config{Brokers: l.saslSSL, TLS: l.tls.Clone()}
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

// firstFailureWithin is how soon a user must see why the cluster cannot be
// reached (issue 22): Ping's error, the first warning in the log and, for a
// listener mismatch, a record's error.
const firstFailureWithin = 2 * time.Second

// TestRealKafkaFirstFailure is issue 22 against real Kafka: a producer set
// up with defaults (MaxBlock 60 s, no Logger) for a cluster it cannot use
// tells why within 2 s, in Ping's error and in one warning on slog's
// default logger, whatever the number of records; a listener that speaks
// another protocol also fails the records at once (ErrAuthentication),
// while records for a refused or unresolvable broker wait, as in Java, and
// fail after MaxBlock with the same cause.
func TestRealKafkaFirstFailure(t *testing.T) {
	_, l := realKafkaListeners(t)
	refused := testutil.RefusedAddr(t)
	const nowhere = "samsa-nowhere.invalid:9092"
	// What the log says: the broker's outage (the metadata client's
	// bootstrap broker), and when the records fail fast, the topic's.
	outage := []string{"metadata fetch failed"}
	failing := []string{"metadata fetch failed", "failing records of topic at once"}
	cases := []struct {
		name     string
		cfg      producer.Config
		addr     string   // the broker every text names
		want     []string // in Ping's error, the warning and a record's error, after "cannot connect to broker <addr>: "
		mismatch bool     // records fail fast with ErrAuthentication
		logged   []string // the messages logged, each once, whatever the number of records
	}{
		{"refused", producer.Config{Brokers: []string{refused}}, refused,
			[]string{"connection refused (nothing is listening there)"}, false, outage},
		{"unresolvable", producer.Config{Brokers: []string{nowhere}}, nowhere,
			[]string{`no such host "samsa-nowhere.invalid"`}, false, outage},
		{"plaintext on SASL_SSL", l.plaintextOnSASLSSL(), l.saslSSL[0],
			[]string{"the listener speaks TLS, but the client connects in plaintext", "security.protocol=SSL or SASL_SSL"}, true, failing},
		{"TLS on PLAINTEXT", l.tlsOnPlaintext(), l.plaintext[0],
			[]string{"the listener does not speak TLS, but the client connects with TLS", "security.protocol=PLAINTEXT or SASL_PLAINTEXT"}, true, failing},
		{"TLS without SASL on SASL_SSL", l.tlsOnSASLSSL(), l.saslSSL[0],
			[]string{"the listener requires SASL authentication, but the client connects without it", "security.protocol=SASL_SSL and sasl.mechanism"}, true,
			// The connection is set up, then broken: conn logs that too.
			append([]string{"broker connection broken"}, failing...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureDefaultLog(t)
			prefix := "cannot connect to broker " + tc.addr + ": "
			hasCause := func(t *testing.T, what string, err error) {
				t.Helper()
				require.Error(t, err, what)
				assert.Contains(t, err.Error(), prefix, what)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w, what)
				}
				if tc.mismatch {
					assert.ErrorIs(t, err, producer.ErrAuthentication, what)
				} else {
					assert.NotErrorIs(t, err, producer.ErrAuthentication, what)
				}
			}
			ctx := realContext(t, 30*time.Second)

			start := time.Now()
			p, err := producer.New(tc.cfg) // MaxBlock, DeliveryTimeout, Logger: defaults
			require.NoError(t, err)
			t.Cleanup(func() { closeQuickly(p) })
			topic := uniqueTopic("samsa-firstfailure")
			futs := make([]*producer.Future, 100)
			for i := range futs {
				futs[i] = p.Send(ctx, &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)})
			}
			firstDone := whenDone(t, futs[0])

			pingStart := time.Now()
			err = p.Ping(ctx)
			pingTook := time.Since(pingStart)
			hasCause(t, "Ping", err)
			assert.LessOrEqual(t, pingTook, firstFailureWithin, "Ping took %v: %v", pingTook, err)
			t.Logf("Ping after %v: %v", pingTook.Round(time.Millisecond), err)

			var first loggedLine
			require.Eventually(t, func() bool {
				lines := logs.lines(t)
				if len(lines) > 0 {
					first = lines[0]
				}
				return len(lines) > 0
			}, 30*time.Second, 10*time.Millisecond, "nothing logged at Warn or above")
			logAfter := first.time.Sub(start)
			assert.LessOrEqual(t, logAfter, firstFailureWithin, "the first warning came %v after New: %s", logAfter, first.text)
			assert.Contains(t, first.err, prefix, first.text)
			for _, w := range tc.want {
				assert.Contains(t, first.err, w, first.text)
			}
			t.Logf("first log line %v after New: %s", logAfter.Round(time.Millisecond), first.text)

			if tc.mismatch {
				var doneAt time.Time
				select {
				case doneAt = <-firstDone:
				case <-ctx.Done():
					t.Fatal("the first record did not fail")
				}
				failAfter := doneAt.Sub(start)
				assert.LessOrEqual(t, failAfter, firstFailureWithin, "the first record failed %v after New", failAfter)
				for i, f := range futs {
					_, err := f.Wait(ctx)
					require.NoError(t, ctx.Err(), "record %d failed only when the test gave up", i)
					hasCause(t, fmt.Sprintf("record %d", i), err)
					assert.NotErrorIs(t, err, producer.ErrDeliveryTimeout, "record %d: failed fast, not after MaxBlock", i)
				}
				_, err := futs[0].Wait(ctx)
				t.Logf("the first record failed %v after New: %v", failAfter.Round(time.Millisecond), err)
				// A record sent once the failure is known fails in Send.
				lateStart := time.Now()
				_, err = p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("late")}).Wait(ctx)
				lateTook := time.Since(lateStart)
				hasCause(t, "a record sent after the failure", err)
				assert.LessOrEqual(t, lateTook, firstFailureWithin, "a record sent after the failure took %v to fail", lateTook)
				t.Logf("a record sent after the failure failed in %v", lateTook.Round(time.Millisecond))
			} else {
				// As in Java, a refused or unresolvable broker may be
				// one restarting or a DNS record being created:
				// records wait for MaxBlock. One of a producer whose
				// MaxBlock is short fails with the cause.
				short, err := producer.New(producer.Config{Brokers: tc.cfg.Brokers, MaxBlock: 1500 * time.Millisecond,
					Logger: slog.New(slog.DiscardHandler)})
				require.NoError(t, err)
				t.Cleanup(func() { closeQuickly(short) })
				shortStart := time.Now()
				_, err = short.Send(ctx, &producer.Record{Topic: topic, Value: []byte("short")}).Wait(ctx)
				shortTook := time.Since(shortStart)
				require.NoError(t, ctx.Err(), "the record with MaxBlock 1.5s did not fail")
				hasCause(t, "the record with MaxBlock 1.5s", err)
				assert.ErrorIs(t, err, producer.ErrDeliveryTimeout)
				t.Logf("a record with MaxBlock 1.5s failed after %v: %v", shortTook.Round(time.Millisecond), err)

				time.Sleep(time.Until(start.Add(firstFailureWithin + 500*time.Millisecond)))
				for i, f := range futs {
					_, done, err := f.Result()
					require.False(t, done, "record %d failed %v after New, before MaxBlock (60s): %v", i, time.Since(start), err)
				}
			}

			// One warning per broker, not one per record nor per retry.
			closeQuickly(p)
			lines := logs.lines(t)
			var msgs []string
			for _, line := range lines {
				msgs = append(msgs, line.msg)
				assert.Contains(t, line.err, prefix, line.text)
				t.Logf("logged: %s", line.text)
			}
			assert.ElementsMatch(t, tc.logged, msgs, "%d records", len(futs))
		})
	}

	t.Run("healthy PLAINTEXT", func(t *testing.T) {
		logs := captureDefaultLog(t)
		p, err := producer.New(producer.Config{Brokers: l.plaintext})
		require.NoError(t, err)
		t.Cleanup(func() { closeQuickly(p) })
		require.NoError(t, p.Ping(realContext(t, 30*time.Second)))
		closeQuickly(p)
		assert.Empty(t, logs.lines(t))
	})
}

// closeQuickly closes p, failing what it still holds; it may run twice.
func closeQuickly(p *producer.Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.Close(ctx)
}

// whenDone returns a channel that gets the time f completed, or nothing if
// the test ends first.
func whenDone(t *testing.T, f *producer.Future) <-chan time.Time {
	ch := make(chan time.Time, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		select {
		case <-f.Done():
			ch <- time.Now()
		case <-stop:
		}
	}()
	return ch
}

// defaultLog is slog's default logger captured as JSON lines.
type defaultLog struct{ buf testutil.SyncBuffer }

// loggedLine is one line of a defaultLog.
type loggedLine struct {
	time time.Time
	msg  string
	err  string // the err attribute
	text string // the whole line
}

// captureDefaultLog makes slog's default logger write JSON lines into a
// buffer (at every level: the producer's default logger keeps Warn and
// above) until the test ends, when the previous default is restored.
func captureDefaultLog(t *testing.T) *defaultLog {
	t.Helper()
	l := &defaultLog{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}

// lines returns the lines logged so far.
func (l *defaultLog) lines(t *testing.T) []loggedLine {
	t.Helper()
	var out []loggedLine
	for line := range strings.Lines(l.buf.String()) {
		var v struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Err  string    `json:"err"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &v), "%s", line)
		out = append(out, loggedLine{time: v.Time, msg: v.Msg, err: v.Err, text: strings.TrimSpace(line)})
	}
	return out
}
