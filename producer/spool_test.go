package producer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// spoolProducer starts a producer with a write-ahead spool in dir on c.
func spoolProducer(t *testing.T, c *testbroker.Cluster, dir string, mut func(*Config)) *Producer {
	t.Helper()
	cfg := Config{Linger: NoWait, Spool: &SpoolConfig{Dir: dir}}
	if mut != nil {
		mut(&cfg)
	}
	return newProducer(t, c, cfg)
}

// spoolHeader returns the samsa-spool header of a stored record.
func spoolHeader(t *testing.T, r testbroker.Record) (spool.ID, uint64) {
	t.Helper()
	for _, h := range r.Headers {
		if h.Key == spool.HeaderKey {
			id, seq, err := spool.DecodeHeader(h.Value)
			require.NoError(t, err)
			return id, seq
		}
	}
	t.Fatalf("record at offset %d has no %s header: %v", r.Offset, spool.HeaderKey, r.Headers)
	return spool.ID{}, 0
}

// reopenUnacked opens dir's spool (after its producer closed) and returns
// the values of its unacknowledged records, in order.
func reopenUnacked(t *testing.T, dir string) []string {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	defer sp.Close()
	var out []string
	for e, err := range sp.Unacked() {
		require.NoError(t, err)
		out = append(out, string(e.Value))
	}
	return out
}

