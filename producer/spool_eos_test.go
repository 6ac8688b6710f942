package producer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// eosProducer starts a producer with an exactly-once spool in dir on c.
func eosProducer(t *testing.T, c *testbroker.Cluster, dir string, mut func(*Config)) *Producer {
	t.Helper()
	return spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.ExactlyOnce = true
		cfg.Spool.CommitInterval = 5 * time.Millisecond
		if mut != nil {
			mut(cfg)
		}
	})
}

// committedRecords reads topic's partition with read_committed (a Fetch
// at isolation level 1 through a plain producer's metadata client, from
// the log start to the last stable offset, dropping aborted transactions)
// and returns its records' values, in offset order, with their
// samsa-spool sequences.
func committedRecords(t *testing.T, c *testbroker.Cluster, topic string, part int32) (values []string, seqs []uint64) {
	t.Helper()
	reader := newProducer(t, c, Config{})
	leader, _, err := c.Leader(topic, part)
	require.NoError(t, err)
	id, err := c.TopicID(topic)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = reader.readCommitted(ctx, topic, progressPartition{partition: part, leader: leader, topicID: id}, nil, func(r recordbatch.Record) error {
		values = append(values, string(r.Value))
		for _, h := range r.Headers {
			if h.Key == spool.HeaderKey {
				_, seq, err := spool.DecodeHeader(h.Value)
				require.NoError(t, err)
				seqs = append(seqs, seq)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, reader.Close(ctx))
	return values, seqs
}

// TestSpoolExactlyOnceRoundTrip: in exactly-once mode every record is
// committed in a transaction with the spool's progress record: a
// read_committed reader sees each record once, with its samsa-spool header,
// in Send order per partition; the progress topic is created and holds the
// sequence after the last record; nothing is left unacknowledged in the
// spool.
func TestSpoolExactlyOnceRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string // how the records are sent
	}{
		{name: "futures", kind: "future"},
		{name: "callbacks", kind: "callback"},
		{name: "channel", kind: "channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 2))
			dir := t.TempDir()
			p := eosProducer(t, c, dir, nil)
			id := p.spool.ID()
			const n = 300
			errs := make(chan error, n)
			var fs []*Future
			for i := range n {
				rec := &Record{Topic: "t", Key: []byte{byte(i % 5)}, Value: []byte(fmt.Sprint(i))}
				switch tc.kind {
				case "future":
					fs = append(fs, p.Send(context.Background(), rec))
				case "callback":
					p.SendCallback(context.Background(), rec, func(md RecordMetadata, err error) { errs <- err })
				case "channel":
					res := make(chan Result, 1)
					p.SendTo(context.Background(), rec, res)
					go func() { errs <- (<-res).Err }()
				}
			}
			if tc.kind == "future" {
				// Flush waits for the records queued for the driver.
				require.NoError(t, p.Flush(context.Background()))
				for i, f := range fs {
					_, done, _ := f.Result()
					require.True(t, done, "record %d not complete after Flush", i)
				}
				mds := waitAll(t, fs)
				for i, md := range mds {
					assert.Equal(t, "t", md.Topic)
					assert.GreaterOrEqual(t, md.Offset, int64(0), "record %d", i)
				}
			} else {
				for range n {
					select {
					case err := <-errs:
						require.NoError(t, err)
					case <-time.After(30 * time.Second):
						t.Fatal("a record did not complete")
					}
				}
			}
			m := p.SpoolExactlyOnceMetrics()
			assert.Positive(t, m.Transactions)
			assert.Zero(t, m.DuplicatesSkipped)
			require.NoError(t, p.Close(context.Background()))

			seen := map[string]int{}
			for part := range int32(2) {
				values, seqs := committedRecords(t, c, "t", part)
				require.Len(t, seqs, len(values), "every record carries the samsa-spool header")
				for i, v := range values {
					seen[v]++
					if i > 0 {
						assert.Greater(t, seqs[i], seqs[i-1], "partition %d: Send order", part)
					}
				}
			}
			assert.Len(t, seen, n)
			for v, k := range seen {
				assert.Equal(t, 1, k, "record %s seen %d times", v, k)
			}
			values, _ := committedRecords(t, c, DefaultSpoolProgressTopic, 0)
			require.NotEmpty(t, values, "progress records are committed")
			next, err := decodeProgress([]byte(values[len(values)-1]))
			require.NoError(t, err)
			assert.Equal(t, uint64(n), next, "the last progress record names the sequence after the last record")
			assert.Empty(t, reopenUnacked(t, dir), "every committed record is acknowledged to the spool")
			_ = id
		})
	}
}

