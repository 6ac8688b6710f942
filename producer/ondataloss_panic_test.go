package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
)

// TestPanickingOnDataLossIsRecovered: Config.OnDataLoss is user code
// (DESIGN.md invariant 9 lists it with partitioners, callbacks and hooks)
// that runs on the IO goroutine from sink.checkLogStart; like every other
// user callback, a panic in it is recovered and logged (it used to kill
// the process).
//
// Interleaving: 10 records acknowledged, DeleteRecords moves the log start
// past them, the next Produce answer carries the new log start: the IO
// goroutine calls OnDataLoss, which panics. Run in a child process, which
// must exit normally.
func TestPanickingOnDataLossIsRecovered(t *testing.T) {
	testutil.InChild(t, "SAMSA_DATALOSS_PANIC_CHILD", panickingDataLossScenario)
}

func panickingDataLossScenario(t *testing.T) {
	c, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.CreateTopic("loss", 1))
	p, err := New(Config{Brokers: c.Addrs(), OnDataLoss: func(*DataLossError) { panic("OnDataLoss bug") }})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var fs []*Future
	for range 10 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "loss", Value: []byte("v")}))
	}
	for _, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, c.DeleteRecordsBefore("loss", 0, 10))
	_, err = p.Send(ctx, &Record{Topic: "loss", Value: []byte("after")}).Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
}
