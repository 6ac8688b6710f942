package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Close waits for the replay goroutine: no RecoveryHook call after Close
// returns, and a Close called from RecoveryHook (on the replay goroutine)
// returns ErrClosed at once instead of waiting for itself. The record the
// replay held when Close came fails with ErrClosed (it stays in the
// spool), also when the replay was waiting for memory.
func TestSpoolCloseWaitsForTheReplay(t *testing.T) {
	cases := []struct {
		name        string
		closeInHook bool
		maxBlock    time.Duration
	}{
		{"a slow RecoveryHook", false, 0},
		{"Close from RecoveryHook", true, 0},
		// The cluster goes away: the replay retries memory every 100 ms
		// until Close, which ends that wait with ErrClosed, not
		// ErrBufferExhausted.
		{"Close while the replay waits for memory", false, NoWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			a := spoolProducer(t, c, dir, nil)
			require.NoError(t, c.StopBroker(0))
			for i := range 3000 {
				<-a.Send(context.Background(), &Record{Topic: "t", Value: append([]byte(fmt.Sprint(i)), make([]byte, 1000)...)}).Persisted()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_ = a.Close(ctx) // leaves the 3000 records in the spool
			cancel()
			require.NoError(t, c.RestartBroker(0))

			var closed atomic.Bool
			var late atomic.Int64
			var hookClose atomic.Value
			var bp atomic.Pointer[Producer]
			var onReplay atomic.Int64
			b := spoolProducer(t, c, dir, func(cfg *Config) {
				cfg.BufferMemory = 64 << 10
				cfg.BatchSize = 16 << 10
				cfg.MaxBlock = tc.maxBlock
				cfg.Spool.RecoveryHook = func(seq uint64, md RecordMetadata, err error) {
					b := bp.Load()
					if errors.Is(err, ErrClosed) && b != nil && goroutineID() == b.drain.goid.Load() {
						onReplay.Add(1)
						if tc.closeInHook {
							hookClose.Store(fmt.Sprint(b.Close(context.Background())))
						} else {
							time.Sleep(100 * time.Millisecond)
						}
					}
					if closed.Load() {
						late.Add(1)
					}
				}
			})
			bp.Store(b)
			time.Sleep(2 * time.Millisecond)
			closeDone := make(chan error, 1)
			closeCtx := context.Background()
			if tc.maxBlock == NoWait {
				require.NoError(t, c.StopBroker(0))
				time.Sleep(300 * time.Millisecond) // the replay fills memory and waits
				var cancel context.CancelFunc
				closeCtx, cancel = context.WithTimeout(closeCtx, 200*time.Millisecond)
				defer cancel()
			}
			go func() { closeDone <- b.Close(closeCtx) }()
			select {
			case <-closeDone:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return in 10 s")
			}
			closed.Store(true)
			select {
			case <-b.drain.exited:
			default:
				t.Fatal("the replay goroutine still runs after Close returned")
			}
			time.Sleep(200 * time.Millisecond)
			require.Zero(t, late.Load(), "RecoveryHook calls after Close returned")
			require.Equal(t, int64(1), onReplay.Load(), "RecoveryHook calls with ErrClosed on the replay goroutine (the replay was over before Close?)")
			if tc.closeInHook {
				require.Contains(t, hookClose.Load(), ErrClosed.Error())
			}
		})
	}
}
