package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// spoolTmpfsEnv is set in the child of TestSpoolDiskFullOnTmpfs: the
// directory on which it mounts its tmpfs, in a mount namespace of its own.
const spoolTmpfsEnv = "SAMSA_PRODUCER_SPOOL_TMPFS"

// TestSpoolDiskFullOnTmpfs (issue 34's disk-full proof, on a real full
// disk): a spool on a 4 MiB tmpfs, MaxBytes 64 MiB, the broker down.
// Sends block, then fail after MaxBlock with ErrBufferFull wrapping
// spool.ErrFull and ENOSPC; reopened, the spool has every persisted
// record and reports no damage; once a filler file is removed Sends go
// on, and once the broker is back every record is delivered, and more
// than the tmpfs holds goes through (acknowledged segments deleted).
//
// The test re-executes itself in a private mount namespace (as unshare -m
// does) so that the tmpfs is seen by nobody else; it is skipped, saying
// why, where that or the mount is not permitted (not root).
func TestSpoolDiskFullOnTmpfs(t *testing.T) {
	if mnt := os.Getenv(spoolTmpfsEnv); mnt != "" {
		testSpoolDiskFullOnTmpfs(t, mnt)
		return
	}
	if testing.Short() {
		t.Skip("mounts a tmpfs in a child process")
	}
	mnt := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolDiskFullOnTmpfs$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), spoolTmpfsEnv+"="+mnt)
	// Go makes / private (recursively) in the new namespace: the tmpfs
	// propagates nowhere.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("no private mount namespace for the tmpfs (needs root or CAP_SYS_ADMIN): %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "tmpfs: "); i >= 0 {
			t.Log(l[i:])
		}
	}
	if strings.Contains(string(out), "--- SKIP: TestSpoolDiskFullOnTmpfs") {
		t.Skipf("the child skipped: %s", out)
	}
	require.NoError(t, err, "the child in its mount namespace:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestSpoolDiskFullOnTmpfs", "the child's output:\n%s", out)
}

