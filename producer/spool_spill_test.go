package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// spillValue is the value of record i of sender who: its number, padded
// to 1 KiB.
func spillValue(who string, i int) []byte {
	v := fmt.Sprintf("%s-%d-", who, i)
	return []byte(v + strings.Repeat("x", 1024-len(v)))
}

// spillNumber parses spillValue's value: its sender and number.
func spillNumber(t *testing.T, v []byte) (string, int) {
	t.Helper()
	parts := strings.SplitN(string(v), "-", 3)
	require.Len(t, parts, 3, "value %.20q", v)
	n, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	return parts[0], n
}

// requireOncePerPartitionInOrder checks the topic's records: every number
// of who in [0, n) exactly once, and per partition in increasing order,
// each of before's records ahead of every one of who's (a backlog's ahead
// of new records); it returns the partition each record went to.
func requireOncePerPartitionInOrder(t *testing.T, c *testbroker.Cluster, topic string, parts int32, who string, n int, before string) {
	t.Helper()
	seen := map[int]int{}
	for part := range parts {
		recs, err := c.Records(topic, part)
		require.NoError(t, err)
		last := map[string]int{who: -1, before: -1}
		sawWho := false
		for _, r := range recs {
			w, i := spillNumber(t, r.Value)
			if w != who && w != before {
				continue
			}
			if w == who {
				seen[i]++
				sawWho = true
			} else {
				require.False(t, sawWho, "partition %d: %s-%d after a record of %s", part, w, i, who)
			}
			require.Greater(t, i, last[w], "partition %d: %s-%d after %s-%d", part, w, i, w, last[w])
			last[w] = i
		}
	}
	for i := range n {
		require.Equal(t, 1, seen[i], "%s-%d is in the topic %d times", who, i, seen[i])
	}
	require.Len(t, seen, n)
}

// TestSpoolWriteAheadSpillsWhenMemoryIsFull: with a tiny BufferMemory and
// the cluster down, write-ahead Sends return at once (well under
// MaxBlock) while the spool has room: the records memory cannot take are
// spilled and the drainer appends them once memory frees. Once the
// cluster is back every future completes, each record is in the topic
// once and in order per partition. Before the drainer, each Send past
// BufferMemory waited MaxBlock and failed with ErrBufferExhausted.
func TestSpoolWriteAheadSpillsWhenMemoryIsFull(t *testing.T) {
	const maxBlock = 3 * time.Second
	cases := []struct {
		name string
		send func(p *Producer, rec *Record) *Future
	}{
		{"Send", func(p *Producer, rec *Record) *Future { return p.Send(context.Background(), rec) }},
		{"TrySend", func(p *Producer, rec *Record) *Future { return p.TrySend(context.Background(), rec) }},
		{"Send with a ctx that can end", func(p *Producer, rec *Record) *Future {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			return p.Send(ctx, rec)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 3))
			dir := t.TempDir()
			before := goroutineIDs()
			p := spoolProducer(t, c, dir, func(cfg *Config) {
				cfg.BufferMemory = 64 << 10
				cfg.BatchSize = 8 << 10
				cfg.MaxBlock = maxBlock
			})
			_, err := p.Send(context.Background(), &Record{Topic: "t", Key: []byte("warm"), Value: spillValue("warm", 0)}).Wait(context.Background())
			require.NoError(t, err)
			require.NoError(t, c.StopBroker(0))
			const n = 400 // 400 KiB: six times BufferMemory
			fs := make([]*Future, n)
			start := time.Now()
			for i := range n {
				sendStart := time.Now()
				fs[i] = tc.send(p, &Record{Topic: "t", Key: []byte{byte(i % 7)}, Value: spillValue("a", i)})
				require.Less(t, time.Since(sendStart), maxBlock/4, "Send %d waited for memory", i)
				if _, done, err := fs[i].Result(); done {
					t.Fatalf("record %d failed at Send: %v", i, err)
				}
			}
			took := time.Since(start)
			require.Less(t, took, maxBlock, "%d Sends took %v", n, took)
			// Every record is persisted once the spool's writer has it
			// in the file (grouped writes), memory full or not.
			require.NoError(t, p.SyncSpool())
			for i, f := range fs {
				select {
				case <-f.Persisted():
				case <-time.After(5 * time.Second):
					t.Fatalf("record %d: Persisted not closed after SyncSpool (SyncInterval)", i)
				}
			}
			require.NoError(t, c.RestartBroker(0))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, f := range fs {
				_, err := f.Wait(ctx)
				require.NoError(t, err, "record %d", i)
			}
			require.NoError(t, p.Close(context.Background()))
			requireOncePerPartitionInOrder(t, c, "t", 3, "a", n, "")
			assert.Empty(t, reopenUnacked(t, dir), "every delivered record left the spool")
			requireNoGoroutinesLeft(t, before)
		})
	}
}

