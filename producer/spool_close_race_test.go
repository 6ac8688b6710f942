package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// TestSpoolPersistedAgreesWithTheLogWhenSendRacesClose guards the rule
// Future.Persisted follows whatever Close does meanwhile: a delivered
// record's Persisted is closed; a record that failed with an error that
// keeps it (ErrClosed, ErrOutcomeUnknown) has it closed if and only if
// the record is in the spool for the next New. Before, a Send whose
// record was written while Close stopped the persister (SyncAlways) left
// Persisted open for a record the log kept, or that was delivered.
func TestSpoolPersistedAgreesWithTheLogWhenSendRacesClose(t *testing.T) {
	cases := []struct {
		name   string
		sync   spool.SyncPolicy
		abrupt bool // Close's ctx already ended: the shutdown fails what is buffered
	}{
		{name: "always", sync: spool.SyncAlways},
		{name: "always, close at once", sync: spool.SyncAlways, abrupt: true},
		{name: "interval", sync: spool.SyncInterval},
		{name: "interval, close at once", sync: spool.SyncInterval, abrupt: true},
	}
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for round := range rounds {
				checkSendRacingClose(t, tc.sync, tc.abrupt, round)
			}
		})
	}
}

func checkSendRacingClose(t *testing.T, pol spool.SyncPolicy, abrupt bool, round int) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	dir := t.TempDir()
	p := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.Sync = pol
		if abrupt {
			// Little memory: Sends wait for it after their record is
			// in the spool, and Close wakes them.
			cfg.BufferMemory, cfg.BatchSize = 64<<10, 16<<10
		}
	})
	// Widen the race: some Sends pause between the append to memory and
	// Persisted, as a descheduled goroutine would, while Close runs.
	var calls atomic.Int64
	p.spoolAppended = func() {
		if calls.Add(1)%5 == 0 {
			time.Sleep(3 * time.Millisecond)
		}
	}
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)

	const senders, most = 8, 3000
	type sent struct {
		value string
		f     *Future
	}
	pad := make([]byte, 1000)
	var mu sync.Mutex
	var all []sent
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range most {
				v := fmt.Sprintf("r%d-g%d-%d", round, g, i)
				f := p.Send(context.Background(), &Record{Topic: "t", Value: append([]byte(v), pad...)})
				mu.Lock()
				all = append(all, sent{v, f})
				mu.Unlock()
				if _, ok, err := f.Result(); ok && errors.Is(err, ErrClosed) {
					return
				}
			}
		}()
	}
	close(start)
	time.Sleep(time.Duration(1+round%4) * time.Millisecond)
	ctx := context.Background()
	if abrupt {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ctx = cctx
	}
	_ = p.Close(ctx)
	wg.Wait()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range all {
		select {
		case <-s.f.Done():
		case <-wctx.Done():
			t.Fatalf("record %s never completed", s.value)
		}
	}
	kept := map[string]bool{}
	for _, v := range reopenUnacked(t, dir) {
		kept[v[:len(v)-len(pad)]] = true
	}
	var delivered, persistedFailed, keptN int
	for _, s := range all {
		_, _, err := s.f.Result()
		persisted := false
		select {
		case <-s.f.Persisted():
			persisted = true
		default:
		}
		if kept[s.value] {
			keptN++
		}
		switch {
		case err == nil:
			delivered++
			require.Truef(t, persisted, "record %s delivered, its Persisted still open", s.value)
			require.Falsef(t, kept[s.value], "record %s delivered, still in the spool", s.value)
		case spoolFinal(err):
			// Failed for good: never sent again, whatever Persisted says.
			require.Falsef(t, kept[s.value], "record %s failed for good (%v), still in the spool", s.value, err)
		default:
			if persisted {
				persistedFailed++
			}
			require.Equalf(t, kept[s.value], persisted, "record %s failed (%v): in the spool %v, Persisted closed %v", s.value, err, kept[s.value], persisted)
		}
	}
	t.Logf("round %d: %d records, %d delivered, %d failed and persisted, %d in the spool", round, len(all), delivered, persistedFailed, keptN)
}
