package producer

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// eosCrashAfterCommit: producer A on dirA sends warm (committed and
// acked), then calls between, then sends 5 more records; once the
// transaction carrying those committed, before its acks to the spool,
// dirA is copied to dirB (what a crash there leaves). A is then closed.
// It returns dirB.
func eosCrashAfterCommit(t *testing.T, c *testbroker.Cluster, between func()) string {
	t.Helper()
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	var armed, copied atomic.Bool
	eosTestHook = func(stage string) {
		if stage == "committed" && armed.Load() && copied.CompareAndSwap(false, true) {
			copyDir(t, dirA, dirB)
		}
	}
	t.Cleanup(func() { eosTestHook = nil })
	a := eosProducer(t, c, dirA, func(cfg *Config) { cfg.Spool.CommitInterval = 50 * time.Millisecond })
	waitAll(t, []*Future{a.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	if between != nil {
		between()
	}
	armed.Store(true)
	var fs []*Future
	for i := range 5 {
		fs = append(fs, a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("r", i))}))
	}
	waitAll(t, fs)
	require.True(t, copied.Load())
	require.NoError(t, a.Close(context.Background()))
	eosTestHook = nil
	return dirB
}

// assertCommittedOnce fails for each value of topic t's partition 0 that
// read_committed sees more than once.
func assertCommittedOnce(t *testing.T, c *testbroker.Cluster, want int) {
	t.Helper()
	values, _ := committedRecords(t, c, "t", 0)
	seen := map[string]int{}
	for _, v := range values {
		seen[v]++
	}
	for v, k := range seen {
		assert.Equal(t, 1, k, "record %s committed %d times (a duplicate)", v, k)
	}
	assert.Len(t, seen, want, "records committed: %v", values)
}

// TestSpoolExactlyOnceProgressReadWaitsForOtherTransactions: spools share
// the progress topic's partition; another producer's transaction open on
// it holds the last stable offset below this spool's last committed
// progress record. The restart must read past it (waiting for the other
// transaction to end), not take an older progress and send committed
// records again (issue 34 review, H1).
func TestSpoolExactlyOnceProgressReadWaitsForOtherTransactions(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var other *Producer
	dirB := eosCrashAfterCommit(t, c, func() {
		other = newProducer(t, c, Config{TransactionalID: "samsa-spool-other"})
		require.NoError(t, other.BeginTransaction())
		f := other.Send(context.Background(), &Record{Topic: DefaultSpoolProgressTopic, Key: []byte("other"), Value: encodeProgress(7)})
		require.NoError(t, other.Flush(context.Background()))
		waitAll(t, []*Future{f})
	})
	b := eosProducer(t, c, dirB, nil)
	after := b.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})
	time.Sleep(300 * time.Millisecond)
	select {
	case <-after.Done():
		_, _, err := after.Result()
		t.Fatalf("the restart completed a Send while the progress read was blocked by another transaction: %v", err)
	default:
	}
	require.NoError(t, other.CommitTransaction(context.Background()))
	waitAll(t, []*Future{after})
	assert.EqualValues(t, 6, b.SpoolExactlyOnceMetrics().DuplicatesSkipped, "warm and r0..r4 were committed by A")
	require.NoError(t, b.Close(context.Background()))
	assertCommittedOnce(t, c, 7)
}

// TestSpoolExactlyOnceProgressReadRetriesEmptyAnswers: Fetch answers
// without records below the end (as Kafka answers a throttled fetch,
// KIP-219) are fetched again; they never end the progress read early
// (issue 34 review, H2).
func TestSpoolExactlyOnceProgressReadRetriesEmptyAnswers(t *testing.T) {
	cases := []struct {
		name     string
		times    int
		throttle int32
	}{
		{"one throttled answer", 1, 100},
		{"three unthrottled empty answers", 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dirB := eosCrashAfterCommit(t, c, nil)
			c.Intercept(testbroker.Interceptor{Keys: []int16{1}, Times: tc.times, After: true,
				Rewrite: func(resp kmsg.Response) {
					r := resp.(*kmsg.FetchResponse)
					r.ThrottleMillis = tc.throttle
					for i := range r.Topics {
						for j := range r.Topics[i].Partitions {
							r.Topics[i].Partitions[j].RecordBatches = nil
						}
					}
				}})
			b := eosProducer(t, c, dirB, nil)
			waitAll(t, []*Future{b.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})})
			assert.EqualValues(t, 6, b.SpoolExactlyOnceMetrics().DuplicatesSkipped, "warm and r0..r4 were committed by A")
			require.NoError(t, b.Close(context.Background()))
			assertCommittedOnce(t, c, 7)
		})
	}
}

