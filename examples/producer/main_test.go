package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
	"github.com/samsa-go/samsa/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testRecords keeps each run short under -race.
const testRecords = 3000

// runJSON runs the example with -json and the given flags and decodes its
// summary. err is run's error.
func runJSON(t *testing.T, ctx context.Context, args ...string) (summary, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"-json"}, args...), &stdout, &stderr)
	var s summary
	if stdout.Len() > 0 {
		require.Equal(t, 1, strings.Count(stdout.String(), "\n"), "one JSON object on one line")
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &s), stdout.String())
	}
	return s, stderr.String(), err
}

func TestRunEmbedded(t *testing.T) {
	n := strconv.Itoa(testRecords)
	cases := []struct {
		name        string
		args        []string
		keys        int
		compression string
		acks        string
		idempotent  bool
	}{
		{"defaults", nil, 10000, "lz4", "all", true},
		{"unkeyed", []string{"-keys", "0"}, 0, "lz4", "all", true},
		{"none", []string{"-compression", "none"}, 10000, "none", "all", true},
		{"gzip", []string{"-compression", "gzip"}, 10000, "gzip", "all", true},
		{"snappy", []string{"-compression", "snappy"}, 10000, "snappy", "all", true},
		{"lz4 unkeyed", []string{"-compression", "lz4", "-keys", "0"}, 0, "lz4", "all", true},
		{"zstd few keys", []string{"-compression", "zstd", "-keys", "7"}, 7, "zstd", "all", true},
		{"acks leader", []string{"-acks", "1"}, 10000, "lz4", "leader", false},
		{"acks none", []string{"-acks", "none", "-keys", "0"}, 0, "lz4", "none", false},
		{"not idempotent", []string{"-idempotent=false", "-linger", "0", "-batch-size", "1024"}, 10000, "lz4", "all", false},
		{"big records", []string{"-record-size", "5000", "-records", "200"}, 10000, "lz4", "all", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-records", n, "-partitions", "4"}, tc.args...)
			s, stderr, err := runJSON(t, t.Context(), args...)
			require.NoError(t, err)
			assert.Empty(t, stderr, "no progress bar with -json")

			want := int64(testRecords)
			if tc.name == "big records" {
				want = 200
			}
			assert.Equal(t, want, s.Sent)
			assert.Equal(t, want, s.Records)
			assert.Zero(t, s.Failed)
			assert.True(t, s.Verified, "problems: %q", s.Problems)
			assert.True(t, s.PerKeyOrderVerified)
			assert.True(t, s.ReadBack)
			assert.Equal(t, want, s.ReadBackRecords)
			assert.Empty(t, s.Problems)
			assert.Equal(t, tc.keys, s.Keys)
			assert.Equal(t, tc.compression, s.Compression)
			assert.Equal(t, tc.acks, s.Acks)
			assert.Equal(t, tc.idempotent, s.Idempotent)
			assert.Equal(t, "embedded, 3 brokers", s.Cluster)
			assert.Equal(t, 4, s.Partitions)

			assert.Positive(t, s.Batches)
			assert.GreaterOrEqual(t, s.Bytes, want*int64(s.RecordSize))
			if tc.compression == "none" {
				assert.InDelta(t, 1, s.CompressionRatio, 0.01)
			} else {
				// Every value repeats the same letters after its sequence
				// number, so every codec compresses well.
				assert.Greater(t, s.CompressionRatio, 2.0)
			}
			assert.Positive(t, s.RecordsPerSec)
			assert.Positive(t, s.MiBPerSec)
			assert.Positive(t, s.Elapsed)
			assert.Equal(t, uint64(want), s.AckLatency.Samples, "every acknowledged record is timed")
			assert.Equal(t, uint64((want+sendSampleMask)/(sendSampleMask+1)), s.SendLatency.Samples)
			for _, l := range []latency{s.SendLatency, s.AckLatency} {
				assert.LessOrEqual(t, l.P50, l.P99)
				assert.LessOrEqual(t, l.P99, l.Max)
			}
			if tc.acks != "none" {
				assert.Positive(t, s.AckLatency.P50)
			}
		})
	}
}