// TestSpoolConfigRefused: New names each bad Spool field, and refuses a
// directory another spool holds (a second producer on it would replay
// and delete the first one's records).
func TestSpoolConfigRefused(t *testing.T) {
	dir := t.TempDir()
	held, err := spool.Open(spool.Options{Dir: filepath.Join(dir, "held")})
	require.NoError(t, err)
	defer held.Close()
	cases := []struct {
		name string
		sc   SpoolConfig
		txn  string
		acks Acks
		want string
		is   error
	}{
		{name: "acks none", sc: SpoolConfig{Dir: dir}, acks: AcksNone, want: "Acks"},
		{name: "no dir", sc: SpoolConfig{}, want: "Spool.Dir"},
		{name: "unknown mode", sc: SpoolConfig{Dir: dir, Mode: "later"}, want: "Spool.Mode"},
		{name: "bad sync", sc: SpoolConfig{Dir: dir, Sync: 7}, want: "Spool.Sync"},
		{name: "negative interval", sc: SpoolConfig{Dir: dir, SyncInterval: -1}, want: "Spool.SyncInterval"},
		{name: "negative segment", sc: SpoolConfig{Dir: dir, SegmentBytes: -1}, want: "Spool.SegmentBytes"},
		{name: "negative max", sc: SpoolConfig{Dir: dir, MaxBytes: -1}, want: "Spool.MaxBytes"},
		{name: "segment above max", sc: SpoolConfig{Dir: dir, SegmentBytes: 2 << 20, MaxBytes: 1 << 20}, want: "SegmentBytes"},
		{name: "transactions", sc: SpoolConfig{Dir: dir}, txn: "t1", want: "TransactionalID"},
		{name: "locked", sc: SpoolConfig{Dir: filepath.Join(dir, "held")}, want: "another spool", is: spool.ErrLocked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.sc
			cfg := Config{Brokers: []string{"127.0.0.1:1"}, TransactionalID: tc.txn, Spool: &sc}
			if tc.acks != AcksAll {
				cfg.Acks, cfg.DisableIdempotence = tc.acks, true
			}
			p, err := New(cfg)
			if p != nil {
				p.Close(context.Background())
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

// TestSpoolProperties: the samsa.spool.* keys set Config.Spool.
func TestSpoolProperties(t *testing.T) {
	base := map[string]string{"bootstrap.servers": "k:9092"}
	cases := []struct {
		name  string
		props map[string]string
		want  *SpoolConfig
		bad   string
	}{
		{name: "none", props: map[string]string{}, want: nil},
		{name: "dir only", props: map[string]string{"samsa.spool.dir": "/var/spool/x"}, want: &SpoolConfig{Dir: "/var/spool/x"}},
		{name: "all", props: map[string]string{
			"samsa.spool.dir": "d", "samsa.spool.mode": "write-ahead", "samsa.spool.sync": "always",
			"samsa.spool.sync.interval.ms": "250", "samsa.spool.segment.bytes": "1048576",
			"samsa.spool.max.bytes": "8388608", "samsa.spool.header.enable": "false",
		}, want: &SpoolConfig{Dir: "d", Mode: SpoolWriteAhead, Sync: spool.SyncAlways, SyncInterval: 250 * time.Millisecond,
			SegmentBytes: 1 << 20, MaxBytes: 8 << 20, DisableHeader: true}},
		{name: "sync none", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.sync": "none"}, want: &SpoolConfig{Dir: "d", Sync: spool.SyncNone}},
		{name: "no dir", props: map[string]string{"samsa.spool.sync": "none"}, bad: "samsa.spool.sync: needs samsa.spool.dir"},
		{name: "bad sync", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.sync": "often"}, bad: "samsa.spool.sync"},
		{name: "bad mode", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.mode": "lazy"}, bad: "samsa.spool.mode"},
		{name: "zero interval", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.sync.interval.ms": "0"}, bad: "samsa.spool.sync.interval.ms"},
		{name: "bad max", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.max.bytes": "0"}, bad: "samsa.spool.max.bytes"},
		{name: "bad header", props: map[string]string{"samsa.spool.dir": "d", "samsa.spool.header.enable": "yes"}, bad: "samsa.spool.header.enable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range base {
				props[k] = v
			}
			for k, v := range tc.props {
				props[k] = v
			}
			c, err := ConfigFromProperties(props)
			if tc.bad != "" {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.ErrorContains(t, err, tc.bad)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Spool)
			assert.Empty(t, c.IgnoredProperties())
		})
	}
}

// TestSpoolWriteAheadRoundTrip: every record goes through the spool,
// reaches the broker with its samsa-spool header (the spool's ID and its
// sequence, in Send order), and is acknowledged to the spool once
// delivered: reopened after Close, the spool has nothing to replay.
func TestSpoolWriteAheadRoundTrip(t *testing.T) {
	for _, pol := range []spool.SyncPolicy{spool.SyncInterval, spool.SyncNone, spool.SyncAlways} {
		t.Run(pol.String(), func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 2))
			dir := t.TempDir()
			p := spoolProducer(t, c, dir, func(cfg *Config) { cfg.Spool.Sync = pol })
			id := p.spool.ID()
			const n = 200
			fs := make([]*Future, n)
			for i := range fs {
				fs[i] = p.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 7)}, Value: []byte(fmt.Sprint(i))})
			}
			waitAll(t, fs)
			for i, f := range fs {
				// Under always the fsync may come after the delivery.
				select {
				case <-f.Persisted():
				case <-time.After(5 * time.Second):
					t.Fatalf("record %d delivered but its Persisted is not closed", i)
				}
			}
			require.NoError(t, p.Close(context.Background()))
			var last [2]uint64
			seen := 0
			for part := range int32(2) {
				recs, err := c.Records("t", part)
				require.NoError(t, err)
				for j, r := range recs {
					gotID, seq := spoolHeader(t, r)
					assert.Equal(t, id, gotID)
					if j > 0 {
						assert.Greater(t, seq, last[part], "sequences follow Send order within a partition")
					}
					last[part] = seq
					seen++
				}
			}
			assert.Equal(t, n, seen)
			assert.Empty(t, reopenUnacked(t, dir), "every delivered record is acknowledged to the spool")
		})
	}
}