// TestSpoolExactlyOnceBacklogReadError: no transaction may commit a
// progress record above backlog records New could not read (the next New
// would skip them as committed: lost). A read that fails once is read
// again: the backlog is sent, once. A read that keeps failing fails the
// driver for good: Sends fail with ErrSpoolFailed, nothing commits, and
// every record stays for the next New (issue 34 review, H3).
func TestSpoolExactlyOnceBacklogReadError(t *testing.T) {
	cases := []struct {
		name      string
		times     int  // reads failing (0: every one)
		permanent bool // B fails for good; C sends the records
	}{
		{"one failed read", 1, false},
		{"every read fails", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c1 := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c1.CreateTopic("t", 1))
			tmp := t.TempDir()
			dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
			var copied atomic.Bool
			eosTestHook = func(stage string) {
				// r0..r4 appended, not committed: the copy's backlog.
				if stage == "appended" && copied.CompareAndSwap(false, true) {
					copyDir(t, dirA, dirB)
				}
			}
			t.Cleanup(func() { eosTestHook = nil })
			a := eosProducer(t, c1, dirA, func(cfg *Config) { cfg.Spool.CommitInterval = 50 * time.Millisecond })
			var fs []*Future
			for i := range 5 {
				fs = append(fs, a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("r", i))}))
			}
			waitAll(t, fs)
			require.NoError(t, a.Close(context.Background()))
			eosTestHook = nil
			require.True(t, copied.Load())

			// The copy restarts on another cluster (nothing of it
			// committed there), its segments unreadable.
			c2 := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c2.CreateTopic("t", 1))
			faults, unregister := spoolfault.Register(dirB)
			defer unregister()
			faults.SetReadErr(syscall.EIO, tc.times)
			b := eosProducer(t, c2, dirB, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := b.Send(ctx, &Record{Topic: "t", Value: []byte("after")}).Wait(ctx)
			want := []string{"after", "r0", "r1", "r2", "r3", "r4"}
			if !tc.permanent {
				require.NoError(t, err)
				require.NoError(t, b.Close(context.Background()))
				got, _ := committedRecords(t, c2, "t", 0)
				slices.Sort(got)
				assert.Equal(t, want, got, "the backlog read again and sent")
				return
			}
			require.ErrorIs(t, err, ErrSpoolFailed, "a Send while the backlog cannot be read")
			require.NoError(t, b.Close(context.Background()))
			got, _ := committedRecords(t, c2, "t", 0)
			assert.Empty(t, got, "nothing committed")
			faults.SetReadErr(nil, 0)
			unregister()

			// Readable again: the next New sends the backlog and the
			// refused Send, once each.
			d := eosProducer(t, c2, dirB, nil)
			require.Eventually(t, func() bool {
				got, _ = committedRecords(t, c2, "t", 0)
				slices.Sort(got)
				return slices.Equal(got, want)
			}, 10*time.Second, 50*time.Millisecond, "committed on the second cluster: %v", got)
			require.NoError(t, d.Close(context.Background()))
			assertCommittedOnce(t, c2, len(want))
		})
	}
}

// TestSpoolExactlyOnceReadBackErrorIsFatal: a record the driver cannot
// read back from the spool fails (ErrSpoolFailed) after a bounded number
// of aborted attempts, instead of aborting and retrying forever (issue 34
// review, M3); it stays in the spool.
func TestSpoolExactlyOnceReadBackErrorIsFatal(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	faults, unregister := spoolfault.Register(dir)
	defer unregister()
	p := eosProducer(t, c, dir, nil)
	waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	faults.SetReadErr(syscall.EIO, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("unreadable")}).Wait(ctx)
	require.ErrorIs(t, err, ErrSpoolFailed)
	require.ErrorIs(t, err, syscall.EIO)
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("later")}).Wait(ctx)
	require.ErrorIs(t, err, ErrSpoolFailed, "a Send after the driver failed for good")
	faults.SetReadErr(nil, 0)
	require.NoError(t, p.Close(context.Background()))
	assert.Equal(t, []string{"unreadable"}, reopenUnacked(t, dir), "the failed record stays in the spool")
}

