package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// TestSuiteOptions: with several brokers, one of them Kafka, the Java
// client runs on Kafka only; a Kafka bootstrap address applies to Kafka
// only; every broker's profiles go to a directory of its own.
func TestSuiteOptions(t *testing.T) {
	cases := []struct {
		name     string
		clients  []string
		brokers  []string
		broker   string
		want     []string
		skipJava bool
		profile  string
	}{
		{"java on kafka", []string{"samsa", "kgo", "java"}, []string{"kfake", "kafka"}, "kafka", []string{"samsa", "kgo", "java"}, false, "prof/kafka"},
		{"no java on kfake next to kafka", []string{"samsa", "kgo", "java"}, []string{"kfake", "kafka"}, "kfake", []string{"samsa", "kgo"}, true, "prof/kfake"},
		{"java on kfake alone", []string{"samsa", "java"}, []string{"kfake"}, "kfake", []string{"samsa", "java"}, false, "prof"},
		{"java on two brokers without kafka", []string{"java"}, []string{"kfake", "testbroker"}, "kfake", []string{"java"}, false, "prof/kfake"},
		{"every client by default, java left out", nil, []string{"testbroker", "kafka"}, "testbroker", []string{"samsa", "kgo", "sarama", "kafkago", "confluent"}, true, "prof/testbroker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Clients: tc.clients, KafkaBootstrap: "127.0.0.1:9092", ProfileDir: "prof"}
			bo, skip := suiteOptions(o, tc.brokers, tc.broker)
			assert.Equal(t, tc.want, bo.Clients)
			assert.Equal(t, tc.skipJava, skip)
			assert.Equal(t, tc.broker, bo.Broker)
			assert.Equal(t, tc.broker == BrokerKafka, bo.KafkaBootstrap != "")
			assert.Equal(t, tc.profile, bo.ProfileDir)
			if len(tc.clients) > 1 {
				assert.Equal(t, tc.clients[len(tc.clients)-1], o.Clients[len(o.Clients)-1], "the caller's list is left alone")
			}
		})
	}
}

func TestRunSuiteRefusesBrokers(t *testing.T) {
	cases := []struct {
		brokers []string
		err     string
	}{
		{[]string{"kfake", "redpanda"}, `unknown broker "redpanda"`},
		{[]string{"kfake", "kafka", "kfake"}, "broker kfake named twice"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.brokers, ","), func(t *testing.T) {
			s, err := RunSuite(context.Background(), Options{}, tc.brokers)
			require.ErrorContains(t, err, tc.err)
			assert.Nil(t, s)
		})
	}
}