// TestSpoolPersistedBeforeDelivered: with the broker down, Send's record
// is persisted (Future.Persisted closed) long before it is delivered;
// without a spool Persisted is never ready.
func TestSpoolPersistedBeforeDelivered(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := spoolProducer(t, c, t.TempDir(), nil)
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))

	f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	select {
	case <-f.Persisted():
	case <-time.After(5 * time.Second):
		t.Fatal("Persisted not closed with the broker down")
	}
	select {
	case <-f.Done():
		_, err := f.Wait(context.Background())
		t.Fatalf("completed with the broker down: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, c.RestartBroker(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = f.Wait(ctx)
	require.NoError(t, err)

	plain := newProducer(t, c, Config{})
	pf := plain.Send(context.Background(), &Record{Topic: "t", Value: []byte("plain")})
	_, err = pf.Wait(ctx)
	require.NoError(t, err)
	select {
	case <-pf.Persisted():
		t.Fatal("a record without a spool is reported persisted")
	default:
	}
}

// TestSpoolOutageOutlivesDeliveryTimeout: during an outage of several
// DeliveryTimeouts a spooled record is not failed by the delivery timeout
// (it would be without a spool); all are delivered once the broker is
// back.
func TestSpoolOutageOutlivesDeliveryTimeout(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	const dt = 400 * time.Millisecond
	p := spoolProducer(t, c, t.TempDir(), func(cfg *Config) {
		cfg.RequestTimeout = 300 * time.Millisecond
		cfg.DeliveryTimeout = dt
		cfg.MaxBlock = 300 * time.Millisecond
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	var fs []*Future
	for i := range 50 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}))
	}
	// A new topic, whose metadata cannot come during the outage: parked
	// beyond MaxBlock too.
	for i := range 5 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "later", Value: []byte(fmt.Sprint(i))}))
	}
	time.Sleep(5 * dt)
	for i, f := range fs {
		if _, ok, err := f.Result(); ok {
			t.Fatalf("record %d completed during the outage: %v", i, err)
		}
	}
	require.NoError(t, c.RestartBroker(0))
	require.NoError(t, c.CreateTopic("later", 1))
	waitAll(t, fs)
}

// TestSpoolFullFailsAfterMaxBlock: at MaxBytes (nothing acknowledged: the
// broker is down) Send blocks up to MaxBlock, then the record fails with
// ErrBufferExhausted wrapping spool.ErrFull, not persisted.
func TestSpoolFullFailsAfterMaxBlock(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	const maxBlock = 300 * time.Millisecond
	p := spoolProducer(t, c, t.TempDir(), func(cfg *Config) {
		cfg.MaxBlock = maxBlock
		cfg.Spool.MaxBytes = 64 << 10
		cfg.Spool.SegmentBytes = 16 << 10
	})
	require.NoError(t, c.StopBroker(0))
	val := make([]byte, 1<<10)
	var full *Future
	var took time.Duration
	for range 200 {
		start := time.Now()
		f := p.Send(context.Background(), &Record{Topic: "t", Value: val})
		if _, ok, err := f.Result(); ok {
			require.Error(t, err)
			full, took = f, time.Since(start)
			break
		}
	}
	require.NotNil(t, full, "64 KiB of spool took 200 records of 1 KiB")
	_, err := full.Wait(context.Background())
	require.ErrorIs(t, err, ErrBufferExhausted)
	require.ErrorIs(t, err, spool.ErrFull)
	require.ErrorIs(t, err, ErrBufferFull, "the name issue 34 gives it")
	assert.GreaterOrEqual(t, took, maxBlock, "Send waited MaxBlock for room")
	select {
	case <-full.Persisted():
		t.Fatal("a record the full spool refused is reported persisted")
	default:
	}
	// TrySend does not wait.
	start := time.Now()
	_, err = p.TrySend(context.Background(), &Record{Topic: "t", Value: val}).Wait(context.Background())
	require.ErrorIs(t, err, ErrBufferExhausted)
	assert.Less(t, time.Since(start), maxBlock)
	require.NoError(t, c.RestartBroker(0))
}

