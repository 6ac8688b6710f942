package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestSendContextEndingWhileBuffering with a spool: a Send context that ends
// while the record is being buffered fails the record with its error (the
// sweep is asked for again after the append), not after MaxBlock or Linger.
func TestSpoolContextEndingWhileBuffering(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		create bool
	}{
		{name: "parked", cfg: Config{MaxBlock: time.Minute, DeliveryTimeout: 2 * time.Minute, Linger: time.Millisecond}},
		{name: "open batch", cfg: Config{Linger: time.Minute}, create: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{})
			if tc.create {
				require.NoError(t, c.CreateTopic("ctx", 1))
			}
			sp, err := bufferpool.New(bufferpool.Options{Size: 8 << 20})
			require.NoError(t, err)
			pool := &endingPool{Pool: sp}
			tc.cfg.BufferPool = pool
			tc.cfg.Spool = &SpoolConfig{Dir: t.TempDir()}
			p := newProducer(t, c, tc.cfg)
			pool.p = p
			ctx, cancel := context.WithCancel(context.Background())
			pool.cancel.Store(&cancel)
			f := p.Send(ctx, &Record{Topic: "ctx", Value: []byte("b")})
			require.Nil(t, pool.cancel.Load(), "Send did not wait for memory")
			_, err = waitFuture(t, f, 5*time.Second)
			require.ErrorIs(t, err, context.Canceled)
		})
	}
}
