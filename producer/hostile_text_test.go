package producer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// rawLines is a slog.Handler that writes each record on one line the way a
// naive handler does: the message and every attribute printed with %v,
// nothing quoted, so that a newline in a value starts a new line. It
// counts the records it writes.
type rawLines struct {
	mu    *sync.Mutex
	buf   *bytes.Buffer
	n     *int
	attrs []slog.Attr
}

func newRawLines() *rawLines {
	return &rawLines{mu: new(sync.Mutex), buf: new(bytes.Buffer), n: new(int)}
}

func (h *rawLines) Enabled(context.Context, slog.Level) bool { return true }

func (h *rawLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve().Any())
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.WriteString(b.String() + "\n")
	*h.n++
	return nil
}

func (h *rawLines) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *rawLines) WithGroup(string) slog.Handler { return h }

// lines returns what was logged, one entry per line, and how many records
// were logged.
func (h *rawLines) lines() ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Split(strings.TrimSuffix(h.buf.String(), "\n"), "\n"), *h.n
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// produceAgainst sends 10 records to secureCluster's topic through a
// producer configured by cfg (brokers, TLS, SASL set by the caller),
// logging to logs, and returns their errors, and those of Ping and Close.
func produceAgainst(t *testing.T, cfg producer.Config, logs *rawLines) (errs, pingAndClose []error) {
	t.Helper()
	cfg.Logger = slog.New(logs)
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 30 * time.Second
	}
	cfg.RequestTimeout = min(10*time.Second, cfg.DeliveryTimeout/2)
	cfg.RetryBackoff = 500 * time.Millisecond
	cfg.RetryBackoffMax = time.Second
	p, err := producer.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	futures := make([]*producer.Future, 10)
	for i := range futures {
		futures[i] = p.Send(ctx, &producer.Record{Topic: "secure", Value: []byte("v")})
	}
	for _, f := range futures {
		_, err := f.Wait(ctx)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "a record waited instead of failing")
		errs = append(errs, err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	pingErr := p.Ping(cctx)
	return errs, []error{pingErr, p.Close(cctx)}
}

// TestBrokerTextStaysBounded: text a broker sends (a list of megabytes of
// SASL mechanism names, a SaslAuthenticate or Produce error message of
// megabytes, holding a newline that would start a forged log line) reaches
// record errors and log lines bounded and escaped, and the heap does not
// keep copies of it. Before, a 24 MiB mechanism list became 49.8 MB of logs
// and about 450 MiB of heap growth, and a 24 MB SaslAuthenticate message
// 72 MB of logs.
func TestBrokerTextStaysBounded(t *testing.T) {
	cl, ca := secureCluster(t, 0)
	const forged = "\nERROR forged line"
	mechs := make([]string, 1<<20) // 24 MiB of names
	for i := range mechs {
		mechs[i] = fmt.Sprintf("MECHANISM-%013d", i)
	}
	mechs[0] = "PLAIN" + forged
	huge := "Authentication failed" + forged + strings.Repeat("x", 24<<20)
	produceMsg := "bad record" + forged + strings.Repeat("y", 1<<20-16)
	cases := []struct {
		name string
		key  int16
		sasl bool
		icpt func(kmsg.Response)
		want error
	}{
		{"24 MiB SaslHandshake mechanism list", 17, true, func(r kmsg.Response) {
			resp := r.(*kmsg.SASLHandshakeResponse)
			resp.ErrorCode, resp.SupportedMechanisms = 33, mechs // UNSUPPORTED_SASL_MECHANISM
		}, producer.ErrAuthentication},
		{"24 MiB SaslAuthenticate message", 36, true, func(r kmsg.Response) {
			resp := r.(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode, resp.ErrorMessage, resp.SASLAuthBytes = 58, &huge, nil
		}, producer.ErrAuthentication},
		{"1 MiB Produce error message", 0, false, func(r kmsg.Response) {
			resp := r.(*kmsg.ProduceResponse)
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					p := &resp.Topics[i].Partitions[j]
					p.ErrorCode, p.ErrorMessage = 87, &produceMsg // INVALID_RECORD
				}
			}
		}, kerr.InvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{tc.key}, After: true, Rewrite: tc.icpt})
			defer remove()
			cfg := producer.Config{Brokers: cl.ListenerAddrs(testbroker.Plaintext)}
			if tc.sasl {
				cfg.Brokers, cfg.TLS, cfg.SASL = cl.ListenerAddrs(testbroker.SASLSSL), ca.ClientConfig(), sasl.Plain("alice", "alice-secret")
			}
			logs := newRawLines()
			before := liveHeap()
			errs, others := produceAgainst(t, cfg, logs)
			// What the producer keeps: the least growth over a few
			// samples, since the test broker's connections may still
			// hold the answer they wrote for a moment.
			grown := int64(liveHeap()) - int64(before)
			for range 10 {
				if grown < 16<<20 {
					break
				}
				time.Sleep(100 * time.Millisecond)
				grown = min(grown, int64(liveHeap())-int64(before))
			}
			lines, records := logs.lines()
			// Summaries only: printing a failing error would print
			// megabytes.
			var longest, newlines, forgedLines int
			for _, err := range append(errs, others...) {
				if err == nil {
					continue
				}
				longest = max(longest, len(err.Error()))
				newlines += strings.Count(err.Error(), "\n")
			}
			for _, l := range lines {
				longest = max(longest, len(l))
				if strings.HasPrefix(l, "ERROR forged") {
					forgedLines++
				}
			}
			t.Logf("longest error or log line %d bytes; %d log records, %d bytes of logs; live heap grew by %.1f MiB",
				longest, records, len(strings.Join(lines, "\n")), float64(grown)/(1<<20))
			assert.Less(t, longest, 4096, "an error or log line is not bounded")
			assert.Zero(t, newlines, "newlines in records' errors")
			assert.Zero(t, forgedLines, "log lines forged by the broker")
			assert.Equal(t, records, len(lines), "a log record spans several lines")
			assert.Less(t, grown, int64(64<<20), "the heap keeps the broker's text")
			for _, err := range errs {
				if !errors.Is(err, tc.want) && !errors.Is(err, producer.ErrDeliveryTimeout) {
					t.Errorf("a record failed with %.300v, want %v", err, tc.want)
				}
			}
			runtime.KeepAlive(errs)
		})
	}
}