func TestRunText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-records", "1000", "-keys", "10"}, &stdout, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stderr.String(), "no progress bar when stderr is not a terminal")
	out := stdout.String()
	for _, want := range []string{
		`samsa producer: 1000 records to "samsa-example" (embedded, 3 brokers, 12 partitions)`,
		"settings      100-byte values, 10 keys, lz4, acks=all, idempotent",
		"              linger 5ms, batch size 64.0KiB",
		"records       1000 acknowledged, 0 failed",
		"bytes         102.5KiB of keys and values",
		" MiB/s (",
		"compression ratio ",
		"throughput    ",
		"send latency  p50 ",
		"ack latency   p50 ",
		"verified      yes: read back 1000 records, each once; order per key kept",
	} {
		assert.Contains(t, out, want)
	}
}

// -transactional-id: records go in transactions of -txn-records (the
// last one smaller), each committed; the read-back reads committed
// records only, and finds every record once. On a real cluster nothing is
// read back, and the transactions commit too.
func TestRunTransactional(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 2})
	cases := []struct {
		name     string
		args     []string
		txns     int64
		per      int64
		readBack bool
	}{
		{"embedded", []string{"-txn-records", "700"}, 5, 700, true},
		{"default txn-records", nil, 3, 1000, true},
		{"real cluster", []string{"-brokers", strings.Join(c.Addrs(), ","), "-topic", "txn-real", "-txn-records", "1000"}, 3, 1000, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-records", strconv.Itoa(testRecords), "-partitions", "4", "-transactional-id", "example-" + tc.name}, tc.args...)
			s, _, err := runJSON(t, t.Context(), args...)
			require.NoError(t, err)
			assert.True(t, s.Verified, "problems: %q", s.Problems)
			assert.True(t, s.Transactional)
			assert.Equal(t, tc.txns, s.Transactions)
			assert.Equal(t, tc.per, s.TxnRecords)
			assert.Equal(t, int64(testRecords), s.Records)
			assert.Equal(t, tc.readBack, s.ReadBack)
			if tc.readBack {
				assert.Equal(t, int64(testRecords), s.ReadBackRecords, "read_committed sees every record once")
			}
		})
	}
	recs, err := c.CommittedRecords("txn-real")
	require.NoError(t, err)
	assert.Len(t, recs, testRecords, "the real cluster's transactions committed")

	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-records", "250", "-transactional-id", "text", "-txn-records", "100"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "transactions  3 committed, 100 records each")
	assert.Contains(t, stdout.String(), "verified      yes: read back 250 records, each once")
}

// A transaction whose records fail cannot commit: the run stops there,
// aborts it, and fails (exit 1), naming the transaction.
func TestRunTransactionFails(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 1, Topics: map[string]int32{"denied": 2}})
	c.FailProduce(0, samsatest.TopicAuthorizationFailed)
	s, _, err := runJSON(t, t.Context(), "-brokers", c.Addrs()[0], "-topic", "denied", "-records", "500",
		"-transactional-id", "denied", "-txn-records", "100")
	require.ErrorIs(t, err, errNotVerified)
	assert.False(t, s.Verified)
	assert.Zero(t, s.Transactions)
	assert.Zero(t, s.Records)
	assert.Equal(t, int64(100), s.Failed, "the first transaction's records")
	require.Len(t, s.Problems, 2, "%q", s.Problems)
	assert.Contains(t, s.Problems[0], "transaction 1 (records 0 to 99): CommitTransaction: ")
	assert.Contains(t, s.Problems[0], "TOPIC_AUTHORIZATION_FAILED")
	assert.Contains(t, s.Problems[0], "; 400 of 500 records not sent")
	assert.Contains(t, s.Problems[1], "100 records failed")
	recs, err := c.CommittedRecords("denied")
	require.NoError(t, err)
	assert.Empty(t, recs)
}

