package harness

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

func TestParseStatsLine(t *testing.T) {
	cases := []struct {
		name string
		line string
		want brokerStats
		err  string
	}{
		{name: "the testbroker line", line: "testbroker stats: requests=12 produce=9 batches=7 records=20001 bytes=1234567\n",
			want: brokerStats{Batches: 7, Records: 20001, Bytes: 1234567}},
		{name: "the kfakebroker line", line: "kfakebroker stats: produce=9 batches=7 records=20001 bytes=1234567\n",
			want: brokerStats{Batches: 7, Records: 20001, Bytes: 1234567}},
		{name: "zeros", line: "testbroker stats: requests=0 produce=0 batches=0 records=0 bytes=0",
			want: brokerStats{}},
		{name: "fields in another order, unknown ones ignored",
			line: "testbroker stats: bytes=3 future=x records=2 batches=1 requests=5",
			want: brokerStats{Batches: 1, Records: 2, Bytes: 3}},
		{name: "beyond 32 bits", line: "testbroker stats: batches=1 records=5000000000 bytes=600000000000",
			want: brokerStats{Batches: 1, Records: 5_000_000_000, Bytes: 600_000_000_000}},
		{name: "the old format", line: "testbroker: 12 requests, 9 produce requests, 7 batches, 20001 records", err: "not a stats line"},
		{name: "another line", line: "time=... level=WARN msg=x", err: "not a stats line"},
		{name: "bytes missing", line: "testbroker stats: batches=7 records=20001", err: "want batches, records and bytes"},
		{name: "a field twice", line: "testbroker stats: batches=7 batches=7 records=1", err: "want batches, records and bytes"},
		{name: "not a number", line: "testbroker stats: batches=7 records=x bytes=1", err: `bad records "x"`},
		{name: "negative", line: "testbroker stats: batches=-1 records=1 bytes=1", err: `bad batches "-1"`},
		{name: "not key=value", line: "testbroker stats: batches 7 records=1 bytes=1", err: "not key=value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatsLine(tc.line)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestRunStats: each run gets the counts since the snapshot before it; a
// failed snapshot leaves its run, and the next one, without counts rather
// than crediting a run with another's batches.
func TestRunStats(t *testing.T) {
	type snap struct {
		st  brokerStats
		err error
	}
	fail := snap{err: errors.New("no line")}
	s := func(b, r, n int64) snap { return snap{st: brokerStats{Batches: b, Records: r, Bytes: n}} }
	type want struct {
		d  brokerStats
		ok bool
	}
	w := func(b, r, n int64) want { return want{brokerStats{Batches: b, Records: r, Bytes: n}, true} }
	none := want{}
	cases := []struct {
		name  string
		snaps []snap // the first one is start's
		want  []want // one per run
	}{
		{"from a fresh broker", []snap{s(0, 0, 0), s(10, 1001, 50_000), s(30, 2002, 90_000)},
			[]want{w(10, 1001, 50_000), w(20, 1001, 40_000)}},
		{"the broker had served before", []snap{s(5, 50, 500), s(6, 60, 600)}, []want{w(1, 10, 100)}},
		{"a run with nothing appended", []snap{s(5, 50, 500), s(5, 50, 500)}, []want{w(0, 0, 0)}},
		{"start fails", []snap{fail, s(10, 100, 1000), s(15, 150, 1500)}, []want{none, w(5, 50, 500)}},
		{"a snapshot fails in the middle", []snap{s(0, 0, 0), s(1, 10, 100), fail, s(4, 40, 400), s(5, 50, 500)},
			[]want{w(1, 10, 100), none, none, w(1, 10, 100)}},
		{"counters go backwards (another broker)", []snap{s(9, 90, 900), s(1, 10, 100), s(2, 20, 200)},
			[]want{none, w(1, 10, 100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			r := runStats{snap: func() (brokerStats, error) {
				sn := tc.snaps[i]
				i++
				return sn.st, sn.err
			}}
			_ = r.start()
			for run, wt := range tc.want {
				d, ok, _ := r.next()
				assert.Equal(t, wt.ok, ok, "run %d", run)
				assert.Equal(t, wt.d, d, "run %d", run)
			}
			assert.Equal(t, len(tc.snaps), i, "one snapshot per run, and start's")
		})
	}
}

// TestBrokerStderr: stats lines go to the stats channel, whole, however the
// writes split them; every other line stays in the tail for error messages.
func TestBrokerStderr(t *testing.T) {
	e := newBrokerStderr()
	in := "time=1 level=WARN msg=slow\ntestbroker stats: requests=1 produce=1 batches=2 records=3 bytes=4\ntestbroker: stopping\n"
	for i := 0; i < len(in); i += 7 { // odd-sized writes, lines split anywhere
		_, err := e.Write([]byte(in[i:min(i+7, len(in))]))
		require.NoError(t, err)
	}
	select {
	case line := <-e.stats:
		st, err := parseStatsLine(line)
		require.NoError(t, err)
		assert.Equal(t, brokerStats{Batches: 2, Records: 3, Bytes: 4}, st)
	case <-time.After(time.Second):
		t.Fatal("no stats line")
	}
	assert.Equal(t, "time=1 level=WARN msg=slow\ntestbroker: stopping\n", e.String())

	// Unread stats lines never block the broker's output.
	for range 10 {
		_, err := e.Write([]byte("testbroker stats: batches=1 records=1 bytes=1\n"))
		require.NoError(t, err)
	}
}

// TestSummaryBrokerCounts: the summary's records/batch and wire bytes per
// record are medians over the successful runs that have the broker's
// counts, and the table shows "–" without them.
func TestSummaryBrokerCounts(t *testing.T) {
	ok := func(batches, records, bytes int64) RunResult {
		return RunResult{RecordsPerSec: 1000, CPUNsPerRecord: 1000, PeakRSSBytes: 1 << 20,
			Batches: batches, BrokerRecords: records, WireBytes: bytes}
	}
	s := Summary{Client: Ours, Runs: []RunResult{
		ok(10, 1000, 40_000), // 100 records/batch, 40 B/record
		ok(20, 1000, 50_000), // 50, 50
		ok(0, 0, 0),          // no counts: left out
		{Error: "boom", Batches: 1, BrokerRecords: 1e6, WireBytes: 1e9}, // failed: left out
		ok(4, 1000, 60_000), // 250, 60
	}}
	s.summarize()
	assert.Equal(t, 4, s.OK)
	assert.InDelta(t, 100, s.RecordsPerBatch, 1e-9)
	assert.InDelta(t, 50, s.WireBytesPerRecord, 1e-9)

	none := Summary{Client: Baseline, Runs: []RunResult{ok(0, 0, 0)}}
	none.summarize()
	assert.Zero(t, none.RecordsPerBatch)
	assert.Zero(t, none.WireBytesPerRecord)

	// Real Kafka counts records and bytes (log sizes), not batches.
	kafka := Summary{Client: "kgo", Runs: []RunResult{ok(0, 1000, 30_000)}}
	kafka.summarize()
	assert.Zero(t, kafka.RecordsPerBatch)
	assert.InDelta(t, 30, kafka.WireBytesPerRecord, 1e-9)

	spec, err := workload.ByName("100B-lz4", 1000)
	require.NoError(t, err)
	rep := Report{Workloads: []WorkloadReport{{Spec: spec, Clients: []Summary{s, none}}}}
	rep.Workloads[0].ratios()
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| records/batch | wire B/record | ok runs |")
	assert.Contains(t, md.String(), "| 1.00 | 1.00 | 100.0 | 50.0 | 4/5 |")
	assert.Contains(t, md.String(), "| – | – | 1/1 |")
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "| 100B-lz4 |") || strings.HasPrefix(line, "| workload |") || strings.HasPrefix(line, "|---") {
			assert.Equal(t, 12, strings.Count(line, "|"), "11 columns: %s", line)
		}
	}
}

// TestLogStatsCountWhatTheBrokerCounted: on a storing broker, the
// topic's log sizes (DescribeLogDirs) and end offsets (ListOffsets), as
// logStats reads them from real Kafka, grow by exactly the bytes and
// records kfakebroker counted in the Produce requests: wire bytes per
// record mean the same on real Kafka as on kfake.
func TestLogStatsCountWhatTheBrokerCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := Options{Broker: BrokerKfake, BrokerStore: true, BinDir: t.TempDir(), Workloads: []string{"W2c"}}
	require.NoError(t, o.defaults())
	o.Clients = nil // the broker only
	var err error
	o.modDir, err = moduleDir(ctx)
	require.NoError(t, err)
	_, err = build(ctx, o, map[string]string{})
	require.NoError(t, err)
	spec, err := workload.ByName("W2c", 1)
	require.NoError(t, err)
	b, err := startBroker(ctx, o, spec)
	require.NoError(t, err)
	defer func() { assert.NoError(t, b.stop()) }()

	statsCl, err := kgo.NewClient(kgo.SeedBrokers(b.bootstrap()))
	require.NoError(t, err)
	logs := &logStats{cl: statsCl, topic: spec.Topic(), partitions: spec.Partitions}
	defer logs.close()
	counted0, err := b.stats()
	require.NoError(t, err)
	logs0, err := logs.stats()
	require.NoError(t, err)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.bootstrap()), kgo.DefaultProduceTopic(spec.Topic()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	p := workload.NewPayload(spec)
	const records = 3000
	for i := 0; i < records; i += 500 {
		var batch []*kgo.Record
		for j := i; j < i+500; j++ {
			batch = append(batch, &kgo.Record{Value: p.Value(j)})
		}
		require.NoError(t, cl.ProduceSync(ctx, batch...).FirstErr())
	}

	counted1, err := b.stats()
	require.NoError(t, err)
	logs1, err := logs.stats()
	require.NoError(t, err)
	counted, ok := counted1.since(counted0)
	require.True(t, ok)
	logged, ok := logs1.since(logs0)
	require.True(t, ok)
	assert.Equal(t, int64(records), logged.Records, "every record below the end offsets")
	assert.Equal(t, counted.Records, logged.Records)
	assert.Equal(t, counted.Bytes, logged.Bytes, "the logs hold the batches as sent")
	assert.Zero(t, logged.Batches, "the logs do not count batches")
	assert.Positive(t, counted.Batches)
}
