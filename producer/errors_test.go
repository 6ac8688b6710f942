package producer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/kerr"
)

// The producer re-exports the pool's sentinel, so a Send error from the pool
// matches producer.ErrBufferExhausted.
func TestErrBufferExhaustedIsThePoolsSentinel(t *testing.T) {
	err := fmt.Errorf("waited 60s for 16384 bytes: %w", bufferpool.ErrBufferExhausted)
	assert.ErrorIs(t, err, ErrBufferExhausted)
	assert.Same(t, bufferpool.ErrBufferExhausted, ErrBufferExhausted)
}

func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{ErrBufferExhausted, ErrClosed, ErrRecordTooLarge, ErrDeliveryTimeout, ErrInvalidRecord, ErrInvalidConfig, ErrFlushInCallback, ErrOutcomeUnknown, ErrAuthentication,
		ErrProducerFenced, ErrTransactionAborted, ErrNoTransaction, ErrTransactionInProgress}
	for i, a := range all {
		for j, b := range all {
			if i != j {
				assert.NotErrorIs(t, a, b, "%v must not match %v", a, b)
			}
		}
	}
}

func TestIsRetriable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("boom"), false},
		{"retriable kafka error", kerr.NotLeaderOrFollower, true},
		{"retriable with broker message", kerr.NotLeaderOrFollower.WithMessage("leader moved"), true},
		{"wrapped by delivery timeout", fmt.Errorf("%w: last error: %w", ErrDeliveryTimeout, kerr.RequestTimedOut), true},
		{"not retriable", kerr.TopicAuthorizationFailed, false},
		{"from ForCode", kerr.ForCode(19), true}, // NOT_ENOUGH_REPLICAS
		{"sentinel", ErrClosed, false},
		{"delivery timeout without a code", fmt.Errorf("%w: no leader available (last error: %w)", ErrDeliveryTimeout, errors.New("dial tcp: connection refused")), true},
		{"delivery timeout, outcome unknown", fmt.Errorf("%w: still in flight (%w)", ErrDeliveryTimeout, ErrOutcomeUnknown), true},
		{"delivery timeout over a final code", fmt.Errorf("%w: topic not present in metadata: %w", ErrDeliveryTimeout, kerr.TopicAuthorizationFailed), false},
		{"buffer full", fmt.Errorf("bufferpool: waited 1s: %w", ErrBufferExhausted), true},
		{"closed over a retriable code", fmt.Errorf("%w: t[0]: %w", ErrClosed, kerr.NotLeaderOrFollower), false},
		{"authentication", fmt.Errorf("conn: b:9092: SASL PLAIN: %w: %w", ErrAuthentication, kerr.SASLAuthenticationFailed), false},
		{"invalid record", fmt.Errorf("%w: empty topic name", ErrInvalidRecord), false},
		{"context", context.DeadlineExceeded, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, IsRetriable(tc.err), "%v", tc.err)
		})
	}
}

// A user gets the code and name of a broker error from a future's error.
func TestKafkaErrorAs(t *testing.T) {
	err := fmt.Errorf("%w: %w", ErrDeliveryTimeout, kerr.TopicAuthorizationFailed.WithMessage("denied"))
	var ke *KafkaError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, int16(29), ke.Code)
	assert.Equal(t, "TOPIC_AUTHORIZATION_FAILED", ke.Name)
	assert.False(t, ke.Retriable)
	assert.ErrorIs(t, err, ErrDeliveryTimeout)
}

func TestValidateTopic(t *testing.T) {
	cases := []struct {
		name    string
		topic   string
		wantErr string // substring of the error; "" = valid
	}{
		{"simple", "orders", ""},
		{"all legal characters", "a-Z_0.9", ""},
		{"dots inside", "a..b", ""},
		{"single dot prefix", ".hidden", ""},
		{"max length", strings.Repeat("x", 249), ""},
		{"empty", "", "empty topic name"},
		{"too long", strings.Repeat("x", 250), "250 characters long"},
		{"dot", ".", `"." is not allowed`},
		{"dot dot", "..", `".." is not allowed`},
		{"space", "my topic", `illegal character ' ' at byte 2`},
		{"slash", "a/b", `illegal character '/'`},
		{"non-ascii", "tópico", "illegal character"},
		{"nul", "a\x00", "illegal character"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validateTopic(tc.topic)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestValidateTopicValidDoesNotAllocate(t *testing.T) {
	topic := strings.Repeat("abc.DEF_123-", 20)
	allocs := testing.AllocsPerRun(100, func() {
		if validateTopic(topic) != nil {
			t.Fatal("valid topic rejected")
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkValidateTopic(b *testing.B) {
	topic := "orders.eu-west-1_v2"
	b.ReportAllocs()
	for b.Loop() {
		if validateTopic(topic) != nil {
			b.Fatal("invalid")
		}
	}
}

// validateTopic agrees with Kafka's rule written as a regular expression,
// and never panics.
func FuzzValidateTopic(f *testing.F) {
	for _, s := range []string{"orders", "", ".", "..", "a b", strings.Repeat("x", 249), strings.Repeat("x", 250), "é"} {
		f.Add(s)
	}
	legal := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	f.Fuzz(func(t *testing.T, name string) {
		want := legal.MatchString(name) && name != "." && name != ".."
		err := validateTopic(name)
		if (err == nil) != want {
			t.Fatalf("validateTopic(%q) = %v, want valid=%v", name, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("error does not wrap ErrInvalidRecord: %v", err)
		}
	})
}

// TestErrorMessages pins the text of representative errors: each names its
// package once ("producer: producer: invalid config" read badly), then the
// field or rule.
func TestErrorMessages(t *testing.T) {
	newErr := func(cfg Config) error {
		p, err := New(cfg)
		if err == nil {
			_ = p.Close(context.Background())
		}
		return err
	}
	propsErr := func(props map[string]string) error {
		_, err := ConfigFromProperties(props)
		return err
	}
	cases := []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"no brokers", newErr(Config{}),
			"producer: invalid config: Brokers: at least one bootstrap broker is required", ErrInvalidConfig},
		{"unsupported codec", newErr(Config{Brokers: []string{"b:9092"}, Compression: compression.Type(9)}),
			"producer: invalid config: Compression: unsupported type compression(9)", ErrInvalidConfig},
		{"unsupported level", newErr(Config{Brokers: []string{"b:9092"}, Compression: compression.Zstd, CompressionLevel: 99}),
			"producer: invalid config: CompressionLevel: unsupported zstd level 99 (valid: -131072 to 22, or 0 for the default 3)", ErrInvalidConfig},
		{"codec property", propsErr(map[string]string{"bootstrap.servers": "b:9092", "compression.type": "brotli"}),
			`producer: invalid config: compression.type: "brotli" is not one of none, gzip, snappy, lz4, zstd`, ErrInvalidConfig},
		{"empty topic", validateTopic(""), "producer: invalid record: empty topic name", ErrInvalidRecord},
		{"outcome unknown qualifier", fmt.Errorf("%w: 1 records for t[0] not acknowledged after 1s (%w)", ErrDeliveryTimeout, ErrOutcomeUnknown),
			"producer: delivery timeout: 1 records for t[0] not acknowledged after 1s (outcome unknown, the record may have been written)", ErrOutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.Equal(t, tc.want, tc.err.Error())
			assert.ErrorIs(t, tc.err, tc.is)
		})
	}
}
