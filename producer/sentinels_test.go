package producer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/spool"
)

// sentinelNames are the sentinels errors.go documents, by name.
var sentinelNames = []struct {
	name string
	err  error
}{
	{"ErrBufferExhausted", ErrBufferExhausted},
	{"ErrClosed", ErrClosed},
	{"ErrRecordTooLarge", ErrRecordTooLarge},
	{"ErrDeliveryTimeout", ErrDeliveryTimeout},
	{"ErrInvalidRecord", ErrInvalidRecord},
	{"ErrFlushInCallback", ErrFlushInCallback},
	{"ErrInvalidConfig", ErrInvalidConfig},
	{"ErrAuthentication", ErrAuthentication},
	{"ErrOutcomeUnknown", ErrOutcomeUnknown},
	{"ErrSpoolFailed", ErrSpoolFailed},
	{"ErrPurged", ErrPurged},
}

// sentinelsOf lists the sentinels err wraps, in sentinelNames' order.
func sentinelsOf(err error) []string {
	var out []string
	for _, s := range sentinelNames {
		if errors.Is(err, s.err) {
			out = append(out, s.name)
		}
	}
	return out
}

// sendThrough sends one record to topic "s" on c with a producer of cfg,
// after installing the interceptors, and returns the record's error.
func sendThrough(t *testing.T, c *testbroker.Cluster, cfg Config, ics ...testbroker.Interceptor) error {
	p := newProducer(t, c, cfg)
	for _, ic := range ics {
		c.Intercept(ic)
	}
	_, err := waitFuture(t, p.Send(context.Background(), &Record{Topic: "s", Value: []byte("x")}), 10*time.Second)
	return err
}

// TestSentinelCombinations protects errors.go's rule on which sentinels an
// error wraps: one at most, except ErrOutcomeUnknown, which qualifies the
// error of a record that may have been written. The errors are the
// producer's own, from a broker that misbehaves on purpose.
func TestSentinelCombinations(t *testing.T) {
	dropAll := func(resp kmsg.Response) { resp.(*kmsg.ProduceResponse).Topics = nil }
	short := Config{DisableIdempotence: true, DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond, Linger: time.Millisecond}
	cases := []struct {
		name string
		// run returns the error of a record sent to topic "s" on c.
		run      func(t *testing.T, c *testbroker.Cluster) error
		want     []string
		wantCode *kerr.Error // a Kafka code the error must match too; nil for none
	}{
		{
			name: "answer without the partition: timeout, outcome unknown",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				return sendThrough(t, c, short,
					testbroker.Interceptor{Keys: []int16{0}, After: true, Rewrite: dropAll})
			},
			want: []string{"ErrDeliveryTimeout", "ErrOutcomeUnknown"},
		},
		{
			name: "refused before writing: timeout with the code, definitely not written",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				return sendThrough(t, c, short,
					testbroker.Interceptor{Keys: []int16{0}, ErrorCode: kerr.NotEnoughReplicas.Code})
			},
			want:     []string{"ErrDeliveryTimeout"},
			wantCode: kerr.NotEnoughReplicas,
		},
		{
			name: "rejected for good: the Kafka error alone",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				return sendThrough(t, c, short,
					testbroker.Interceptor{Keys: []int16{0}, ErrorCode: kerr.InvalidRecord.Code})
			},
			wantCode: kerr.InvalidRecord,
		},
		{
			name: "refused after an attempt that may have been written: the Kafka error, outcome unknown",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				return sendThrough(t, c, short,
					testbroker.Interceptor{Keys: []int16{0}, Times: 1, After: true, ErrorCode: kerr.RequestTimedOut.Code},
					testbroker.Interceptor{Keys: []int16{0}, ErrorCode: kerr.InvalidRecord.Code})
			},
			want:     []string{"ErrOutcomeUnknown"},
			wantCode: kerr.InvalidRecord,
		},
		{
			name: "written, then Close gives up on the answer: closed, outcome unknown",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, Config{DisableIdempotence: true, Linger: time.Millisecond})
				var once sync.Once
				arrived := make(chan struct{})
				c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Stall: true,
					Match: func(int32, kmsg.Request) bool { once.Do(func() { close(arrived) }); return true }})
				f := p.Send(context.Background(), &Record{Topic: "s", Value: []byte("x")})
				<-arrived
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				assert.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
				_, err := waitFuture(t, f, 10*time.Second)
				return err
			},
			want: []string{"ErrClosed", "ErrOutcomeUnknown"},
		},
		{
			name: "sent after Close: closed, not written",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, short)
				require.NoError(t, p.Close(context.Background()))
				return futErr(p.Send(context.Background(), &Record{Topic: "s", Value: []byte("x")}))
			},
			want: []string{"ErrClosed"},
		},
		{
			name: "spool full: buffer exhausted alone",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, Config{MaxBlock: NoWait, Spool: &SpoolConfig{Dir: t.TempDir(), MaxBytes: 4 << 10, SegmentBytes: 1 << 10}})
				for id := range int32(3) {
					require.NoError(t, c.StopBroker(id))
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					defer cancel()
					p.Close(ctx) // the records stay in the spool
				}()
				for range 100 {
					if _, done, err := p.Send(context.Background(), &Record{Topic: "s", Value: make([]byte, 512)}).Result(); done {
						return err
					}
				}
				return nil
			},
			want: []string{"ErrBufferExhausted"},
		},
		{
			name: "spool fsync failed: spool failed alone",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				dir := t.TempDir()
				faults, unregister := spoolfault.Register(dir)
				defer unregister()
				p := newProducer(t, c, Config{Spool: &SpoolConfig{Dir: dir, Sync: spool.SyncAlways}})
				faults.SetSyncErr(syscall.EIO)
				p.Send(context.Background(), &Record{Topic: "s", Value: []byte("unsynced")})
				require.Error(t, p.SyncSpool())
				return futErr(p.Send(context.Background(), &Record{Topic: "s", Value: []byte("x")}))
			},
			want: []string{"ErrSpoolFailed"},
		},
		{
			name: "purged before it was sent: purged alone, not written",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, Config{DisableIdempotence: true, Linger: time.Minute})
				f := p.Send(context.Background(), &Record{Topic: "s", Value: []byte("x")})
				_, err := p.Purge(context.Background())
				require.NoError(t, err)
				return futErr(f)
			},
			want: []string{"ErrPurged"},
		},
		{
			name: "ctx ended before it was sent: the ctx's error alone",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, Config{DisableIdempotence: true, Linger: time.Minute})
				ctx, cancel := context.WithCancel(context.Background())
				f := p.Send(ctx, &Record{Topic: "s", Value: []byte("x")})
				cancel()
				_, err := waitFuture(t, f, 10*time.Second)
				require.ErrorIs(t, err, context.Canceled)
				return err
			},
		},
		{
			name: "invalid topic name",
			run: func(t *testing.T, c *testbroker.Cluster) error {
				p := newProducer(t, c, short)
				return futErr(p.Send(context.Background(), &Record{Topic: "no spaces"}))
			},
			want: []string{"ErrInvalidRecord"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			require.NoError(t, c.CreateTopic("s", 1))
			err := tc.run(t, c)
			require.Error(t, err)
			assert.Equal(t, tc.want, sentinelsOf(err), "error: %v", err)
			assert.LessOrEqual(t, strings.Count(err.Error(), "producer: "), 1, "the package is named once: %v", err)
			var ke *KafkaError
			if tc.wantCode == nil {
				assert.False(t, errors.As(err, &ke), "error: %v", err)
			} else {
				assert.ErrorIs(t, err, tc.wantCode)
			}
		})
	}
}