// A real cluster (here a test broker given with -brokers): nothing is read
// back, and the summary says so. -partitions tells the truth on every
// broker: a missing topic is created with it, also by a broker that
// auto-creates topics with 1 partition (issue 22: the topic had 1
// partition), and a topic that existed keeps its count, which the summary
// shows with a warning.
func TestRunRealCluster(t *testing.T) {
	cases := []struct {
		name    string
		cluster samsatest.Config
		want    int  // the topic's partitions after the run
		warning bool // the summary warns that it is not -partitions
	}{
		{"created", samsatest.Config{Brokers: 2, DisableAutoTopicCreation: true}, 6, false},
		{"broker auto-creates", samsatest.Config{Brokers: 2, DefaultPartitions: 1}, 6, false},
		{"existed", samsatest.Config{Brokers: 2, Topics: map[string]int32{"real": 2}}, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := samsatest.Start(t, tc.cluster)
			s, _, err := runJSON(t, t.Context(), "-brokers", strings.Join(c.Addrs(), ","), "-topic", "real", "-partitions", "6", "-records", "2000")
			require.NoError(t, err)
			assert.True(t, s.Verified, "%q", s.Problems)
			assert.True(t, s.PerKeyOrderVerified)
			assert.False(t, s.ReadBack)
			assert.Equal(t, int64(2000), s.Records)
			assert.Equal(t, "["+strings.Join(c.Addrs(), " ")+"]", s.Cluster)
			assert.Equal(t, tc.want, s.Partitions, "the topic's partitions in the summary")
			assert.Equal(t, 6, s.PartitionsAsked)

			var total int64
			for part := range int32(tc.want) {
				hw, err := c.HighWatermark("real", part)
				require.NoError(t, err)
				total += hw
			}
			assert.Equal(t, int64(2000), total, "the topic has every record")
			_, err = c.HighWatermark("real", int32(tc.want))
			assert.Error(t, err, "the topic has more than %d partitions", tc.want)

			var text bytes.Buffer
			require.NoError(t, s.writeText(&text))
			assert.Contains(t, text.String(), fmt.Sprintf(`records to "real" ([%s], %d partitions)`, strings.Join(c.Addrs(), " "), tc.want))
			if !tc.warning {
				assert.Empty(t, s.Warnings)
				assert.NotContains(t, text.String(), "warning")
				return
			}
			require.Len(t, s.Warnings, 1)
			want := `topic "real" has 2 partitions, not the 6 of -partitions`
			assert.Contains(t, s.Warnings[0], want)
			assert.Contains(t, text.String(), "  warning       "+want)
		})
	}
}

// A broker that rejects every batch for good: every record fails, the
// summary says so, and run returns an error (main exits 1).
func TestRunFailedRecords(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 1, Topics: map[string]int32{"denied": 2}})
	c.FailProduce(0, samsatest.TopicAuthorizationFailed)

	s, _, err := runJSON(t, t.Context(), "-brokers", c.Addrs()[0], "-topic", "denied", "-records", "500")
	require.ErrorIs(t, err, errNotVerified)
	assert.Contains(t, err.Error(), "500 records failed")
	assert.Equal(t, int64(500), s.Failed)
	assert.Zero(t, s.Records)
	assert.False(t, s.Verified)
	assert.Contains(t, s.FirstError, "TOPIC_AUTHORIZATION_FAILED")
}

// An interrupt (the context ends) stops sending; the summary reports it and
// run fails.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, _, err := runJSON(t, ctx, "-records", "1000")
	require.ErrorIs(t, err, errNotVerified)
	assert.True(t, s.Interrupted)
	assert.False(t, s.Verified)
	assert.False(t, s.ReadBack)
}

func TestRunUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in the error; "" for -help
	}{
		{"help", []string{"-help"}, ""},
		{"unknown flag", []string{"-nope"}, "flag provided but not defined: -nope"},
		{"extra argument", []string{"extra"}, `unexpected arguments: ["extra"]`},
		{"records", []string{"-records", "0"}, "-records must be positive, got 0"},
		{"record size", []string{"-record-size", "4"}, "-record-size must be at least 8, got 4"},
		{"keys", []string{"-keys", "-1"}, "-keys must not be negative"},
		{"partitions", []string{"-partitions", "0"}, "-partitions must be positive"},
		{"linger", []string{"-linger", "-1ms"}, "-linger must be in [0, 1m0s], got -1ms"},
		{"linger too long", []string{"-linger", "2m"}, "-linger must be in [0, 1m0s], got 2m0s"},
		{"batch size", []string{"-batch-size", "0"}, "-batch-size must be in [1, 33554432] (the buffer memory), got 0"},
		{"batch size over the buffer", []string{"-batch-size", "40000000"}, "-batch-size must be in [1, 33554432]"},
		{"compression", []string{"-compression", "brotli"}, `-compression "brotli" is not none, gzip, snappy, lz4 or zstd`},
		{"acks", []string{"-acks", "2"}, `-acks "2" is not all, leader or none`},
		{"several", []string{"-records", "-5", "-acks", "x"}, "-records must be positive, got -5; -acks"},
		{"idempotent with acks=1", []string{"-acks", "1", "-idempotent", "-records", "1"}, "-idempotent needs -acks all, got -acks leader"},
		{"txn-records alone", []string{"-txn-records", "10"}, "-txn-records needs -transactional-id"},
		{"txn-records zero", []string{"-transactional-id", "x", "-txn-records", "0"}, "-txn-records must be positive, got 0"},
		{"transactional acks=1", []string{"-transactional-id", "x", "-acks", "1"}, "-transactional-id needs -acks all, got -acks leader"},
		{"transactional not idempotent", []string{"-transactional-id", "x", "-idempotent=false"}, "-transactional-id needs -idempotent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tc.args, &stdout, &stderr)
			require.Error(t, err)
			assert.Empty(t, stdout.String())
			if tc.want == "" {
				assert.ErrorIs(t, err, flag.ErrHelp)
				assert.Contains(t, stderr.String(), "Usage: go run ./examples/producer")
				assert.Contains(t, stderr.String(), "-record-size bytes")
				return
			}
			assert.Contains(t, err.Error(), tc.want)
			var usage usageError
			assert.ErrorAs(t, err, &usage, "main exits 2")
			for _, field := range []string{"AcksAll", "BatchSize", "Linger", "DeliveryTimeout"} {
				assert.NotContains(t, err.Error(), field, "flags are named, not Config fields")
			}
		})
	}
}

func TestOptionsIdempotenceFollowsAcks(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"-acks", "leader"}, false},
		{[]string{"-acks", "0"}, false},
		{[]string{"-acks", "all", "-idempotent=false"}, false},
		{[]string{"-acks", "-1"}, true},
	}
	for _, tc := range cases {
		o, err := parseOptions(tc.args, &bytes.Buffer{})
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, o.idempotent, "%q", tc.args)
		assert.Equal(t, !tc.want, o.config([]string{"b:1"}).DisableIdempotence, "%q", tc.args)
	}
}