// TestSpoolExactlyOnceProgressAheadOfSpool: a progress value above every
// sequence the spool has given out (a directory restored from a backup or
// snapshot older than its progress, a copy, a value this spool never
// wrote) must not start: new Sends would take sequences the progress
// calls committed, and be skipped after a crash (issue 34 review, M1).
func TestSpoolExactlyOnceProgressAheadOfSpool(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	a := eosProducer(t, c, dir, nil)
	waitAll(t, []*Future{a.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	key := progressKey(a.spool.ID())
	require.NoError(t, a.Close(context.Background()))

	// A committed progress record for the spool far above its sequences.
	ahead := uint64(1) << 40
	w := newProducer(t, c, Config{TransactionalID: "progress-writer"})
	require.NoError(t, w.BeginTransaction())
	f := w.Send(context.Background(), &Record{Topic: DefaultSpoolProgressTopic, Key: key, Value: encodeProgress(ahead)})
	require.NoError(t, w.CommitTransaction(context.Background()))
	waitAll(t, []*Future{f})

	b := eosProducer(t, c, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.Send(ctx, &Record{Topic: "t", Value: []byte("new")}).Wait(ctx)
	require.ErrorIs(t, err, ErrSpoolProgress)
	assert.Contains(t, err.Error(), fmt.Sprint("below ", ahead), "the error names the progress")
	require.NoError(t, b.Close(context.Background()))
	values, _ := committedRecords(t, c, "t", 0)
	assert.Equal(t, []string{"warm"}, values, "nothing sent after the refusal")
	assert.Contains(t, reopenUnacked(t, dir), "new", "the refused record stays in the spool")
}

// TestSpoolExactlyOnceCommitsAtOnceOnFlushAndClose: Flush and Close do not
// wait out CommitInterval before the driver commits the records written
// (issue 34 review, L2 and L5).
func TestSpoolExactlyOnceCommitsAtOnceOnFlushAndClose(t *testing.T) {
	const interval = 3 * time.Second
	cases := []struct {
		name string
		call func(p *Producer) error
	}{
		{"Flush", func(p *Producer) error { return p.Flush(context.Background()) }},
		{"Close", func(p *Producer) error { return p.Close(context.Background()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			p := eosProducer(t, c, t.TempDir(), func(cfg *Config) { cfg.Spool.CommitInterval = interval })
			// The first transaction begins at once; the next waits for
			// the interval after it.
			waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("first")})})
			f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("second")})
			time.Sleep(50 * time.Millisecond) // the driver is in its wait
			start := time.Now()
			require.NoError(t, tc.call(p))
			took := time.Since(start)
			_, done, err := f.Result()
			require.True(t, done, "the record completed before %s returned", tc.name)
			require.NoError(t, err)
			assert.Less(t, took, interval/2, "%s waited for CommitInterval", tc.name)
			values, _ := committedRecords(t, c, "t", 0)
			assert.Equal(t, []string{"first", "second"}, values)
		})
	}
}

// TestSpoolExactlyOnceRangeBoundedByBytes: a transaction carries at most
// half of BufferMemory of records, so a range of large records neither
// waits for memory its own records hold nor outlives TransactionTimeout
// (issue 34 review, M2).
func TestSpoolExactlyOnceRangeBoundedByBytes(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := eosProducer(t, c, t.TempDir(), func(cfg *Config) {
		cfg.BufferMemory = 1 << 20
		cfg.Spool.CommitInterval = 300 * time.Millisecond
	})
	waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	before := p.SpoolExactlyOnceMetrics().Transactions
	big := make([]byte, 100<<10)
	var fs []*Future
	for range 12 { // 1.2 MiB queued within one CommitInterval
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: big}))
	}
	waitAll(t, fs)
	txns := p.SpoolExactlyOnceMetrics().Transactions - before
	assert.GreaterOrEqual(t, txns, int64(3), "12 records of 100 KiB in ranges of at most 512 KiB")
	require.NoError(t, p.Close(context.Background()))
	values, _ := committedRecords(t, c, "t", 0)
	assert.Len(t, values, 13)
}

