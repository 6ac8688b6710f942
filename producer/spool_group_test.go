package producer

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// Send puts a spooled record in the spool's write buffer: Future.Persisted
// closes once the spool's writer has it in the file (under none and
// interval; before, when Send returned), never while the write is held,
// and SyncSpool waits for the write too.
func TestSpoolPersistedOnceInTheFile(t *testing.T) {
	cases := []struct {
		name string
		sync spool.SyncPolicy
	}{
		{"none", spool.SyncNone},
		{"interval", spool.SyncInterval},
		{"always", spool.SyncAlways},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			faults, unregister := spoolfault.Register(dir)
			defer unregister()
			p := spoolProducer(t, c, dir, func(cfg *Config) { cfg.Spool.Sync = tc.sync })
			defer p.Close(context.Background())
			release := faults.HoldWrites()
			defer release()
			var fs []*Future
			for range 5 {
				fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte("held")}))
			}
			synced := make(chan error, 1)
			go func() { synced <- p.SyncSpool() }()
			select {
			case <-fs[0].Persisted():
				t.Fatal("Persisted closed while the record's write is held")
			case err := <-synced:
				t.Fatalf("SyncSpool returned (%v) while the records' write is held", err)
			case <-time.After(100 * time.Millisecond):
			}
			assert.Equal(t, uint64(0), p.spool.Written(), "Written while the first write is held")
			release()
			for i, f := range fs {
				select {
				case <-f.Persisted():
				case <-time.After(5 * time.Second):
					t.Fatalf("record %d not persisted 5 s after the write was released", i)
				}
			}
			select {
			case err := <-synced:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("SyncSpool still waiting 5 s after the write was released")
			}
			assert.GreaterOrEqual(t, p.spool.Persisted(), uint64(5))
		})
	}
}

// A failed write of the spool's buffer stops the spool: the records of
// the failed group (Sends that had returned) are never reported
// persisted, later Sends fail with ErrSpoolFailed, and so do SyncSpool and
// Close.
func TestSpoolWriteFailureStopsIt(t *testing.T) {
	for _, policy := range []spool.SyncPolicy{spool.SyncInterval, spool.SyncAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			faults, unregister := spoolfault.Register(dir)
			defer unregister()
			p := spoolProducer(t, c, dir, func(cfg *Config) { cfg.Spool.Sync = policy })
			ok := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("before")})
			select {
			case <-ok.Persisted():
			case <-time.After(5 * time.Second):
				t.Fatal("not persisted with a working disk")
			}
			release := faults.HoldWrites()
			defer release()
			var group []*Future
			for range 5 {
				f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("in the failed group")})
				_, done, err := f.Result()
				require.False(t, done && err != nil, "Send failed before the write did: %v", err)
				group = append(group, f)
			}
			faults.SetWriteErr(syscall.EIO)
			release()
			var failed error
			deadline := time.Now().Add(5 * time.Second)
			for failed == nil && time.Now().Before(deadline) {
				f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})
				if _, done, err := f.Result(); done && err != nil {
					failed = err
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.Error(t, failed, "no Send failed after the write failure")
			assert.ErrorIs(t, failed, ErrSpoolFailed)
			assert.ErrorIs(t, failed, spool.ErrFailed)
			assert.ErrorIs(t, failed, syscall.EIO)
			err := p.SyncSpool()
			assert.ErrorIs(t, err, ErrSpoolFailed)
			assert.ErrorIs(t, err, syscall.EIO)
			for i, f := range group {
				select {
				case <-f.Persisted():
					t.Fatalf("record %d of the failed write is reported persisted", i)
				default:
				}
			}
			assert.ErrorIs(t, p.Close(context.Background()), ErrSpoolFailed, "Close reports the failed spool")
			faults.SetWriteErr(nil)
		})
	}
}