// TestSpoolExactlyOnceConfig: New refuses what exactly-once mode cannot
// keep its promise with, fills the defaults, and derives the
// transactional id; the properties set the fields; the transaction
// methods are the driver's.
func TestSpoolExactlyOnceConfig(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{name: "explicit transactional id", mut: func(c *Config) { c.TransactionalID = "mine" }, want: "TransactionalID"},
		{name: "no idempotence", mut: func(c *Config) { c.DisableIdempotence, c.Acks = true, AcksLeader }, want: "DisableIdempotence"},
		{name: "acks none", mut: func(c *Config) { c.DisableIdempotence, c.Acks = true, AcksNone }, want: "Acks"},
		{name: "overflow", mut: func(c *Config) { c.Spool.Mode = SpoolOverflow }, want: "Spool.Mode"},
		{name: "negative interval", mut: func(c *Config) { c.Spool.CommitInterval = -time.Second }, want: "Spool.CommitInterval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Brokers: []string{"127.0.0.1:1"}, Spool: &SpoolConfig{Dir: dir, ExactlyOnce: true}}
			tc.mut(&cfg)
			p, err := New(cfg)
			if p != nil {
				p.Close(context.Background())
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("defaults", func(t *testing.T) {
		c := newCluster(t, testbroker.Config{Brokers: 1})
		p := spoolProducer(t, c, t.TempDir(), func(cfg *Config) { cfg.Spool.ExactlyOnce = true })
		assert.Equal(t, DefaultSpoolProgressTopic, p.cfg.Spool.ProgressTopic)
		assert.Equal(t, 100*time.Millisecond, p.cfg.Spool.CommitInterval)
		assert.Equal(t, "samsa-spool-"+p.spool.ID().String(), p.cfg.TransactionalID)
		assert.Contains(t, p.cfg.String(), `ExactlyOnce=true ProgressTopic="samsa-spool-progress" CommitInterval=100ms`, "a printed config says the mode")
		for _, err := range []error{
			p.BeginTransaction(),
			p.CommitTransaction(context.Background()),
			p.AbortTransaction(context.Background()),
		} {
			assert.ErrorIs(t, err, ErrNoTransaction)
		}
	})

	t.Run("properties", func(t *testing.T) {
		cfg, err := ConfigFromProperties(map[string]string{
			"bootstrap.servers": "k:9092", "samsa.spool.dir": "d",
			"samsa.spool.exactly.once.enable": "true", "samsa.spool.progress.topic": "progress",
			"samsa.spool.commit.interval.ms": "250",
		})
		require.NoError(t, err)
		assert.Equal(t, &SpoolConfig{Dir: "d", ExactlyOnce: true, ProgressTopic: "progress", CommitInterval: 250 * time.Millisecond}, cfg.Spool)
		for key, v := range map[string]string{
			"samsa.spool.exactly.once.enable": "yes", "samsa.spool.progress.topic": "", "samsa.spool.commit.interval.ms": "0",
		} {
			_, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092", "samsa.spool.dir": "d", key: v})
			assert.ErrorContains(t, err, key)
		}
	})
}

// TestSpoolExactlyOnceProgressTopicUnusable: a progress topic that is
// missing and may not (DisableAutoTopicCreation) or cannot (an invalid
// name) be created fails every record with ErrSpoolProgress, naming the
// topic; the records stay in the spool.
func TestSpoolExactlyOnceProgressTopicUnusable(t *testing.T) {
	cases := []struct {
		name  string
		topic string
		mut   func(*Config)
		want  string
	}{
		{name: "creation not allowed", topic: "progress", mut: func(c *Config) { c.DisableAutoTopicCreation = true }, want: "DisableAutoTopicCreation"},
		{name: "invalid name", topic: "bad/name", want: "INVALID_TOPIC"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			dir := t.TempDir()
			p := eosProducer(t, c, dir, func(cfg *Config) {
				cfg.Spool.ProgressTopic = tc.topic
				if tc.mut != nil {
					tc.mut(cfg)
				}
			})
			f := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := f.Wait(ctx)
			require.ErrorIs(t, err, ErrSpoolProgress)
			assert.ErrorContains(t, err, fmt.Sprintf("%q", tc.topic))
			assert.ErrorContains(t, err, tc.want)
			// Later Sends fail at once with it too, before the
			// spool takes them.
			_, err = p.Send(context.Background(), &Record{Topic: "t", Value: []byte("y")}).Wait(ctx)
			assert.ErrorIs(t, err, ErrSpoolProgress)
			require.NoError(t, p.Close(context.Background()))
			// x stays in the spool if it was persisted (a Send after the
			// driver failed is refused before the spool takes it).
			var want []string
			select {
			case <-f.Persisted():
				want = []string{"x"}
			default:
			}
			assert.Equal(t, want, reopenUnacked(t, dir), "a persisted record stays in the spool")
		})
	}
}

// copyDir copies the regular files of src into a new directory dst (a
// spool's copy: same ID, same records).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(dst, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		in.Close()
		require.NoError(t, out.Close())
	}
}