// TestSpoolExactlyOnceRangeBoundedByTime: a transaction stops appending
// once its budget (a quarter of TransactionTimeout) passed: it commits
// the records it has, and the rest go in the next one, so that a slow
// range (large records waiting for memory, a leader down) does not
// outlive TransactionTimeout (issue 34 review, M2). The budget is set to
// nothing here: one record per transaction.
func TestSpoolExactlyOnceRangeBoundedByTime(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := eosProducer(t, c, t.TempDir(), func(cfg *Config) { cfg.Spool.CommitInterval = 300 * time.Millisecond })
	assert.Equal(t, int64(p.cfg.TransactionTimeout/4), p.eos.appendBudget.Load(), "the default budget")
	waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	p.eos.appendBudget.Store(0)
	before := p.SpoolExactlyOnceMetrics().Transactions
	var fs []*Future
	for i := range 5 { // queued within one CommitInterval: one range
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("r", i))}))
	}
	waitAll(t, fs)
	assert.EqualValues(t, 5, p.SpoolExactlyOnceMetrics().Transactions-before, "one record per transaction")
	require.NoError(t, p.Close(context.Background()))
	values, _ := committedRecords(t, c, "t", 0)
	assert.Equal(t, []string{"warm", "r0", "r1", "r2", "r3", "r4"}, values)
}

// TestSpoolExactlyOnceCloseDuringCommitIsOutcomeUnknown: when Close's ctx
// ends while the driver's commit is asked (EndTxn sent, no answer yet),
// the records fail with ErrOutcomeUnknown, not ErrClosed: the coordinator
// may have committed them (issue 34 review, L3).
func TestSpoolExactlyOnceCloseDuringCommitIsOutcomeUnknown(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	p := eosProducer(t, c, dir, nil)
	waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")})})
	var ended atomic.Int32
	c.Intercept(testbroker.Interceptor{Keys: []int16{26}, Times: 1, Delay: time.Second,
		Match: func(int32, kmsg.Request) bool { ended.Add(1); return true }})
	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("slow")})
	require.Eventually(t, func() bool { return ended.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "the commit was asked")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
	_, done, err := f.Result()
	require.True(t, done)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.NotErrorIs(t, err, ErrClosed)
}

// TestSpoolExactlyOnceProgressTopicMustBeCompacted: a progress topic whose
// cleanup.policy does not compact (a user-created topic with the default
// delete) would lose the progress at retention, and the next New would
// send committed records again: New's driver refuses it with
// ErrSpoolProgress (issue 34 review, M4).
func TestSpoolExactlyOnceProgressTopicMustBeCompacted(t *testing.T) {
	cases := []struct {
		name    string
		create  bool // the topic created beforehand, cleanup.policy=delete
		wantErr bool
	}{
		{"created by the producer, compacted", false, false},
		{"user-created with cleanup.policy=delete", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			if tc.create {
				require.NoError(t, c.CreateTopic(DefaultSpoolProgressTopic, 1))
			}
			p := eosProducer(t, c, t.TempDir(), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrSpoolProgress)
				assert.Contains(t, err.Error(), "cleanup.policy=delete")
			} else {
				require.NoError(t, err)
			}
			require.NoError(t, p.Close(context.Background()))
		})
	}
}

// createCompactedTopic creates topic on c with parts partitions and
// cleanup.policy=compact, as a progress topic must be.
func createCompactedTopic(t *testing.T, c *testbroker.Cluster, topic string, parts int32) {
	t.Helper()
	admin := newProducer(t, c, Config{})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, -1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := admin.meta.DoController(ctx, req)
	require.NoError(t, err)
	for _, rt := range kresp.(*kmsg.CreateTopicsResponse).Topics {
		require.Zero(t, rt.ErrorCode, "creating %s", topic)
	}
	require.NoError(t, admin.Close(ctx))
}

// TestSpoolExactlyOnceCloseWaitsForTakenRecords: Close waits for the
// records the driver has taken from the queue but not begun committing
// (it must not see the queue empty and nothing sending in between, and
// give up on them with ErrClosed) (issue 34 review, L1).
func TestSpoolExactlyOnceCloseWaitsForTakenRecords(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	taken := make(chan struct{})
	var once atomic.Bool
	eosTestHook = func(stage string) {
		if stage == "taken" && once.CompareAndSwap(false, true) {
			close(taken)
			time.Sleep(100 * time.Millisecond) // Close's stop looks meanwhile
		}
	}
	t.Cleanup(func() { eosTestHook = nil })
	p := eosProducer(t, c, t.TempDir(), nil)
	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")})
	<-taken
	require.NoError(t, p.Close(context.Background()))
	_, done, err := f.Result()
	require.True(t, done)
	require.NoError(t, err, "the record taken before Close commits")
	values, _ := committedRecords(t, c, "t", 0)
	assert.Equal(t, []string{"x"}, values)
}
