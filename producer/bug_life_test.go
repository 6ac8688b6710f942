package producer

import (
	"context"
	"os"
	"os/exec"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// growPanicPool is a user's bufferpool.Pool (the default pool underneath)
// whose TryAllocate panics once armed: a custom pool with a bug.
type growPanicPool struct {
	*bufferpool.SimplePool
	armed atomic.Bool
}

func (p *growPanicPool) TryAllocate(size int) []byte {
	if p.armed.Load() {
		panic("custom pool bug")
	}
	return p.SimplePool.TryAllocate(size)
}

// TestBugPanickingPoolLeavesPartitionLocked: a custom BufferPool whose
// TryAllocate panics while a batch grows.
//
// Interleaving: Send 1 opens the partition's batch (16 KiB, the pool's
// PooledSize) and it lingers. Send 2's record does not fit the open
// batch, so Partition.Append calls growLocked with Partition.mu held
// (accumulator/partition.go: Append locks p.mu and unlocks it by hand, no
// defer); growLocked calls Pool.TryAllocate, which panics. The panic
// unwinds out of Send (the caller recovers it, as net/http does for a
// handler) with Partition.mu still locked. From then on every Send to the
// partition, and the IO goroutine's Seal/sealOpen of it (Flush, linger,
// Close), blocks on that mutex forever: Close waits for <-p.ioDone without
// any bound, so even Close with an ended context never returns.
func TestBugPanickingPoolLeavesPartitionLocked(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("grow", 1))
	sp, err := bufferpool.New(bufferpool.Options{Size: 8 << 20})
	require.NoError(t, err)
	pool := &growPanicPool{SimplePool: sp}
	p, err := New(Config{
		Brokers:         c.Addrs(),
		BufferPool:      pool,
		BatchSize:       64 << 10,
		Linger:          5 * time.Second,
		DeliveryTimeout: 60 * time.Second,
	})
	require.NoError(t, err)
	// No Close in a cleanup: it would hang the test binary (the bug).

	ctx := context.Background()
	f1 := p.Send(ctx, &Record{Topic: "grow", Value: []byte("small")})
	// Wait until the record sits in an open batch of the known partition.
	require.True(t, waitFor(10*time.Second, func() bool {
		ts, ok := p.topics.Load("grow")
		if !ok {
			return false
		}
		parts := ts.(*topicState).acc.KnownPartitions()
		return len(parts) == 1 && parts[0].Load() == 1
	}), "the first record never reached its partition")

	pool.armed.Store(true)
	var stack string
	func() {
		defer func() { // the user's own pool panicked: the caller recovers it
			if v := recover(); v != nil {
				stack = string(debug.Stack())
			}
		}()
		p.Send(ctx, &Record{Topic: "grow", Value: make([]byte, 20<<10)})
	}()
	require.Contains(t, stack, "growLocked", "the pool should have panicked under Partition.growLocked")
	pool.armed.Store(false) // the pool works again

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Close(cctx) }()
	select {
	case <-done:
		_, _, _ = f1.Result()
	case <-time.After(10 * time.Second):
		t.Fatal("Close(ctx with a 1s deadline) has not returned after 10s: the partition's lock was left held by the panicking pool")
	}
}

// TestBugPanickingOnDataLossCrashesProcess: Config.OnDataLoss (user code,
// DESIGN.md invariant 9 lists it with partitioners, callbacks and hooks)
// runs on the IO goroutine from sink.checkLogStart
// (producer/sink_response.go: s.cfg.OnDataLoss(e)) with no recover,
// unlike every other user callback: a panic in it kills the process.
//
// Interleaving: 10 records acknowledged, DeleteRecords moves the log start
// past them, the next Produce answer carries the new log start: the IO
// goroutine calls OnDataLoss, which panics. Run in a child process, which
// must exit normally.
func TestBugPanickingOnDataLossCrashesProcess(t *testing.T) {
	if os.Getenv("SAMSA_BUG_DATALOSS_PANIC_CHILD") == "1" {
		panickingDataLossScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBugPanickingOnDataLossCrashesProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAMSA_BUG_DATALOSS_PANIC_CHILD=1")
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