// TestSuiteSummary: the README's table has a row per base workload and
// broker, samsa and kgo side by side; the table of variants has a row per
// workload variant, broker and client, workloads first; the targets are
// listed once for every broker.
func TestSuiteSummary(t *testing.T) {
	w1, w3, w3z := specOf(t, "W1"), specOf(t, "W3"), specOf(t, "W3-zipf")
	kfakeRep := &Report{BrokerName: BrokerKfake, Runs: 1, Records: 1000, CPUs: 2, BufferMemory: 64 << 20, Workloads: []WorkloadReport{
		pairOf(w1, sumOf(Ours, 300, 3000, 30<<20), sumOf(Baseline, 1000, 1000, 60<<20)),
		pairOf(w3, sumOf(Ours, 9000, 120, 60<<20), sumOf(Baseline, 9000, 100, 90<<20)),
		pairOf(w3z, sumOf(Ours, 9000, 100, 70<<20), sumOf(Baseline, 9000, 100, 90<<20)),
	}}
	kafkaRep := &Report{BrokerName: BrokerKafka, Runs: 1, Records: 1000, CPUs: 2, BufferMemory: 64 << 20, Workloads: []WorkloadReport{
		{Spec: w1, Clients: []Summary{sumOf(Ours, 400, 2000, 40<<20), sumOf(Baseline, 800, 1000, 50<<20),
			{Client: Java, Runs: []RunResult{{Error: "boom"}}}}},
		{Spec: w3z, Error: "the broker did not start"},
	}}
	kafkaRep.Workloads[0].Clients[0].WireBytesPerRecord = 110.4
	kafkaRep.Workloads[0].ratios()
	s := &Suite{Reports: []*Report{kfakeRep, kafkaRep}}

	var md bytes.Buffer
	require.NoError(t, s.WriteMarkdown(&md))
	out := md.String()
	var readme, variants []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| W") {
			continue
		}
		switch strings.Count(line, "|") {
		case 13: // 12 columns
			readme = append(readme, line)
		case 12: // 11 columns
			variants = append(variants, line)
		default:
			t.Errorf("a row of neither table: %s", line)
		}
	}
	assert.Equal(t, []string{
		"| W1 `100B` | kfake | 3,000 | 1,000 | 3.00 | 300 | 1,000 | 0.30 | – | – | 30.0 MiB | 60.0 MiB |",
		"| W1 `100B` | kafka | 2,000 | 1,000 | 2.00 | 400 | 800 | 0.50 | 110.4 | – | 40.0 MiB | 50.0 MiB |",
		"| W3 `1KiB-zstd-keyed` | kfake | 120 | 100 | 1.20 | 9,000 | 9,000 | 1.00 | – | – | 60.0 MiB | 90.0 MiB |",
	}, readme, "base workloads only, samsa and kgo")
	// The variants' rows, in workload, broker, client order.
	require.GreaterOrEqual(t, len(variants), 9)
	assert.Equal(t, []string{
		"| W1 `100B` | text | – | kfake | samsa | 3,000 | 300 | – | 30.0 MiB | 1.00 | 1.00 |",
		"| W1 `100B` | text | – | kfake | kgo | 1,000 | 1,000 | – | 60.0 MiB | 3.00 | 0.30 |",
		"| W1 `100B` | text | – | kafka | samsa | 2,000 | 400 | 110.4 | 40.0 MiB | 1.00 | 1.00 |",
		"| W1 `100B` | text | – | kafka | kgo | 1,000 | 800 | – | 50.0 MiB | 2.00 | 0.50 |",
		"| W1 `100B` | text | – | kafka | java | failed | | | | | |",
		"| W3 `1KiB-zstd-keyed` | text | scattered | kfake | samsa | 120 | 9,000 | – | 60.0 MiB | 1.00 | 1.00 |",
		"| W3 `1KiB-zstd-keyed` | text | scattered | kfake | kgo | 100 | 9,000 | – | 90.0 MiB | 1.20 | 1.00 |",
		"| W3 `1KiB-zstd-keyed-zipf` | text | zipf | kfake | samsa | 100 | 9,000 | – | 70.0 MiB | 1.00 | 1.00 |",
		"| W3 `1KiB-zstd-keyed-zipf` | text | zipf | kfake | kgo | 100 | 9,000 | – | 90.0 MiB | 1.00 | 1.00 |",
	}, variants[:9])
	assert.Contains(t, out, "- CPU/record samsa/kgo, 100B, kfake: 0.30 (target ≤ 0.40): met\n")
	assert.Contains(t, out, "- CPU/record samsa/kgo, 100B, kafka: 0.50 (target ≤ 0.40): NOT met\n")
	assert.Contains(t, out, "- records/s samsa/kgo, 1KiB-zstd-keyed-zipf, kfake: 1.00 (target ≥ 1.50): NOT met\n")
	assert.Equal(t, 1, strings.Count(out, "Issue 26's targets"), "listed once, for every broker")
	assert.Contains(t, out, "\n## On kfake\n")
	assert.Contains(t, out, "\n## On kafka\n")
	assert.Contains(t, out, "- 1KiB-zstd-keyed-zipf: the broker did not start")
	assert.Len(t, s.Checks(), 3+2+2+3+2, "W1, W3, W3-zipf on kfake; W1 and W3-zipf (unmeasured) on kafka")
}