// TestSpoolFsyncFailureStopsIt: under SyncAlways, after an fsync fails
// (EIO injected), the records it should have covered are never reported
// persisted, every later Send fails with ErrSpoolFailed wrapping the
// cause, and SyncSpool says so.
func TestSpoolFsyncFailureStopsIt(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	faults, unregister := spoolfault.Register(dir)
	defer unregister()
	p := spoolProducer(t, c, dir, func(cfg *Config) { cfg.Spool.Sync = spool.SyncAlways })
	ok := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("before")})
	select {
	case <-ok.Persisted():
	case <-time.After(5 * time.Second):
		t.Fatal("not persisted with a working disk")
	}
	require.NoError(t, p.SyncSpool())

	faults.SetSyncErr(syscall.EIO)
	lost := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("unsynced")})
	var failed error
	deadline := time.Now().Add(5 * time.Second)
	for failed == nil && time.Now().Before(deadline) {
		f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("after")})
		if _, done, err := f.Result(); done && err != nil {
			failed = err
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Error(t, failed, "no Send failed after the fsync failure")
	assert.ErrorIs(t, failed, ErrSpoolFailed)
	assert.ErrorIs(t, failed, spool.ErrFailed)
	assert.ErrorIs(t, failed, syscall.EIO)
	select {
	case <-lost.Persisted():
		t.Fatal("a record whose fsync failed is reported persisted")
	case <-time.After(200 * time.Millisecond):
	}
	err := p.SyncSpool()
	assert.ErrorIs(t, err, ErrSpoolFailed)
	assert.ErrorIs(t, err, syscall.EIO)
	assert.True(t, errors.Is(p.Close(context.Background()), ErrSpoolFailed), "Close reports the failed spool")
}

// TestSpoolReplayAfterRestart: records a producer persisted but could not
// deliver (its broker down; Close gave up) are sent again by the next New
// on the directory: in their original order, before any new record of
// their topic, each to the partition it was written with even though the
// topic has more partitions now (keys are not re-hashed), and a record
// written before its topic's partitions were known (-1) through the
// partitioner. The RecoveryHook gets each one's outcome by sequence, and
// the samsa-spool header carries that sequence.
func TestSpoolReplayAfterRestart(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))
	require.NoError(t, c.CreateTopic("fresh", 1))
	dir := t.TempDir()

	a := spoolProducer(t, c, dir, nil)
	_, err := a.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 200
	want := map[string]int32{} // value → partition written with
	var order []string
	for i := range n {
		rec := &Record{Topic: "t", Key: []byte{byte(i % 5)}, Value: []byte(fmt.Sprintf("a-%d", i))}
		if i%10 == 9 {
			rec.Key, rec.ExplicitPartition, rec.Partition = nil, true, 1
		}
		f := a.Send(context.Background(), rec)
		<-f.Persisted()
		part := int32(1)
		if !rec.ExplicitPartition {
			part = KeyPartition(rec.Key, 2)
		}
		want[string(rec.Value)] = part
		order = append(order, string(rec.Value))
	}
	// "fresh" was never in a's metadata: written with partition -1.
	<-a.Send(context.Background(), &Record{Topic: "fresh", Value: []byte("a-fresh")}).Persisted()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err = a.Close(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "records were left for the next producer")

	require.NoError(t, c.RestartBroker(0))
	require.NoError(t, c.AddPartitions("t", 4)) // keys would hash elsewhere now
	outcomes := make(chan error, 2*n)
	seqs := make(chan uint64, 2*n)
	b := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.RecoveryHook = func(seq uint64, md RecordMetadata, err error) {
			seqs <- seq
			outcomes <- err
		}
	})
	var fs []*Future
	for i := range 20 {
		fs = append(fs, b.Send(context.Background(), &Record{Topic: "t", Key: []byte{byte(i % 5)}, Value: []byte(fmt.Sprintf("b-%d", i))}))
	}
	waitAll(t, fs)
	require.NoError(t, b.Flush(context.Background()))
	for range n + 1 {
		select {
		case err := <-outcomes:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the RecoveryHook did not get every replayed record's outcome")
		}
	}
	hooked := map[uint64]bool{}
	for range n + 1 {
		hooked[<-seqs] = true
	}

	got := map[string]int32{}
	var gotOrder []string
	for part := range int32(4) {
		recs, err := c.Records("t", part)
		require.NoError(t, err)
		sawB := false
		for _, r := range recs {
			v := string(r.Value)
			switch {
			case len(v) > 2 && v[:2] == "a-":
				assert.False(t, sawB, "replayed %s after a new record in partition %d", v, part)
				got[v] = part
				gotOrder = append(gotOrder, v)
				_, seq := spoolHeader(t, r)
				assert.True(t, hooked[seq], "the hook got no outcome for sequence %d (%s)", seq, v)
			case len(v) > 2 && v[:2] == "b-":
				sawB = true
			}
		}
	}
	assert.Equal(t, want, got, "each replayed record went to the partition it was written with")
	// Per partition, the original order.
	for part := range int32(2) {
		var w, g []string
		for _, v := range order {
			if want[v] == part {
				w = append(w, v)
			}
		}
		for _, v := range gotOrder {
			if got[v] == part {
				g = append(g, v)
			}
		}
		assert.Equal(t, w, g, "partition %d", part)
	}
	fresh, err := c.Records("fresh", 0)
	require.NoError(t, err)
	require.Len(t, fresh, 1)
	assert.Equal(t, "a-fresh", string(fresh[0].Value))
	require.NoError(t, b.Close(context.Background()))
	assert.Empty(t, reopenUnacked(t, dir))
}

