package producer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/sasl"
)

// A Config prints readably and never with a secret, whatever the verb or
// the logger: every secret-bearing field set (SASL passwords, tokens and
// client secrets, a TLS client key and session ticket key), printed with
// each fmt verb, nested, through a pointer and by slog's handlers.
func TestConfigPrintsNoSecret(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	var ticketKey [32]byte
	copy(ticketKey[:], "TICKET-KEY-0123456789-abcdefghij")
	tlsCfg := &tls.Config{
		ServerName:       "kafka.example",
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		SessionTicketKey: ticketKey,
	}
	token, err := sasl.ClientCredentials(sasl.ClientCredentialsConfig{
		TokenURL: "https://idp.example/token", ClientID: "svc", ClientSecret: "CLIENT-SECRET-42",
	})
	require.NoError(t, err)
	secrets := []string{
		"PLAIN-PASSWORD-1", "SCRAM-PASSWORD-2", "BEARER-TOKEN-3", "CLIENT-SECRET-42",
		key.D.String(), key.D.Text(16), hex.EncodeToString(key.D.Bytes()), string(keyPEM),
		"TICKET-KEY", fmt.Sprint(ticketKey[:4]), hex.EncodeToString(ticketKey[:4]),
	}
	mechs := []sasl.Mechanism{
		sasl.Plain("alice", "PLAIN-PASSWORD-1"),
		sasl.ScramSHA512("bob", "SCRAM-PASSWORD-2"),
		sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return sasl.Token{Value: "BEARER-TOKEN-3"}, nil }),
		sasl.OAuthBearer(token),
	}
	for _, mech := range mechs {
		cfg := Config{
			Brokers: []string{"k1:9092", "k2:9092"}, ClientID: "billing", Linger: NoWait, MaxBlock: 2 * time.Second,
			Compression: compression.Zstd, TransactionalID: "orders-tx", DialTimeoutMax: 20 * time.Second,
			ClientDNSLookup: DNSResolveCanonicalBootstrapServersOnly, SendBufferBytes: 131072,
			Dialer:       func(context.Context, string, string) (net.Conn, error) { return nil, nil },
			TLS:          tlsCfg,
			SASL:         mech,
			Partitioner:  RoundRobinPartitioner(),
			ignoredProps: []string{"reconnect.backoff.ms"},
		}
		var outs []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T %v"} {
			outs = append(outs, fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &cfg))
		}
		outs = append(outs, fmt.Sprintf("%+v", struct{ C Config }{cfg}), fmt.Sprintf("%#v", []Config{cfg}), fmt.Sprint(cfg), cfg.String(), cfg.GoString())
		for _, h := range []func(*bytes.Buffer) slog.Handler{
			func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var b bytes.Buffer
			slog.New(h(&b)).Info("starting", "config", cfg, "ptr", &cfg)
			outs = append(outs, b.String())
		}
		for _, out := range outs {
			for _, s := range secrets {
				require.NotContains(t, out, s, "a secret printed")
			}
		}

		s := cfg.String()
		for _, want := range []string{
			`producer.Config{Brokers=[k1:9092 k2:9092] ClientID="billing" Linger=NoWait MaxBlock=2s`,
			`Compression=zstd`, `TransactionalID="orders-tx"`, `DialTimeoutMax=20s`, `Dialer=set`,
			`ClientDNSLookup=resolve_canonical_bootstrap_servers_only`, `SendBufferBytes=131072`,
			`Partitioner=*producer.roundRobin`, `IgnoredProperties=[reconnect.backoff.ms]`,
			`TLS=enabled(ServerName="kafka.example", MinVersion=TLS 1.3, client certificate)`,
			`SASL=` + mech.Name() + `}`,
		} {
			assert.Contains(t, s, want)
		}
		assert.NotContains(t, s, "BatchSize", "fields at their default are left out")
		assert.Equal(t, s, fmt.Sprintf("%+v", cfg))
		assert.Equal(t, s, fmt.Sprintf("%#v", cfg))

		var b bytes.Buffer
		slog.New(slog.NewJSONHandler(&b, nil)).Info("starting", "config", cfg)
		js := b.String()
		for _, want := range []string{`"config":{"Brokers":["k1:9092","k2:9092"],"ClientID":"billing","Linger":"NoWait","MaxBlock":2000000000`,
			`"TLS":"enabled(ServerName=\"kafka.example\", MinVersion=TLS 1.3, client certificate)","SASL":"` + mech.Name() + `"}`} {
			assert.Contains(t, js, want)
		}
	}
	assert.Equal(t, "producer.Config{TLS=disabled SASL=none}", Config{}.String())
	assert.Equal(t, `producer.Config{TLS=enabled SASL=none}`, fmt.Sprint(Config{TLS: &tls.Config{}}))
	assert.Contains(t, Config{SASL: panickyMech{}}.String(), "SASL=(its Name panicked)")
}

type panickyMech struct{ sasl.Mechanism }

func (panickyMech) Name() string { panic("no name") }
