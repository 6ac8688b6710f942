package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// Under SyncAlways a record of SendCallback or SendTo (no Future, no
// Persisted channel) is fsynced by the persister as a Future's is, not
// only at the spool's next SyncInterval (an hour here) or a SyncSpool.
func TestSpoolSyncAlwaysFsyncsCallbackRecords(t *testing.T) {
	cases := []struct {
		name string
		send func(p *Producer, rec *Record)
	}{
		{"SendCallback", func(p *Producer, rec *Record) { p.SendCallback(context.Background(), rec, nil) }},
		{"SendTo", func(p *Producer, rec *Record) {
			p.SendTo(context.Background(), rec, make(chan Result, 100))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			p := newProducer(t, c, Config{Spool: &SpoolConfig{Dir: t.TempDir(), Sync: spool.SyncAlways, SyncInterval: time.Hour}})
			for range 100 {
				tc.send(p, &Record{Topic: "t", Value: []byte("x")})
			}
			require.Eventually(t, func() bool { return p.spool.Persisted() == 100 }, 5*time.Second, 5*time.Millisecond,
				"records fsynced: %d of 100", p.spool.Persisted())
		})
	}
}
