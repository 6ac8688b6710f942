package producer

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// TestSpoolRecordMemoryRefusedAfterTheSpoolFailed forces sendSpooled's
// branch where the record is in the spool, memory refuses it, and the
// spool can no longer take it out (Spool.Ack reports false): the spool
// failed (an fsync) while the Send waited for memory, then the Send's ctx
// ended. The record stays in the log and the next New sends it again, so
// its error must say so (ErrSpoolFailed wrapping spool.ErrFailed, the I/O
// error and the ctx's) and its Persisted follows the log (closed under
// SyncInterval; under SyncAlways open, as after any failed fsync).
// Before, a failed spool's Ack reported true and the record failed with
// its ctx error alone although the next New sent it.
func TestSpoolRecordMemoryRefusedAfterTheSpoolFailed(t *testing.T) {
	cases := []struct {
		name          string
		sync          spool.SyncPolicy
		wantPersisted bool
	}{
		{"interval", spool.SyncInterval, true},
		{"always", spool.SyncAlways, false}, // no Sync succeeds after the failure
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			faults, unregister := spoolfault.Register(dir)
			defer unregister()
			p := spoolProducer(t, c, dir, func(cfg *Config) {
				cfg.Spool.Sync = tc.sync
				cfg.BufferMemory, cfg.BatchSize = 64<<10, 16<<10
				cfg.MaxBlock = 30 * time.Second
			})
			_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
			require.NoError(t, err)
			leader, _, err := c.Leader("t", 0)
			require.NoError(t, err)
			require.NoError(t, c.StopBroker(leader))

			// Fill memory: nothing is delivered with the broker down.
			pad := make([]byte, 4<<10)
			full := false
			for range 1000 {
				_, done, err := p.TrySend(context.Background(), &Record{Topic: "t", Value: pad}).Result()
				if done && errors.Is(err, ErrBufferExhausted) {
					full = true
					break
				}
			}
			require.True(t, full, "memory never filled")

			appended := p.spool.Metrics().Appended
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// As large as the record memory refused: it waits, in Send.
			sent := make(chan *Future, 1)
			go func() { sent <- p.Send(ctx, &Record{Topic: "t", Value: append([]byte("victim"), pad...)}) }()
			deadline := time.Now().Add(10 * time.Second)
			for p.spool.Metrics().Appended == appended {
				require.True(t, time.Now().Before(deadline), "the Send never wrote the spool")
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // let it reach the wait for memory
			select {
			case f := <-sent:
				_, _, err := f.Result()
				t.Fatalf("the Send did not wait for memory: %v", err)
			default:
			}
			faults.SetSyncErr(syscall.EIO)
			// A record written after the last fsync: the next fails.
			p.TrySend(context.Background(), &Record{Topic: "t", Value: pad})
			require.ErrorIs(t, p.SyncSpool(), ErrSpoolFailed)
			cancel()
			var victim *Future
			select {
			case victim = <-sent:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting Send never returned")
			}
			select {
			case <-victim.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the record never completed")
			}
			_, _, err = victim.Result()
			for _, want := range []error{ErrSpoolFailed, spool.ErrFailed, syscall.EIO, context.Canceled} {
				require.ErrorIs(t, err, want)
			}
			persisted := false
			select {
			case <-victim.Persisted():
				persisted = true
			case <-time.After(100 * time.Millisecond):
			}
			require.Equal(t, tc.wantPersisted, persisted, "Persisted closed")
			ended, stop := context.WithCancel(context.Background())
			stop()
			_ = p.Close(ended) // the broker is down: do not wait for delivery
			faults.SetSyncErr(nil)
			unregister()
			found := false
			for _, v := range reopenUnacked(t, dir) {
				found = found || strings.HasPrefix(v, "victim")
			}
			require.True(t, found, "the record is not in the spool for the next New")
		})
	}
}
