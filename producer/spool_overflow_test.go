package producer

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

func overflowProducer(t *testing.T, c *testbroker.Cluster, dir string, mut func(*Config)) *Producer {
	t.Helper()
	return spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.Mode = SpoolOverflow
		if mut != nil {
			mut(cfg)
		}
	})
}

// TestSpoolOverflowWritesNothingWhileTheClusterKeepsUp: in overflow mode
// records go to memory as without a spool: the spool appends none, they
// carry no samsa-spool header, and each Future's Persisted is closed once
// the record is delivered (not before: it is only in memory). Before
// overflow was built, New refused the mode.
func TestSpoolOverflowWritesNothingWhileTheClusterKeepsUp(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	dir := t.TempDir()
	before := goroutineIDs()
	p := overflowProducer(t, c, dir, nil)
	const n = 300
	fs := make([]*Future, n)
	for i := range n {
		fs[i] = p.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 5)}, Value: spillValue("a", i)})
	}
	for i, f := range fs {
		_, err := f.Wait(context.Background())
		require.NoError(t, err, "record %d", i)
		select {
		case <-f.Persisted():
		default:
			t.Fatalf("record %d delivered, Persisted not closed", i)
		}
	}
	m := p.spool.Metrics()
	assert.Zero(t, m.Appended, "records written to the spool while the cluster kept up")
	require.NoError(t, p.Close(context.Background()))
	for part := range int32(2) {
		recs, err := c.Records("t", part)
		require.NoError(t, err)
		for _, r := range recs {
			for _, h := range r.Headers {
				require.NotEqual(t, spool.HeaderKey, h.Key, "a record kept in memory carries the spool's header")
			}
		}
	}
	requireOncePerPartitionInOrder(t, c, "t", 2, "a", n, "")
	requireNoGoroutinesLeft(t, before)
}

// TestSpoolOverflowSpillsWhenMemoryIsFull: with memory full (the cluster
// down) overflow Sends return at once, writing the records memory cannot
// take to the spool (Persisted closed when Send returns); while the
// cluster stays unreachable past overflowUnreachableAfter, a record goes
// to disk though memory has room. Once the cluster is back every record
// is delivered once, in order per partition, and the spool is empty.
func TestSpoolOverflowSpillsWhenMemoryIsFull(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 3))
	dir := t.TempDir()
	before := goroutineIDs()
	const maxBlock = 3 * time.Second
	p := overflowProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 64 << 10
		cfg.BatchSize = 8 << 10
		cfg.MaxBlock = maxBlock
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Key: []byte("warm"), Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 400
	fs := make([]*Future, n)
	spilled := 0
	for i := range n {
		start := time.Now()
		fs[i] = p.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 7)}, Value: spillValue("a", i)})
		require.Less(t, time.Since(start), maxBlock/4, "Send %d waited for memory", i)
		if _, done, err := fs[i].Result(); done {
			t.Fatalf("record %d failed at Send: %v", i, err)
		}
	}
	// Spilled records are persisted once the spool's writer has them in
	// the file (grouped writes): after SyncSpool, as the persister closes
	// their channels.
	require.NoError(t, p.SyncSpool())
	var m spool.Metrics
	require.Eventually(t, func() bool {
		spilled = 0
		for _, f := range fs {
			select {
			case <-f.Persisted():
				spilled++
			default:
			}
		}
		m = p.spool.Metrics()
		return uint64(spilled) == m.Appended
	}, 5*time.Second, 5*time.Millisecond, "the spool appended exactly the spilled records")
	assert.Greater(t, spilled, n/2, "records persisted (spilled) with memory full")

	require.NoError(t, c.RestartBroker(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
		select {
		case <-f.Persisted():
		default:
			t.Fatalf("record %d delivered, Persisted not closed", i)
		}
	}
	require.NoError(t, p.Close(context.Background()))
	requireOncePerPartitionInOrder(t, c, "t", 3, "a", n, "")
	assert.Empty(t, reopenUnacked(t, dir), "every delivered record left the spool")
	requireNoGoroutinesLeft(t, before)
}