// TestBrokerTextNeverShowsSecrets: a broker whose authentication failure
// message quotes what the client sent (PLAIN's "\x00user\x00password"
// message, in the clear or base64, a SCRAM password, an OAUTHBEARER token)
// gets no secret into a record's error, a log line, Ping's or Close's
// error: the
// mechanisms name their secrets (sasl.SecretHolder) and broker text is
// scrubbed of them. Before, the password was in all 10 record errors and 2
// log lines.
func TestBrokerTextNeverShowsSecrets(t *testing.T) {
	cl, ca := secureCluster(t, 0)
	plainMsg := "\x00alice\x00alice-secret"
	cases := []struct {
		name   string
		mech   sasl.Mechanism
		echo   string
		secret string
	}{
		{"PLAIN message", sasl.Plain("alice", "alice-secret"), "bad message " + plainMsg, "alice-secret"},
		{"PLAIN message, base64", sasl.Plain("alice", "alice-secret"), "bad message " + base64.StdEncoding.EncodeToString([]byte(plainMsg)), base64.StdEncoding.EncodeToString([]byte(plainMsg))},
		{"SCRAM password", sasl.ScramSHA512("carol", "carol-secret"), "the password carol-secret is wrong", "carol-secret"},
		{"OAUTHBEARER token", sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
			return sasl.Token{Value: "dave-secret-token"}, nil
		}), "n,,\x01auth=Bearer dave-secret-token\x01\x01 is not valid", "dave-secret-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := "Authentication failed: " + tc.echo
			remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{36}, After: true, Rewrite: func(r kmsg.Response) {
				resp := r.(*kmsg.SASLAuthenticateResponse)
				resp.ErrorCode, resp.ErrorMessage, resp.SASLAuthBytes = 58, &msg, nil
			}})
			defer remove()
			logs := newRawLines()
			errs, others := produceAgainst(t, producer.Config{
				Brokers: cl.ListenerAddrs(testbroker.SASLSSL), TLS: ca.ClientConfig(), SASL: tc.mech,
			}, logs)
			for _, err := range errs {
				require.ErrorIs(t, err, producer.ErrAuthentication)
				assert.Contains(t, err.Error(), "[redacted]")
				assert.NotContains(t, err.Error(), tc.secret, "a record's error")
			}
			for _, err := range others {
				if err != nil {
					assert.NotContains(t, err.Error(), tc.secret, "Ping's or Close's error")
				}
			}
			lines, _ := logs.lines()
			for _, l := range lines {
				assert.NotContains(t, l, tc.secret, "a log line")
			}
		})
	}
}

// TestBrokerHostsFromMetadataAreChecked: a Metadata answer that advertises
// the partition's leader at a host that cannot be one (1 MiB long, with a
// newline) leaves that broker out: it is neither dialed nor printed in
// records' errors and log lines, which stay bounded; its rack and the
// cluster id are bounded too. The records wait for a leader and fail at
// DeliveryTimeout.
func TestBrokerHostsFromMetadataAreChecked(t *testing.T) {
	cl, _ := secureCluster(t, 0)
	const forged = "\nERROR forged line"
	host := "broker" + forged + strings.Repeat("h", 1<<20)
	rack := "rack" + forged + strings.Repeat("r", 1<<20)
	remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		resp.ClusterID = &rack
		for i := range resp.Brokers {
			resp.Brokers[i].Host, resp.Brokers[i].Rack = host, &rack
		}
	}})
	defer remove()
	logs := newRawLines()
	errs, others := produceAgainst(t, producer.Config{Brokers: cl.ListenerAddrs(testbroker.Plaintext), DeliveryTimeout: 2 * time.Second}, logs)
	lines, records := logs.lines()
	var longest, forgedLines int
	for _, err := range append(errs, others...) {
		if err != nil {
			longest = max(longest, len(err.Error()))
		}
	}
	for _, l := range lines {
		longest = max(longest, len(l))
		if strings.HasPrefix(l, "ERROR forged") {
			forgedLines++
		}
	}
	t.Logf("longest error or log line %d bytes; %d log records", longest, records)
	assert.Less(t, longest, 4096, "an error or log line is not bounded")
	assert.Zero(t, forgedLines, "log lines forged by the broker")
	assert.Equal(t, records, len(lines), "a log record spans several lines")
	for _, err := range errs {
		if !errors.Is(err, producer.ErrDeliveryTimeout) {
			t.Errorf("a record failed with %.300v, want ErrDeliveryTimeout", err)
		}
	}
}