// TestSpoolCloseDuringReplayKeepsTheBacklog: a producer closed while its
// replay waits (the broker still down) leaves the backlog in the spool,
// whole, for the next one; its goroutines end with Close.
func TestSpoolCloseDuringReplayKeepsTheBacklog(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	a := spoolProducer(t, c, dir, nil)
	require.NoError(t, c.StopBroker(0))
	for i := range 10 {
		<-a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}).Persisted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	a.Close(ctx)
	cancel()

	before := goroutineIDs()
	b := spoolProducer(t, c, dir, nil)
	// A new record of the topic spills behind the replay (or, the
	// backlog already in memory, goes to memory): TrySend accepts it.
	f := b.TrySend(context.Background(), &Record{Topic: "t", Value: []byte("new")})
	_, ok, err := f.Result()
	require.False(t, ok, "TrySend failed at once: %v", err)
	time.Sleep(200 * time.Millisecond)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	b.Close(ctx)
	cancel()
	left := workingGoroutines(before)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = workingGoroutines(before) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("goroutines left after Close: %v", left)
	}
	unacked := reopenUnacked(t, dir)
	require.GreaterOrEqual(t, len(unacked), 10)
	for i := range 10 {
		assert.Equal(t, fmt.Sprint(i), unacked[i])
	}
}

// TestSpoolRecordsOfAnEndedContext: spooled records whose Send context
// ends before they are sent fail with the context's error and leave the
// spool (the caller was told; they are not sent again), each by its own
// sequence although they share their context's group; records sent
// with context.Background() stay for the next producer.
func TestSpoolRecordsOfAnEndedContext(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	p := spoolProducer(t, c, dir, nil)
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))

	ctx, cancel := context.WithCancel(context.Background())
	var ended, kept []*Future
	for i := range 6 {
		if i%2 == 0 {
			ended = append(ended, p.Send(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprintf("ended-%d", i))}))
		} else {
			kept = append(kept, p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprintf("kept-%d", i))}))
		}
	}
	// Cancel before waiting for Persisted: the records are in the spool
	// (Send gave them their sequences), and a wait here would give the
	// IO goroutine time to take their batch into a request to the stopped
	// broker, after which their context no longer applies.
	cancel()
	for _, f := range append(ended, kept...) {
		<-f.Persisted()
	}
	for i, f := range ended {
		_, err := waitFuture(t, f, 10*time.Second)
		require.ErrorIs(t, err, context.Canceled, "record %d", i)
	}
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	p.Close(closeCtx)
	closeCancel()
	assert.Equal(t, []string{"kept-1", "kept-3", "kept-5"}, reopenUnacked(t, dir))
}