func testSpoolDiskFullOnTmpfs(t *testing.T, mnt string) {
	const tmpfsSize = 4 << 20
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", tmpfsSize)); err != nil {
		t.Skipf("mount -t tmpfs on %s: %v (needs root)", mnt, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 1<<20), 0o644))
	dir := filepath.Join(mnt, "spool")

	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	require.NoError(t, c.CreateTopic("u", 2))
	const maxBlock = 300 * time.Millisecond
	withSpool := func(maxBlock time.Duration) func(*Config) {
		return func(cfg *Config) {
			cfg.MaxBlock = maxBlock
			cfg.Spool.MaxBytes = 64 << 20 // far above the tmpfs: the disk fills first
			cfg.Spool.SegmentBytes = 256 << 10
			cfg.Spool.SyncInterval = 10 * time.Millisecond
		}
	}
	value := func(name string, i int) []byte {
		v := make([]byte, 1<<10)
		copy(v, fmt.Sprintf("%s-%d ", name, i))
		return v
	}
	key := func(v []byte) string { return strings.TrimRight(string(v), "\x00") }
	var persisted []string // in Send order

	// 1. The broker down, the disk fills: Sends block, then fail.
	p := spoolProducer(t, c, dir, withSpool(maxBlock))
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: value("first", 0)}).Wait(context.Background())
	require.NoError(t, err, "a record before the outage")
	persisted = append(persisted, key(value("first", 0)))
	require.NoError(t, c.StopBroker(0))
	var full *Future
	var took time.Duration
	sent := 0
	var sentKeys []string
	var sentFutures []*Future
	for i := range 8 << 10 {
		v := value("full", i)
		start := time.Now()
		f := p.Send(context.Background(), &Record{Topic: "t", Value: v})
		if _, ok, err := f.Result(); ok {
			require.Error(t, err)
			full, took = f, time.Since(start)
			break
		}
		// Persisted closes once the spool's writer has the record in
		// the file: later, and maybe never for the last ones before the
		// disk filled.
		sentKeys = append(sentKeys, key(v))
		sentFutures = append(sentFutures, f)
		sent++
	}
	require.NotNil(t, full, "a 4 MiB tmpfs took 8 MiB of records")
	_, err = full.Wait(context.Background())
	require.ErrorIs(t, err, ErrBufferFull)
	require.ErrorIs(t, err, ErrBufferExhausted)
	require.ErrorIs(t, err, spool.ErrFull)
	require.ErrorIs(t, err, syscall.ENOSPC, "the disk, not MaxBytes, was full")
	assert.GreaterOrEqual(t, took, maxBlock, "Send waited MaxBlock for room")
	select {
	case <-full.Persisted():
		t.Fatal("a record the full disk refused is reported persisted")
	default:
	}
	// Close cannot deliver (the broker is down): what it persisted stays.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_ = p.Close(ctx)
	cancel()
	// Persisted, as the Futures say it once Close returned; the rest may
	// or may not have reached the file.
	maybe := map[string]bool{}
	for i, f := range sentFutures {
		select {
		case <-f.Persisted():
			persisted = append(persisted, sentKeys[i])
		default:
			maybe[sentKeys[i]] = true
		}
	}
	require.GreaterOrEqual(t, len(persisted), sent/2, "most records sent before the disk filled are reported persisted")
	persisted0 := len(persisted)

	// 2. Reopened on the full disk: every persisted record, no damage.
	sp, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err, "open on a full disk")
	rec := sp.Recovery()
	var backlog []string
	for e, err := range sp.Unacked() {
		require.NoError(t, err)
		backlog = append(backlog, key(e.Value))
	}
	if err := sp.Close(); err != nil {
		// Close's final position write finds no room: the old position
		// file stays, which is safe (at least once).
		require.ErrorIs(t, err, syscall.ENOSPC, "closing the reopened spool")
	}
	assert.Zero(t, rec.DamagedRegions, "damaged regions")
	assert.Zero(t, rec.SkippedRecords, "records lost")
	assert.Zero(t, rec.TruncatedBytes, "a torn tail: the partial write at ENOSPC was not taken back")
	assert.False(t, rec.PositionLost, "position file lost")
	// The first record was delivered: it may or may not be acknowledged
	// in the position file by the time of Close.
	want := persisted[1:]
	if len(backlog) > 0 && backlog[0] == persisted[0] {
		want = persisted
	}
	// Records never reported persisted that reached the file anyway are
	// in the backlog too: leave them out of the comparison.
	var got []string
	for _, k := range backlog {
		if !maybe[k] {
			got = append(got, k)
		}
	}
	require.Equal(t, want, got, "the spool's backlog is every record persisted, in order")

	// 3. Space freed (the filler removed), the broker still down: Sends
	// go on (to a topic outside the backlog: a backlog topic's Sends
	// wait for its replay, which waits for the broker).
	require.NoError(t, os.Remove(filler))
	var replayed, replayFailed atomic.Int64
	p = spoolProducer(t, c, dir, func(cfg *Config) {
		withSpool(5 * time.Second)(cfg)
		cfg.Spool.RecoveryHook = func(seq uint64, md RecordMetadata, err error) {
			if err != nil {
				replayFailed.Add(1)
			}
			replayed.Add(1)
		}
	})
	var futs []*Future
	for i := range 300 {
		v := value("freed", i)
		f := p.Send(context.Background(), &Record{Topic: "u", Value: v})
		pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
		select {
		case <-f.Persisted():
		case <-pctx.Done():
			_, _, err := f.Result()
			t.Fatalf("record %d after the filler's removal not persisted within 5 s: %v", i, err)
		}
		pcancel()
		persisted = append(persisted, key(v))
		futs = append(futs, f)
	}

	// 4. The broker back: everything delivered, and more than the tmpfs
	// holds goes through as acknowledged segments are deleted.
	require.NoError(t, c.RestartBroker(0))
	for i := range 6 << 10 {
		v := value("after", i)
		f := p.Send(context.Background(), &Record{Topic: "u", Value: v})
		persisted = append(persisted, key(v))
		futs = append(futs, f)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	for i, f := range futs {
		_, err := f.Wait(wctx)
		require.NoError(t, err, "record %d after the outage", i)
	}
	require.Eventually(t, func() bool { return replayed.Load() >= int64(len(backlog)) }, 30*time.Second, 10*time.Millisecond,
		"replayed %d of %d", replayed.Load(), len(backlog))
	assert.Zero(t, replayFailed.Load(), "replayed records that failed")
	require.NoError(t, p.Close(wctx))

	stored := map[string]bool{}
	for _, topic := range []string{"t", "u"} {
		for part := range int32(2) {
			recs, err := c.Records(topic, part)
			require.NoError(t, err)
			for _, r := range recs {
				stored[key(r.Value)] = true
			}
		}
	}
	missing := 0
	for _, v := range persisted {
		if !stored[v] {
			missing++
		}
	}
	assert.Zero(t, missing, "persisted records not delivered")
	t.Logf("tmpfs: %d KiB: %d records of 1 KiB persisted before the disk was full; the next Send failed after %v (MaxBlock %v); "+
		"%d replayed, %d delivered in all", tmpfsSize>>10, persisted0, took.Round(time.Millisecond), maxBlock, len(backlog), len(persisted))
	assert.Empty(t, reopenUnacked(t, dir), "records left in the spool")
}