func TestOptionsConfig(t *testing.T) {
	o, err := parseOptions([]string{"-linger", "0", "-batch-size", "1000", "-compression", "ZSTD", "-partitions", "5"}, &bytes.Buffer{})
	require.NoError(t, err)
	cfg := o.config([]string{"h:1"})
	assert.Negative(t, cfg.Linger, "linger 0 is Config's negative: no linger")
	assert.Equal(t, 1000, cfg.BatchSize)
	assert.Equal(t, "zstd", cfg.Compression.String())
	assert.True(t, cfg.AutoCreateTopics)
	assert.Equal(t, int32(5), cfg.AutoCreatePartitions)
	assert.Equal(t, []string{"h:1"}, cfg.Brokers)

	o, err = parseOptions([]string{"-brokers", " a:1, b:2 ,,"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a:1", "b:2"}, o.brokers)
	assert.Equal(t, 5*time.Millisecond, o.linger)
}

func TestIsTerminal(t *testing.T) {
	assert.False(t, isTerminal(&bytes.Buffer{}))
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a regular file is not a terminal")
}

// Under acks=none nothing is acknowledged, and the text says so.
func TestRunTextAcksNone(t *testing.T) {
	var stdout bytes.Buffer
	err := run(t.Context(), []string{"-records", "500", "-acks", "none", "-linger", "0", "-batch-size", "1048576"}, &stdout, &bytes.Buffer{})
	require.NoError(t, err)
	out := stdout.String()
	assert.Contains(t, out, "records       500 written to the connection, not acknowledged (acks=none), 0 failed")
	assert.Contains(t, out, "write latency p50 ")
	assert.Contains(t, out, "              no linger, batch size 1.0MiB")
	assert.NotContains(t, out, "acknowledged,")
	assert.NotContains(t, out, "ack latency")
}

// The progress output says "verifying" while the records are read back.
func TestProduceShowsVerifying(t *testing.T) {
	o, err := parseOptions([]string{"-records", "300", "-partitions", "2"}, &bytes.Buffer{})
	require.NoError(t, err)
	var progress syncBuffer
	s, err := produce(t.Context(), o, &progress)
	require.NoError(t, err)
	assert.True(t, s.Verified, "%q", s.Problems)
	assert.Contains(t, progress.String(), "verifying: reading 300 records back from the embedded cluster...")
}

// Ctrl-C while the brokers do not answer: run returns within a moment
// (Close gets interruptGrace, not closeTimeout), with a partial summary.
func TestRunInterruptedPromptly(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"stuck": 2}})
	c.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Produce}, Stall: true})
	ctx, cancel := context.WithCancel(t.Context())
	type outcome struct {
		s   summary
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		s, _, err := runJSON(t, ctx, "-brokers", c.Addrs()[0], "-topic", "stuck", "-records", "100000000")
		done <- outcome{s, err}
	}()
	time.Sleep(300 * time.Millisecond) // sending, nothing acknowledged
	cancel()
	select {
	case out := <-done:
		require.ErrorIs(t, out.err, errNotVerified)
		assert.True(t, out.s.Interrupted)
		assert.Less(t, out.s.Records+out.s.Failed, out.s.Sent, "partial: not every record was sent")
		assert.Zero(t, out.s.Records, "nothing acknowledged while stalled")
		assert.Contains(t, strings.Join(out.s.Problems, "; "), "interrupted after")
	case <-time.After(closeTimeout):
		t.Fatalf("run did not return within %v of the interrupt", closeTimeout)
	}
}

// main prints the program's name once, also before an error of package
// producer, which starts with the same name.
func TestErrorLineNamesTheProgramOnce(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: Brokers: at least one bootstrap broker is required", producer.ErrInvalidConfig),
			"producer: invalid config: Brokers: at least one bootstrap broker is required"},
		{errors.New("starting the embedded cluster: boom"), "producer: starting the embedded cluster: boom"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, errorLine(tc.err))
	}
}

// TestRunEmbeddedWithSpool: -spool DIR sends every record through a
// write-ahead spool; once the run is verified, the spool holds nothing
// left to send. With -transactional-id it is refused.
func TestRunEmbeddedWithSpool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s, _, err := runJSON(t, t.Context(), "-records", strconv.Itoa(testRecords), "-partitions", "4", "-spool", dir)
	require.NoError(t, err)
	assert.Equal(t, int64(testRecords), s.Records)
	assert.Zero(t, s.Failed)
	assert.True(t, s.Verified, "problems: %q", s.Problems)
	sp, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	defer sp.Close()
	assert.False(t, sp.Recovery().NewID, "the run made the spool in -spool's directory")
	assert.Zero(t, sp.Recovery().Unacked, "records left in the spool after a verified run")

	_, err = parseOptions([]string{"-spool", dir, "-transactional-id", "t"}, io.Discard)
	var usage usageError
	require.ErrorAs(t, err, &usage)
	assert.Contains(t, usage.msg, "-spool")
}