// TestSpoolExactlyOnceZombieIsFenced: a second producer opening a copy of
// the spool's directory (the same ID, so the same transactional id) fences
// the first: the first's next records fail with ErrProducerFenced (fatal)
// and stay in its spool, and the second's are committed.
func TestSpoolExactlyOnceZombieIsFenced(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	a := eosProducer(t, c, dirA, nil)
	waitAll(t, []*Future{a.Send(context.Background(), &Record{Topic: "t", Value: []byte("a0")})})
	copyDir(t, dirA, dirB)
	b := eosProducer(t, c, dirB, nil)
	require.Equal(t, a.cfg.TransactionalID, b.cfg.TransactionalID)
	waitAll(t, []*Future{b.Send(context.Background(), &Record{Topic: "t", Value: []byte("b0")})})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := a.Send(context.Background(), &Record{Topic: "t", Value: []byte("a1")}).Wait(ctx)
	require.Error(t, err)
	assert.True(t, IsFatal(err), "the zombie's record fails with a fatal error: %v", err)
	assert.ErrorIs(t, err, ErrProducerFenced)
	_, err = a.Send(context.Background(), &Record{Topic: "t", Value: []byte("a2")}).Wait(ctx)
	assert.ErrorIs(t, err, ErrProducerFenced, "later Sends fail at once, before the spool takes them")
	a.Close(context.Background())
	assert.Equal(t, []string{"a1"}, reopenUnacked(t, dirA), "the zombie's record stays in its spool")

	waitAll(t, []*Future{b.Send(context.Background(), &Record{Topic: "t", Value: []byte("b1")})})
	require.NoError(t, b.Close(context.Background()))
	values, _ := committedRecords(t, c, "t", 0)
	assert.Equal(t, []string{"a0", "b0", "b1"}, values)
}

