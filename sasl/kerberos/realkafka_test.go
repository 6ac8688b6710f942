package kerberos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// The real-Kafka tests run against interop/kafka's cluster started with
// -gssapi (make test does): a GSSAPI listener on localhost, an MIT KDC, and
// DIR/env's SAMSA_KAFKA_GSSAPI_BROKERS, SAMSA_KRB5_*. They skip without
// SAMSA_KAFKA_GSSAPI_BROKERS.

type realKafka struct {
	brokers, conf, keytab, client, short string
	shortLife, reauth                    time.Duration
}

func needRealKafka(t *testing.T) realKafka {
	t.Helper()
	brokers := os.Getenv("SAMSA_KAFKA_GSSAPI_BROKERS")
	if brokers == "" {
		if os.Getenv("CI") != "" && os.Getenv("SAMSA_KAFKA_BROKERS") != "" {
			t.Fatal("the real Kafka cluster runs without -gssapi, and CI is set: .ci/run must install the KDC (krb5-kdc krb5-admin-server) so that with-clusters.sh passes -gssapi")
		}
		t.Skip("SAMSA_KAFKA_GSSAPI_BROKERS is not set: start interop/kafka/start.sh -gssapi (make test does)")
	}
	ms := func(k string) time.Duration {
		n, err := strconv.Atoi(os.Getenv(k))
		require.NoError(t, err, k)
		return time.Duration(n) * time.Millisecond
	}
	return realKafka{
		brokers: brokers, conf: os.Getenv("SAMSA_KRB5_CONFIG"), keytab: os.Getenv("SAMSA_KRB5_CLIENT_KEYTAB"),
		client: os.Getenv("SAMSA_KRB5_CLIENT_PRINCIPAL"), short: os.Getenv("SAMSA_KRB5_SHORT_PRINCIPAL"),
		shortLife: ms("SAMSA_KRB5_SHORT_LIFE_MS"), reauth: ms("SAMSA_KAFKA_GSSAPI_REAUTH_MS"),
	}
}

// props are a Java client's properties for principal, with a keytab.
func (k realKafka) props(principal string, kv ...string) map[string]string {
	m := map[string]string{
		"bootstrap.servers":          k.brokers,
		"security.protocol":          "SASL_PLAINTEXT",
		"sasl.mechanism":             "GSSAPI",
		"sasl.kerberos.service.name": "kafka",
		"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="` +
			k.keytab + `" principal="` + principal + `";`,
		KeyKrb5Conf: k.conf,
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// kcat runs kcat (librdkafka, GSSAPI through Cyrus SASL and MIT Kerberos)
// with the client's keytab; it fails without kcat when CI is set.
func (k realKafka) kcat(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed, and CI is set: .ci/run must install it (apt-get install -y kcat libsasl2-modules-gssapi-mit)")
		}
		t.Skip("kcat is not installed (apt-get install kcat libsasl2-modules-gssapi-mit)")
	}
	args = append(args, "-b", k.brokers, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
		"-X", "sasl.kerberos.service.name=kafka", "-X", "sasl.kerberos.keytab="+k.keytab,
		"-X", "sasl.kerberos.principal="+k.client)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	// librdkafka's kinit writes its ticket cache: a private one.
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.conf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "kcat-cc"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kcat %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

func closeProducer(t *testing.T, p *producer.Producer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.Close(ctx))
}

// TestRealKafkaGSSAPIKeytabProducer: a producer configured by properties
// alone logs in with a keytab, authenticates to Kafka's GSSAPI listener
// and delivers 10 000 records, which kcat reads back.
func TestRealKafkaGSSAPIKeytabProducer(t *testing.T) {
	k := needRealKafka(t)
	cfg, err := producer.ConfigFromProperties(k.props(k.client, "linger.ms", "5"))
	require.NoError(t, err)
	p, err := producer.New(cfg)
	require.NoError(t, err)
	defer closeProducer(t, p)

	topic := fmt.Sprintf("samsa-gssapi-%d", time.Now().UnixNano())
	const n = 10_000
	futures := make([]*producer.Future, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range futures {
		futures[i] = p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i))})
	}
	require.NoError(t, p.Flush(ctx))
	for i, f := range futures {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
	}

	out := k.kcat(t, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-c", strconv.Itoa(n), "-f", "%s\\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, got, n)
	for i, v := range got { // one partition: in order
		require.Equal(t, "v"+strconv.Itoa(i), v)
	}
}

// TestRealKafkaGSSAPIWrongPrincipal: a principal the keytab does not hold
// fails the record with producer.ErrAuthentication, not at
// DeliveryTimeout.
func TestRealKafkaGSSAPIWrongPrincipal(t *testing.T) {
	k := needRealKafka(t)
	cfg, err := producer.ConfigFromProperties(k.props("nobody@"+os.Getenv("SAMSA_KRB5_REALM"), "delivery.timeout.ms", "300000"))
	require.NoError(t, err)
	p, err := producer.New(cfg)
	require.NoError(t, err)
	defer closeProducer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = p.Send(ctx, &producer.Record{Topic: "samsa-gssapi-denied", Value: []byte("v")}).Wait(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, producer.ErrAuthentication)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "nobody@")
}

// TestRealKafkaGSSAPITicketRenewal produces for longer than a ticket of
// samsa-short lives, on a listener that asks for re-authentication
// (KIP-368) every few seconds: each re-authentication gets a fresh service
// ticket, the ticket-granting ticket is replaced before it expires, and no
// record fails.
func TestRealKafkaGSSAPITicketRenewal(t *testing.T) {
	k := needRealKafka(t)
	cfg, err := producer.ConfigFromProperties(k.props(k.short, "linger.ms", "5",
		KeyMinTimeBeforeRelogin, "1000"))
	require.NoError(t, err)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Logger = logger
	m := cfg.SASL.(*mechanism)
	m.opts.Logger = logger
	p, err := producer.New(cfg)
	require.NoError(t, err)
	defer closeProducer(t, p)

	topic := fmt.Sprintf("samsa-gssapi-renew-%d", time.Now().UnixNano())
	run := k.shortLife + k.reauth // past the first ticket's end, by a re-authentication
	ctx, cancel := context.WithTimeout(context.Background(), run+2*time.Minute)
	defer cancel()
	var (
		failed atomic.Int64
		mu     sync.Mutex
		first  error
		sent   int
	)
	for start := time.Now(); time.Since(start) < run; sent++ {
		p.SendCallback(ctx, &producer.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(sent))}, func(_ producer.RecordMetadata, err error) {
			if err != nil && failed.Add(1) == 1 {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, p.Flush(ctx))
	mu.Lock()
	assert.Zero(t, failed.Load(), "first failure: %v", first)
	mu.Unlock()

	out := logs.String()
	logins := strings.Count(out, "kerberos: logged in")
	reauths := strings.Count(out, "SASL re-authentication (KIP-368)")
	t.Logf("%d records over %v; %d logins, %d re-authentications", sent, run, logins, reauths)
	assert.GreaterOrEqual(t, logins, 2, "the ticket-granting ticket was replaced")
	assert.GreaterOrEqual(t, reauths, 2, "the broker asked for re-authentication")
	assert.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}

// syncBuffer is a log destination safe for the producer's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