// TestRunSuiteOnKafkaWithoutKafka runs the Kafka path (topic created with
// CreateTopics, wire bytes from DescribeLogDirs and ListOffsets) against
// an in-process kfake cluster standing in for a running Kafka cluster
// (-kafka-bootstrap), next to kfakebroker: the summary has both brokers
// and wire bytes for every client on each.
func TestRunSuiteOnKafkaWithoutKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log bytes.Buffer
	s, err := RunSuite(ctx, Options{
		Clients: []string{"samsa", "kgo"}, Workloads: []string{"W2c"}, Records: tinyRecords, Runs: 1,
		Timeout: 3 * time.Minute, BinDir: t.TempDir(), Log: &log, KafkaBootstrap: c.ListenAddrs()[0],
	}, []string{BrokerKfake, BrokerKafka})
	require.NoError(t, err, "log:\n%s", log.String())
	require.Len(t, s.Reports, 2)
	for _, r := range s.Reports {
		require.Len(t, r.Workloads, 1)
		w := r.Workloads[0]
		require.Empty(t, w.Error)
		for _, sum := range w.Clients {
			require.Equal(t, 1, sum.OK, "%s on %s: %v", sum.Client, r.BrokerName, sum.Runs)
			assert.Positive(t, sum.WireBytesPerRecord, "%s on %s", sum.Client, r.BrokerName)
		}
	}
	var md bytes.Buffer
	require.NoError(t, s.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| W2c `100B-json-lz4` | json | – | kfake | samsa | ")
	assert.Contains(t, md.String(), "| W2c `100B-json-lz4` | json | – | kafka | kgo | ")
	assert.Contains(t, md.String(), "| W2c `100B-json-lz4` | kafka | ")
}

// TestKafkaManyPartitionRecords checks that W4 alone runs fewer records on
// Kafka (Options.KafkaManyPartitionRecords), and that the tables name the
// count in its rows.
func TestKafkaManyPartitionRecords(t *testing.T) {
	cases := []struct {
		name     string
		o        Options
		workload string
		want     int
	}{
		{name: "W4 on kafka, default", o: Options{Broker: BrokerKafka}, workload: "W4", want: DefaultKafkaManyPartitionRecords},
		{name: "W4 zipf on kafka", o: Options{Broker: BrokerKafka, KafkaManyPartitionRecords: 5000}, workload: "W4-zipf", want: 5000},
		{name: "W1 on kafka", o: Options{Broker: BrokerKafka}, workload: "W1", want: workload.DefaultRecords},
		{name: "W4 on kfake", o: Options{Broker: BrokerKfake}, workload: "W4", want: workload.DefaultRecords},
		{name: "fewer records asked for", o: Options{Broker: BrokerKafka, Records: 50_000}, workload: "W4", want: 50_000},
		{name: "turned off", o: Options{Broker: BrokerKafka, KafkaManyPartitionRecords: -1}, workload: "W4", want: workload.DefaultRecords},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			require.NoError(t, o.defaults())
			spec, err := workload.ByName(tc.workload, o.Records)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.recordsFor(spec.Name))
			run := o.spec(spec.Name) // as Run runs it
			assert.Equal(t, tc.want, run.Records)
			assert.Equal(t, spec.Name, run.Name)
			assert.Equal(t, o.BufferMemory, run.BufferMemory)
		})
	}

	w4 := specOf(t, "W4")
	w4.Records = 100
	rep := &Report{BrokerName: BrokerKafka, Runs: 1, Records: 1000, CPUs: 2, BufferMemory: 64 << 20, Workloads: []WorkloadReport{
		pairOf(specOf(t, "W1"), sumOf(Ours, 300, 3000, 30<<20), sumOf(Baseline, 1000, 1000, 60<<20)),
		pairOf(w4, sumOf(Ours, 2000, 30, 30<<20), sumOf(Baseline, 4000, 20, 60<<20)),
	}}
	var md bytes.Buffer
	require.NoError(t, (&Suite{Reports: []*Report{rep}}).WriteSummary(&md))
	out := md.String()
	assert.Contains(t, out, "| W1 `100B` | kafka | 3,000 |", "the run's own count is not named")
	assert.Contains(t, out, "| W4 `100B-keyed-10k-partitions` | kafka (100 records) | 30 | 20 | 1.50 |")
	assert.Contains(t, out, "| W4 `100B-keyed-10k-partitions` | text | scattered | kafka (100 records) | samsa |")
}