// TestSpoolExactlyOnceCloseWithoutCluster: with no broker reachable,
// Close does not wait for the driver's producer id when no Send is
// queued; with one queued, Close waits for it until its ctx ends, then the
// record fails with ErrClosed and stays in the spool for the next New.
func TestSpoolExactlyOnceCloseWithoutCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		send bool
	}{
		{name: "nothing sent"},
		{name: "a record queued", send: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, RetryBackoff: 10 * time.Millisecond,
				Spool: &SpoolConfig{Dir: dir, ExactlyOnce: true}})
			require.NoError(t, err)
			var f *Future
			if tc.send {
				f = p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")})
			}
			if !tc.send {
				// Unbounded: nothing is queued, so nothing is waited for.
				done := make(chan error, 1)
				go func() { done <- p.Close(context.Background()) }()
				select {
				case err := <-done:
					assert.NoError(t, err)
				case <-time.After(3 * time.Second):
					t.Fatal("Close waited for a cluster it does not need")
				}
				assert.Empty(t, reopenUnacked(t, dir))
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			p.Close(ctx)
			assert.Less(t, time.Since(start), 2*time.Second, "Close returned by its ctx")
			_, err = f.Wait(context.Background())
			assert.ErrorIs(t, err, ErrClosed)
			assert.Equal(t, []string{"x"}, reopenUnacked(t, dir), "the record stays in the spool")
		})
	}
}

// TestSpoolExactlyOnceProgressIgnoresThePartitioner: the progress record
// goes to the partition its key hashes to (murmur2), where the next New
// reads it, whatever Config.Partitioner does with other records (one that
// sends every record elsewhere would hide the progress from the restart).
func TestSpoolExactlyOnceProgressIgnoresThePartitioner(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	createCompactedTopic(t, c, "prog", 4)
	dir := t.TempDir()
	p := eosProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.ProgressTopic = "prog"
		cfg.Partitioner = PartitionerFunc(func(rec *Record, n int32) (int32, error) {
			if rec.Key == nil {
				return 0, nil
			}
			return (KeyPartition(rec.Key, n) + 1) % n, nil
		})
	})
	waitAll(t, []*Future{p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")})})
	want := KeyPartition(progressKey(p.spool.ID()), 4)
	require.NoError(t, p.Close(context.Background()))
	values, _ := committedRecords(t, c, "prog", want)
	require.NotEmpty(t, values, "the progress record is in partition %d, its key's", want)
	next, err := decodeProgress([]byte(values[len(values)-1]))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), next)
}

// BenchmarkSpoolExactlyOnce: 1 KiB records through a write-ahead spool
// (SyncInterval) on the test broker, at least once and exactly once
// (CommitInterval 5 ms and the 100 ms default), waiting for every record:
// records/s and the mean latency from Send to the outcome.
func BenchmarkSpoolExactlyOnce(b *testing.B) {
	for _, bc := range []struct {
		name     string
		eos      bool
		interval time.Duration
	}{
		{name: "at-least-once"},
		{name: "exactly-once-5ms", eos: true, interval: 5 * time.Millisecond},
		{name: "exactly-once-100ms", eos: true, interval: 100 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newCluster(b, testbroker.Config{Brokers: 1})
			require.NoError(b, c.CreateTopic("t", 4))
			p := newProducer(b, c, Config{Linger: 2 * time.Millisecond, Spool: &SpoolConfig{
				Dir: b.TempDir(), ExactlyOnce: bc.eos, CommitInterval: bc.interval}})
			value := make([]byte, 1024)
			var latency atomic.Int64
			done := make(chan struct{}, 1)
			var left atomic.Int64
			left.Store(int64(b.N))
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				p.SendCallback(context.Background(), &Record{Topic: "t", Value: value}, func(_ RecordMetadata, err error) {
					if err != nil {
						b.Error(err)
					}
					latency.Add(int64(time.Since(start)))
					if left.Add(-1) == 0 {
						done <- struct{}{}
					}
				})
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(latency.Load())/float64(b.N)/1e6, "ms/record-latency")
			b.ReportMetric(float64(p.SpoolExactlyOnceMetrics().Transactions), "transactions")
		})
	}
}