// requireNoGoroutinesLeft fails if a goroutine of the producer's started
// after before is still at work (the test cluster's, a restarted broker's
// listener, are left out).
func requireNoGoroutinesLeft(t *testing.T, before map[string]bool) {
	t.Helper()
	working := func() []string {
		var out []string
		for _, st := range workingGoroutines(before) {
			if !strings.Contains(st, "internal/testbroker") {
				out = append(out, st)
			}
		}
		return out
	}
	left := working()
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = working() {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("goroutines left after Close: %v", left)
	}
}

// TestSpoolWriteAheadFullSpoolWithSpilling: with memory full and records
// spilled, Send blocks only once the spool reaches MaxBytes: up to
// MaxBlock, then ErrBufferFull wrapping spool.ErrFull (before the drainer
// it failed at BufferMemory with the pool's ErrBufferExhausted, no
// spool.ErrFull).
func TestSpoolWriteAheadFullSpoolWithSpilling(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	const maxBlock = 300 * time.Millisecond
	p := spoolProducer(t, c, t.TempDir(), func(cfg *Config) {
		cfg.BufferMemory = 32 << 10
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = maxBlock
		cfg.Spool.MaxBytes = 256 << 10
		cfg.Spool.SegmentBytes = 32 << 10
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	var full *Future
	var took time.Duration
	accepted := 0
	for i := range 400 {
		start := time.Now()
		f := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", i)})
		if _, ok, _ := f.Result(); ok {
			full, took = f, time.Since(start)
			break
		}
		require.Less(t, time.Since(start), maxBlock/2, "Send %d waited though the spool had room", i)
		accepted++
	}
	require.NotNil(t, full, "256 KiB of spool took 400 records of 1 KiB")
	assert.Greater(t, accepted*1024, 3*(32<<10), "records accepted past BufferMemory (spilled)")
	_, err = full.Wait(context.Background())
	require.ErrorIs(t, err, ErrBufferFull)
	require.ErrorIs(t, err, spool.ErrFull)
	assert.GreaterOrEqual(t, took, maxBlock, "Send waited MaxBlock for the spool")
	require.NoError(t, c.RestartBroker(0))
}

// TestSpoolCloseWhileSpilled: Close (its ctx ending during an outage)
// fails the spilled records not yet in memory with ErrClosed; they stay
// in the spool, and the next New sends them again in order, each once.
func TestSpoolCloseWhileSpilled(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	dir := t.TempDir()
	before := goroutineIDs()
	a := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 32 << 10
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = 2 * time.Second
	})
	_, err := a.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 200
	fs := make([]*Future, n)
	for i := range n {
		fs[i] = a.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 3)}, Value: spillValue("a", i)})
		if _, done, err := fs[i].Result(); done {
			t.Fatalf("record %d failed at Send: %v", i, err)
		}
		<-fs[i].Persisted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	_ = a.Close(ctx)
	cancel()
	require.Less(t, time.Since(start), 5*time.Second)
	for i, f := range fs {
		_, done, err := f.Result()
		require.True(t, done, "record %d not completed after Close", i)
		require.ErrorIs(t, err, ErrClosed, "record %d", i)
	}
	requireNoGoroutinesLeft(t, before)
	unacked := reopenUnacked(t, dir)
	require.Len(t, unacked, n, "every record stays in the spool")
	for i, v := range unacked {
		w, k := spillNumber(t, []byte(v))
		require.Equal(t, "a", w)
		require.Equal(t, i, k, "the spool's order")
	}

	require.NoError(t, c.RestartBroker(0))
	b := spoolProducer(t, c, dir, nil)
	require.NoError(t, b.Flush(context.Background()))
	require.Eventually(t, func() bool {
		got := 0
		for part := range int32(2) {
			recs, _ := c.Records("t", part)
			got += len(recs)
		}
		return got >= n+1
	}, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, b.Close(context.Background()))
	requireOncePerPartitionInOrder(t, c, "t", 2, "a", n, "")
	assert.Empty(t, reopenUnacked(t, dir))
}