// TestSpoolOverflowUnreachableGoesToDisk: while the cluster has been
// unreachable for overflowUnreachableAfter, an overflow record goes to
// the spool though memory has room (Persisted closed when Send returns:
// it survives a crash during the outage); once the cluster answers
// again, records go to memory again.
func TestSpoolOverflowUnreachableGoesToDisk(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	p := overflowProducer(t, c, dir, nil)
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	first := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", 0)})
	select {
	case <-first.Persisted():
		t.Fatal("a record sent before the outage was seen went to disk")
	default:
	}
	require.Eventually(t, p.reach.unreachable, 10*time.Second, 10*time.Millisecond, "the producer never saw the cluster unreachable")
	var fs []*Future
	for i := 1; i < 20; i++ {
		f := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", i)})
		fs = append(fs, f)
	}
	// Persisted once the spool's writer has them in the file (grouped
	// writes): SyncSpool waits for that.
	require.NoError(t, p.SyncSpool())
	for i, f := range fs {
		select {
		case <-f.Persisted():
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d, sent while the cluster is unreachable, is not in the spool", i+1)
		}
	}
	assert.Equal(t, uint64(19), p.spool.Metrics().Appended)
	require.NoError(t, c.RestartBroker(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = first.Wait(ctx)
	require.NoError(t, err)
	for i, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i+1)
	}
	// Reachable again: memory, not disk.
	_, err = p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", 20)}).Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(19), p.spool.Metrics().Appended, "a record went to disk after the cluster came back")
	require.NoError(t, p.Close(context.Background()))
	requireOncePerPartitionInOrder(t, c, "t", 1, "a", 21, "")
	assert.Empty(t, reopenUnacked(t, dir))
}

const overflowCrashChildEnv = "SAMSA_PRODUCER_OVERFLOW_CRASH_CHILD"

// TestSpoolOverflowCrashChild is TestSpoolOverflowSpilledSurvivesSIGKILL's
// child: an overflow producer with no reachable broker and a tiny
// BufferMemory sends records, printing "P value" for each whose Persisted
// is closed (spilled, and in the spool's file), then "READY", and waits to
// be killed.
func TestSpoolOverflowCrashChild(t *testing.T) {
	dir := os.Getenv(overflowCrashChildEnv)
	if dir == "" {
		t.Skip("the child of TestSpoolOverflowSpilledSurvivesSIGKILL")
	}
	p, err := New(Config{
		Brokers:      []string{"127.0.0.1:1"}, // nothing listens there
		BufferMemory: 32 << 10,
		BatchSize:    4 << 10,
		MaxBlock:     time.Second,
		Spool:        &SpoolConfig{Dir: dir, Mode: SpoolOverflow},
	})
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	fs := make([]*Future, 200)
	for i := range fs {
		v := fmt.Sprintf("c-%d-%s", i, strings.Repeat("x", 1000))
		fs[i] = p.Send(context.Background(), &Record{Topic: "t", Value: []byte(v)})
	}
	// A spilled record is persisted once the spool's writer has it in the
	// file (grouped writes); those in memory never are (the cluster is
	// away): wait for the first kind, up to 2 s in all.
	if err := p.SyncSpool(); err != nil {
		fmt.Println("sync:", err)
		os.Exit(2)
	}
	deadline := time.After(2 * time.Second)
	expired := false
	for i, f := range fs {
		if !expired {
			select {
			case <-f.Persisted():
				fmt.Printf("P c-%d\n", i)
				continue
			case <-deadline:
				expired = true
			}
		}
		select {
		case <-f.Persisted():
			fmt.Printf("P c-%d\n", i)
		default:
		}
	}
	fmt.Println("READY")
	time.Sleep(time.Minute)
}

// TestSpoolOverflowSpilledSurvivesSIGKILL: records an overflow producer
// spilled (Persisted closed) are in the spool after the process is
// SIGKILLed, in order.
func TestSpoolOverflowSpilledSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolOverflowCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), overflowCrashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var persisted []string
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		if line == "READY" {
			ready = true
			break
		}
		if v, ok := strings.CutPrefix(line, "P "); ok {
			persisted = append(persisted, v)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.True(t, ready, "the child did not finish sending")
	require.Greater(t, len(persisted), 100, "records spilled by the child")
	var found []string
	for _, v := range reopenUnacked(t, dir) {
		found = append(found, v[:strings.LastIndex(v, "-")])
	}
	assert.Equal(t, persisted, found, "every spilled record, in order, survived the kill")
}
