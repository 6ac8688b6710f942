package producer

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
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
	if os.Getenv("SAMSA_DATALOSS_PANIC_CHILD") == "1" {
		panickingDataLossScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanickingOnDataLossIsRecovered$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAMSA_DATALOSS_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := string(out)
		if len(lines) > 600 {
			lines = lines[:600]
		}
		t.Fatalf("the producer's process crashed on a panicking OnDataLoss (%v):\n%s", err, lines)
	}
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