// TestSpoolBacklogThenNewSends: after a restart with a backlog larger
// than memory while the cluster is down, Sends of the backlog's topic
// return at once (before the drainer they waited MaxBlock for the replay
// and failed with ErrBufferExhausted); once the cluster is back no new
// record overtakes a replayed one in its partition, and each is written
// once.
func TestSpoolBacklogThenNewSends(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	dir := t.TempDir()
	a := spoolProducer(t, c, dir, nil)
	_, err := a.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const backlog = 200
	for i := range backlog {
		<-a.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 4)}, Value: spillValue("a", i)}).Persisted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_ = a.Close(ctx)
	cancel()

	const maxBlock = 2 * time.Second
	var hookErrs = make(chan error, backlog)
	b := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 32 << 10 // the backlog is 200 KiB
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = maxBlock
		cfg.Spool.RecoveryHook = func(_ uint64, _ RecordMetadata, err error) { hookErrs <- err }
	})
	const n = 100
	fs := make([]*Future, n)
	start := time.Now()
	for i := range n {
		fs[i] = b.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 4)}, Value: spillValue("b", i)})
		if _, done, err := fs[i].Result(); done {
			t.Fatalf("new record %d failed at Send: %v", i, err)
		}
	}
	require.Less(t, time.Since(start), maxBlock, "Sends waited behind the replay")
	require.NoError(t, c.RestartBroker(0))
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
	}
	for range backlog {
		select {
		case err := <-hookErrs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("the backlog's outcomes did not all come")
		}
	}
	require.NoError(t, b.Close(context.Background()))
	requireOncePerPartitionInOrder(t, c, "t", 2, "b", n, "a")
	requireOncePerPartitionInOrder(t, c, "t", 2, "a", backlog, "")
	assert.Empty(t, reopenUnacked(t, dir))
}