// TestJavaLeftOutOfManyPartitions: the Java client runs every workload but
// W4, whose report says why, and the other clients run W4.
func TestJavaLeftOutOfManyPartitions(t *testing.T) {
	o := Options{Broker: BrokerKafka, Clients: []string{Ours, Baseline, Java}, Log: io.Discard}
	require.NoError(t, o.defaults())
	rep := &Report{BrokerName: BrokerKafka, Records: 1000, Runs: 1, BuildErrors: map[string]string{}}
	for _, tc := range []struct {
		workload string
		want     []string
	}{
		{"W1", []string{Ours, Baseline, Java}},
		{"W3-zipf", []string{Ours, Baseline, Java}},
		{"W4", []string{Ours, Baseline}},
		{"W4-ordered", []string{Ours, Baseline}},
	} {
		wr := WorkloadReport{Spec: specOf(t, tc.workload)}
		assert.Equal(t, tc.want, workloadClients(o, wr.Spec, rep, &wr), tc.workload)
		if len(tc.want) == 3 {
			assert.Empty(t, wr.Skipped, tc.workload)
			continue
		}
		assert.Equal(t, map[string]string{Java: javaManyPartitions}, wr.Skipped, tc.workload)
		rep.Workloads = append(rep.Workloads, wr)
	}
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "\nSkipped on 100B-keyed-10k-partitions: java (left out above 1 000 partitions")
}

// TestSkippedClientHasNoRow: a client left out of a workload has no
// summary in it, so no table lists it as failed.
func TestSkippedClientHasNoRow(t *testing.T) {
	o := Options{Broker: BrokerKfake, Clients: []string{Ours, Baseline, Java}, Log: io.Discard, BinDir: t.TempDir()}
	require.NoError(t, o.defaults())
	rep := &Report{BrokerName: BrokerKfake, Records: 1000, Runs: 1, BuildErrors: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no broker starts: the summaries are built all the same
	wr := runWorkload(ctx, o, specOf(t, "W4"), rep)
	var clients []string
	for _, s := range wr.Clients {
		clients = append(clients, s.Client)
	}
	assert.Equal(t, []string{Ours, Baseline}, clients)
	rep.Workloads = append(rep.Workloads, wr)
	var md bytes.Buffer
	require.NoError(t, (&Suite{Reports: []*Report{rep}}).WriteSummary(&md))
	assert.NotContains(t, md.String(), "| java |")
}

// TestNeedsOwnBroker: on a Kafka cluster Run launched, a workload of more
// than 1 000 partitions gets a broker of its own unless it comes first.
func TestNeedsOwnBroker(t *testing.T) {
	w1, w4, w4z := specOf(t, "W1"), specOf(t, "W4"), specOf(t, "W4-zipf")
	assert.False(t, needsOwnBroker(false, w4), "first on the broker")
	assert.True(t, needsOwnBroker(true, w4), "after W1 or another W4")
	assert.True(t, needsOwnBroker(true, w4z))
	assert.False(t, needsOwnBroker(true, w1))
}

// TestSuiteJSONRoundTrip: a suite saved as JSON (-jsonfile) prints the
// same tables once read back (peerbench -from-json).
func TestSuiteJSONRoundTrip(t *testing.T) {
	w4 := specOf(t, "W4")
	w4.Records = 100
	rep := &Report{BrokerName: BrokerKafka, Runs: 1, Records: 1000, CPUs: 2, BufferMemory: 64 << 20, Workloads: []WorkloadReport{
		pairOf(specOf(t, "W1"), sumOf(Ours, 300, 3000, 30<<20), sumOf(Baseline, 1000, 1000, 60<<20)),
		pairOf(w4, sumOf(Ours, 2000, 30, 30<<20), sumOf(Baseline, 4000, 20, 60<<20)),
	}}
	rep.Workloads[1].Skipped = map[string]string{Java: javaManyPartitions}
	s := &Suite{Reports: []*Report{rep}}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back Suite
	require.NoError(t, json.Unmarshal(b, &back))
	var want, got bytes.Buffer
	require.NoError(t, s.WriteMarkdown(&want))
	require.NoError(t, back.WriteMarkdown(&got))
	assert.Equal(t, want.String(), got.String())
	assert.Contains(t, got.String(), "kafka (100 records)")
	assert.Contains(t, got.String(), "Skipped on 100B-keyed-10k-partitions: java")
}
