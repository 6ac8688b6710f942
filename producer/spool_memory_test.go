package producer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

const (
	// spoolMemChildEnv is set in a child of TestSpoolReplayMemoryBound:
	// what it does (idle, full or backlog).
	spoolMemChildEnv = "SAMSA_PRODUCER_SPOOL_MEM_CHILD"
	// spoolMemBacklogEnv sets the backlog TestSpoolReplayMemoryBound
	// replays, in MiB (default 64; issue 34's figure is
	// SAMSA_PRODUCER_SPOOL_MEM_MIB=256).
	spoolMemBacklogEnv = "SAMSA_PRODUCER_SPOOL_MEM_MIB"
	spoolMemBuffer     = 32 << 20 // BufferMemory of the children
	spoolMemParts      = 4
)

// spoolMemOverhead is the fixed overhead README's "Durable spool"
// documents: a producer with a spool stays within BufferMemory plus this,
// beyond the RSS of the same producer with an empty spool and nothing
// buffered, whatever the backlog on disk. The race detector's shadow
// memory is proportional to the heap: spoolMemRaceFactor scales the bound.
const (
	spoolMemOverhead   = 16 << 20
	spoolMemRaceFactor = 4
)

// TestSpoolMemoryChild is a child of TestSpoolReplayMemoryBound: a producer
// (BufferMemory 32 MiB) with a spool, on a cluster that never answers
// Produce, which sits idle (idle), fills its memory with Sends (full), or
// replays the backlog it finds (backlog); then it prints its peak RSS
// (VmHWM) and exits.
func TestSpoolMemoryChild(t *testing.T) {
	mode := os.Getenv(spoolMemChildEnv)
	if mode == "" {
		t.Skip("a child of TestSpoolReplayMemoryBound")
	}
	p, err := New(Config{
		Brokers:      strings.Split(os.Getenv("SAMSA_PRODUCER_SPOOL_MEM_BROKERS"), ","),
		BufferMemory: spoolMemBuffer,
		MaxBlock:     20 * time.Millisecond,
		Spool: &SpoolConfig{
			Dir:      os.Getenv("SAMSA_PRODUCER_SPOOL_MEM_DIR"),
			MaxBytes: 4 << 30,
		},
	})
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	full := func() bool {
		m := p.Metrics().Producer
		return m.BufferAvailableBytes < m.BufferTotalBytes/16
	}
	switch mode {
	case "full":
		val := make([]byte, 1<<10)
		for i := 0; i < 2*spoolMemBuffer>>10 && !full(); i++ {
			_, _, err := p.Send(context.Background(), &Record{Topic: "t", Partition: int32(i % spoolMemParts), Value: val}).Result()
			if errors.Is(err, ErrBufferExhausted) {
				break
			}
		}
	case "backlog":
		deadline := time.Now().Add(60 * time.Second)
		for !full() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(time.Second) // what the replay or the senders do next
	m := p.Metrics().Producer
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("MEM %d %d %d\n", vmHWM(), m.BufferTotalBytes-m.BufferAvailableBytes, ms.HeapInuse)
	os.Exit(0) // Close would wait for the stalled cluster
}

// raceEnabled reports whether the test binary was built with -race.
var raceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}()

// vmHWM returns the process's peak resident set (VmHWM), in bytes.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// TestSpoolReplayMemoryBound (issue 34's memory bound): the peak RSS of a
// child producer (BufferMemory 32 MiB) replaying a large backlog from its
// spool (64 MiB by default, SAMSA_PRODUCER_SPOOL_MEM_MIB for more) to a
// cluster that never answers Produce, against the same producer with an
// empty spool, idle and with its memory filled by Sends: the replay stays
// within BufferMemory plus the documented overhead over the idle one,
// whatever the backlog on disk.
func TestSpoolReplayMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large spool and runs child processes")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status: VmHWM cannot be read here")
	}
	mib := envInt(t, spoolMemBacklogEnv, 64)
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", spoolMemParts))
	remove := c.Intercept(testbroker.Interceptor{
		Match: func(_ int32, req kmsg.Request) bool { _, ok := req.(*kmsg.ProduceRequest); return ok },
		Stall: true,
	})
	defer remove()

	tmp := t.TempDir()
	backlogDir := filepath.Join(tmp, "backlog")
	start := time.Now()
	sp, err := spool.Open(spool.Options{Dir: backlogDir, Sync: spool.SyncNone, MaxBytes: 4 << 30})
	require.NoError(t, err)
	val := make([]byte, 1<<10)
	n := mib << 10
	for i := range n {
		_, err := sp.Write(context.Background(), &spool.Record{Topic: "t", Partition: int32(i % spoolMemParts), Value: val})
		require.NoError(t, err)
	}
	onDisk := sp.Metrics().Bytes
	require.NoError(t, sp.Close())
	wrote := time.Since(start)

	run := func(mode, dir string) (hwm, buffered, heap int64) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolMemoryChild$")
		cmd.Env = append(os.Environ(), spoolMemChildEnv+"="+mode,
			"SAMSA_PRODUCER_SPOOL_MEM_DIR="+dir,
			"SAMSA_PRODUCER_SPOOL_MEM_BROKERS="+strings.Join(c.Addrs(), ","))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child %s:\n%s", mode, out)
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(l, "MEM %d %d %d", &hwm, &buffered, &heap); err == nil {
				return hwm, buffered, heap
			}
		}
		t.Fatalf("child %s printed no MEM line:\n%s", mode, out)
		return 0, 0, 0
	}
	idle, _, idleHeap := run("idle", filepath.Join(tmp, "idle"))
	full, fullBuf, fullHeap := run("full", filepath.Join(tmp, "full"))
	replay, replayBuf, replayHeap := run("backlog", backlogDir)
	const mb = 1 << 20
	t.Logf("peak RSS (VmHWM), BufferMemory %d MiB, race detector %v: idle %.1f MiB (heap %.1f); memory filled by Sends %.1f MiB (%.1f MiB buffered, heap %.1f); "+
		"replaying a %.0f MiB backlog (%d records of 1 KiB, written in %v) %.1f MiB (%.1f MiB buffered, heap %.1f)",
		spoolMemBuffer/mb, raceEnabled, float64(idle)/mb, float64(idleHeap)/mb, float64(full)/mb, float64(fullBuf)/mb, float64(fullHeap)/mb,
		float64(onDisk)/mb, n, wrote.Round(time.Millisecond), float64(replay)/mb, float64(replayBuf)/mb, float64(replayHeap)/mb)
	assert.Greater(t, replayBuf, int64(spoolMemBuffer/2), "the replay did not fill memory: the bound was not put to the test")
	factor := int64(1)
	if raceEnabled {
		factor = spoolMemRaceFactor
	}
	assert.LessOrEqual(t, replay-idle, factor*(spoolMemBuffer+spoolMemOverhead),
		"the replay's peak RSS above the idle producer's passes BufferMemory plus the documented overhead")
}