// TestSpoolPurgeFailsSpilledRecords: Purge fails the spilled records
// waiting for memory with ErrPurged, and they leave the spool (before,
// they were appended once memory freed and sent after Purge).
func TestSpoolPurgeFailsSpilledRecords(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	p := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 32 << 10
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = 2 * time.Second
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 100
	fs := make([]*Future, n)
	for i := range n {
		fs[i] = p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	purged, _ := p.Purge(ctx) // ctx ends waiting for the requests in flight
	cancel()
	require.NoError(t, c.RestartBroker(0))
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed := 0
	for i, f := range fs {
		_, err := f.Wait(ctx)
		if err != nil {
			require.ErrorIs(t, err, ErrPurged, "record %d", i)
			failed++
		}
	}
	assert.Equal(t, purged, failed, "Purge's count")
	assert.Greater(t, failed, n/2, "the spilled records were purged")
	require.NoError(t, p.Close(context.Background()))
	assert.Empty(t, reopenUnacked(t, dir), "purged records left the spool")
	// What was not purged was delivered, once, in order.
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	last := -1
	for _, r := range recs {
		if w, i := spillNumber(t, r.Value); w == "a" {
			require.Greater(t, i, last)
			last = i
		}
	}
}

// TestSpilledEntrySize keeps the documented cost of a spilled record
// (SpoolConfig, README) true: the drainer's queue entry.
func TestSpilledEntrySize(t *testing.T) {
	require.Equal(t, uintptr(spilledBytes), unsafe.Sizeof(spilled{}))
}

// TestSpoolSpillConcurrentSendersKeepOrder: senders on several goroutines,
// each with its own key (one partition), a memory far too small and a
// short MaxBlock, the cluster up: records go to memory or spill as memory
// comes and goes, and yet every Send succeeds, each record is written
// once, and each sender's records keep their order (a record that went
// straight to memory never overtook a spilled one of its topic). Before
// the drainer, Sends failed with ErrBufferExhausted (MaxBlock NoWait).
func TestSpoolSpillConcurrentSendersKeepOrder(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 4))
	dir := t.TempDir()
	before := goroutineIDs()
	p := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 16 << 10
		cfg.BatchSize = 2 << 10
		cfg.MaxBlock = NoWait // Send never waits for memory, nor the drainer more than 100 ms
		cfg.Linger = time.Millisecond
	})
	const senders, n = 4, 100
	fs := make([][]*Future, senders)
	done := make(chan struct{})
	for s := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range n {
				fs[s] = append(fs[s], p.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(s)}, Value: spillValue(fmt.Sprint(s), i)}))
			}
		}()
	}
	for range senders {
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for s := range senders {
		for i, f := range fs[s] {
			_, err := f.Wait(ctx)
			require.NoError(t, err, "sender %d record %d", s, i)
		}
	}
	require.NoError(t, p.Close(context.Background()))
	for s := range senders {
		requireOncePerPartitionInOrder(t, c, "t", 4, fmt.Sprint(s), n, "")
	}
	assert.Empty(t, reopenUnacked(t, dir))
	requireNoGoroutinesLeft(t, before)
}

// spoolPartitions reopens the spool in dir and counts its unacknowledged
// records per partition.
func spoolPartitions(t *testing.T, dir string) map[int32]int {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	defer sp.Close()
	out := map[int32]int{}
	for e, err := range sp.Unacked() {
		require.NoError(t, err)
		out[e.Partition]++
	}
	return out
}

// TestSpoolSpilledReadErrors: a spilled record whose read back fails is
// read again (a transient error delivers it); a read that keeps failing
// fails it with ErrSpoolFailed and it stays in the spool, with every
// later record of its topic failed the same way behind it (no later one
// overtakes it). Before, one failed read failed the record with
// ErrSpoolFailed and its completion acknowledged it: lost (issue 34
// review, H1).
func TestSpoolSpilledReadErrors(t *testing.T) {
	cases := []struct {
		name      string
		times     int // SetReadErr's
		permanent bool
	}{
		{"one failed read", 1, false},
		{"every read fails", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			faults, unregister := spoolfault.Register(dir)
			defer unregister()
			before := goroutineIDs()
			p := spoolProducer(t, c, dir, func(cfg *Config) {
				cfg.BufferMemory = 32 << 10
				cfg.BatchSize = 4 << 10
				cfg.MaxBlock = 2 * time.Second
			})
			_, err := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
			require.NoError(t, err)
			require.NoError(t, c.StopBroker(0))
			// From the first spill on (the drainer reads it back at once,
			// and then waits for memory).
			faults.SetReadErr(syscall.EIO, tc.times)
			const n = 100
			fs := make([]*Future, n)
			for i := range n {
				fs[i] = p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("a", i)})
			}
			require.NoError(t, p.SyncSpool())
			require.NoError(t, c.RestartBroker(0))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var failed []string
			for i, f := range fs {
				_, err := f.Wait(ctx)
				if !tc.permanent {
					require.NoError(t, err, "record %d", i)
					continue
				}
				if err != nil {
					require.ErrorIs(t, err, ErrSpoolFailed, "record %d", i)
					require.ErrorIs(t, err, syscall.EIO, "record %d", i)
					failed = append(failed, string(spillValue("a", i)))
				} else {
					require.Empty(t, failed, "record %d delivered after an unread one", i)
				}
			}
			if tc.permanent {
				require.NotEmpty(t, failed, "the spilled records")
				// The topic stays behind its unread record.
				late := p.Send(ctx, &Record{Topic: "t", Value: spillValue("a", n)})
				_, err := late.Wait(ctx)
				require.ErrorIs(t, err, ErrSpoolFailed, "a Send after the unread record")
				failed = append(failed, string(spillValue("a", n)))
			}
			faults.SetReadErr(nil, 0)
			require.NoError(t, p.Close(context.Background()))
			requireNoGoroutinesLeft(t, before)
			assert.Equal(t, failed, reopenUnacked(t, dir), "the failed records stay in the spool, in order")
		})
	}
}