// TestSpoolExactlyOnceBrokerErrors: an abortable error aborts the
// transaction and sends the same records again in the next one (each
// future completes once, with success; read_committed sees each record
// once); a record the broker refuses for good (INVALID_RECORD) fails,
// leaves the spool and is not sent again, while the others of its range
// are committed.
func TestSpoolExactlyOnceBrokerErrors(t *testing.T) {
	cases := []struct {
		name    string
		code    int16
		wantErr bool // the intercepted record fails for good
	}{
		{name: "transaction abortable", code: 120},
		{name: "invalid record", code: 87, wantErr: true},
		{name: "topic authorization", code: 29, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			require.NoError(t, c.CreateTopic("u", 1))
			tid, err := c.TopicID("t")
			require.NoError(t, err)
			// t's partition answered with the code (u's in the same
			// request succeed): once for the abortable error; for a
			// refusal, every time, as a broker refuses an invalid or
			// unauthorized record again (the abort that follows the
			// refusal can reach the driver first, which then sends the
			// record once more).
			times := 1
			if tc.wantErr {
				times = 0 // every time
			}
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: times, After: true,
				Match: func(_ int32, req kmsg.Request) bool {
					for _, rt := range req.(*kmsg.ProduceRequest).Topics {
						if rt.Topic == "t" || rt.TopicID == tid {
							return true
						}
					}
					return false
				},
				Rewrite: func(resp kmsg.Response) {
					for i := range resp.(*kmsg.ProduceResponse).Topics {
						rt := &resp.(*kmsg.ProduceResponse).Topics[i]
						if rt.Topic == "t" || rt.TopicID == tid {
							for j := range rt.Partitions {
								rt.Partitions[j].ErrorCode = tc.code
							}
						}
					}
				}})
			dir := t.TempDir()
			p := eosProducer(t, c, dir, func(cfg *Config) { cfg.Spool.CommitInterval = 50 * time.Millisecond })
			bad := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("t0")})
			var fs []*Future
			for i := range 10 {
				fs = append(fs, p.Send(context.Background(), &Record{Topic: "u", Value: []byte(fmt.Sprint("u", i))}))
			}
			waitAll(t, fs)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = bad.Wait(ctx)
			if tc.wantErr {
				require.Error(t, err)
				assert.False(t, IsRetriable(err), "%v", err)
			} else {
				require.NoError(t, err)
			}
			assert.Positive(t, p.SpoolExactlyOnceMetrics().Aborted, "the first transaction was aborted")
			require.NoError(t, p.Close(context.Background()))
			assert.Empty(t, reopenUnacked(t, dir), "nothing is left to send again")
			tv, _ := committedRecords(t, c, "t", 0)
			if tc.wantErr {
				assert.Empty(t, tv)
			} else {
				assert.Equal(t, []string{"t0"}, tv)
			}
			uv, _ := committedRecords(t, c, "u", 0)
			want := make([]string, 10)
			for i := range want {
				want[i] = fmt.Sprint("u", i)
			}
			assert.Equal(t, want, uv, "read_committed sees the other records once each")
		})
	}
}

// TestSpoolExactlyOnceCommitAnswerLost: the connection drops after the
// coordinator applied the commit, before its answer: the driver's commit
// is asked again and recognized, never aborted or sent again; each record
// is seen once by read_committed.
func TestSpoolExactlyOnceCommitAnswerLost(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(testbroker.Interceptor{Keys: []int16{26}, Times: 1, After: true, Drop: true})
	dir := t.TempDir()
	p := eosProducer(t, c, dir, nil)
	var fs []*Future
	for i := range 20 {
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}))
	}
	waitAll(t, fs)
	require.NoError(t, p.Close(context.Background()))
	values, _ := committedRecords(t, c, "t", 0)
	want := make([]string, 20)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	assert.Equal(t, want, values)
	assert.Empty(t, reopenUnacked(t, dir))
}