// TestSpoolBacklogReadErrors: a failed read of New's backlog is read
// again from where it stopped (a transient error: every backlog record
// sent, before the new ones); a read that keeps failing keeps the backlog
// topic spilling: its new records fail with ErrSpoolFailed (not
// ErrClosed), and stay in the spool behind the backlog, while other
// topics are sent. Before, one failed read stopped the drainer: new
// records overtook the backlog, and every later spill failed with
// ErrClosed on an open producer (issue 34 review, H2).
func TestSpoolBacklogReadErrors(t *testing.T) {
	cases := []struct {
		name      string
		times     int
		permanent bool
	}{
		{"one failed read", 1, false},
		{"every read fails", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 2))
			require.NoError(t, c.CreateTopic("u", 1))
			dir := t.TempDir()
			a := spoolProducer(t, c, dir, nil)
			_, err := a.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
			require.NoError(t, err)
			require.NoError(t, c.StopBroker(0))
			const backlog = 20
			var want []string
			for i := range backlog {
				<-a.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 4)}, Value: spillValue("a", i)}).Persisted()
				want = append(want, string(spillValue("a", i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_ = a.Close(ctx)
			cancel()
			require.NoError(t, c.RestartBroker(0))

			faults, unregister := spoolfault.Register(dir)
			defer unregister()
			faults.SetReadErr(syscall.EIO, tc.times)
			before := goroutineIDs()
			b := spoolProducer(t, c, dir, nil)
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const n = 20
			fs := make([]*Future, n)
			for i := range n {
				fs[i] = b.Send(ctx, &Record{Topic: "t", Key: []byte{byte(i % 4)}, Value: spillValue("b", i)})
				want = append(want, string(spillValue("b", i)))
			}
			other := b.Send(ctx, &Record{Topic: "u", Value: spillValue("u", 0)})
			for i, f := range fs {
				_, err := f.Wait(ctx)
				if tc.permanent {
					require.ErrorIs(t, err, ErrSpoolFailed, "record %d", i)
					require.NotErrorIs(t, err, ErrClosed, "record %d", i)
				} else {
					require.NoError(t, err, "record %d", i)
				}
			}
			_, err = other.Wait(ctx)
			require.NoError(t, err, "another topic's record")
			faults.SetReadErr(nil, 0)
			require.NoError(t, b.Close(context.Background()))
			requireNoGoroutinesLeft(t, before)
			if tc.permanent {
				assert.Equal(t, want, reopenUnacked(t, dir), "the backlog and the new records stay in the spool, in order")
				return
			}
			requireOncePerPartitionInOrder(t, c, "t", 2, "b", n, "a")
			requireOncePerPartitionInOrder(t, c, "t", 2, "a", backlog, "")
			assert.Empty(t, reopenUnacked(t, dir))
		})
	}
}

// TestSpoolSpillingStickySpread: keyless records spilled while the
// cluster is down spread over the partitions as the sticky partitioner
// spreads them in memory. Before, the partitioner was never told of a
// spilled record and never moved on: {0:4 1:11 2:4 3:4 4:1973 5:4} of
// 2000 (issue 34 review, M2).
func TestSpoolSpillingStickySpread(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	const parts = 6
	require.NoError(t, c.CreateTopic("t", parts))
	dir := t.TempDir()
	p := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 32 << 10
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = 2 * time.Second
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 2000
	for i := range n {
		p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprintf("%0100d", i))})
	}
	require.NoError(t, p.SyncSpool())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_ = p.Close(ctx)
	cancel()
	// The partitioner moves on every BatchSize bytes (about 40 records
	// here), weighing the partitions' queues: no even split, but no
	// partition takes most of them, and all or all but one get some.
	got := spoolPartitions(t, dir)
	total, used := 0, 0
	for part := range int32(parts) {
		total += got[part]
		if got[part] > 0 {
			used++
		}
		assert.Less(t, got[part], n/2, "partition %d's share: %v", part, got)
	}
	assert.GreaterOrEqual(t, used, parts-1, "partitions used: %v", got)
	assert.Equal(t, n, total)
}

// TestSpoolSpillQueueReleasesItsPeak: the drainer's queue, grown by a
// burst of spills, lets its backing array go once it empties (issue 34
// review, M4); a small one is kept.
func TestSpoolSpillQueueReleasesItsPeak(t *testing.T) {
	const keep = 4096 // queueKeepCap, documented in SpoolConfig
	cases := []struct {
		name     string
		n        int
		released bool
	}{
		{"small", 100, false},
		{"a burst", 3 * keep, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &drainer{kick: make(chan struct{}, 1), ctx: context.Background()}
			for i := range tc.n {
				require.True(t, d.spill(spilled{seq: uint64(i)}))
			}
			for i := range tc.n {
				s, ok := d.take()
				require.True(t, ok)
				require.Equal(t, uint64(i), s.seq)
			}
			if tc.released {
				assert.LessOrEqual(t, cap(d.queue), keep, "the emptied queue's capacity")
			} else {
				assert.Positive(t, cap(d.queue), "the small queue's array is kept")
			}
		})
	}
}

// TestSpoolSpilledEndedCtxNotReadBack: a spilled record whose Send's ctx
// ended before the drainer reached it fails with its ctx's error without
// being read back from the spool (before, it was read and appended only
// to be swept: a read error failed it with ErrSpoolFailed instead), and
// it leaves the spool (issue 34 review, L1).
func TestSpoolSpilledEndedCtxNotReadBack(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	faults, unregister := spoolfault.Register(dir)
	defer unregister()
	p := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.BufferMemory = 32 << 10
		cfg.BatchSize = 4 << 10
		cfg.MaxBlock = 2 * time.Second
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: spillValue("warm", 0)}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	sctx, scancel := context.WithCancel(context.Background())
	const n = 100
	fs := make([]*Future, n)
	for i := range n {
		fs[i] = p.Send(sctx, &Record{Topic: "t", Value: spillValue("a", i)})
	}
	require.NoError(t, p.SyncSpool())
	faults.SetReadErr(syscall.EIO, 0)
	scancel()
	require.NoError(t, c.RestartBroker(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The records in memory may have been in a request when the broker
	// stopped (delivered then); the spilled ones (most) were not.
	canceled := 0
	for i, f := range fs {
		_, err := f.Wait(ctx)
		if err == nil {
			require.Zero(t, canceled, "record %d delivered after a canceled one", i)
			continue
		}
		require.ErrorIs(t, err, context.Canceled, "record %d", i)
		require.NotErrorIs(t, err, ErrSpoolFailed, "record %d", i)
		canceled++
	}
	require.Greater(t, canceled, n/2, "the spilled records")
	faults.SetReadErr(nil, 0)
	require.NoError(t, p.Close(context.Background()))
	assert.Empty(t, reopenUnacked(t, dir), "the records whose ctx ended left the spool")
}
