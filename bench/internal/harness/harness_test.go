package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// tinyRecords keeps the end-to-end tests fast: they check that every client
// gets every record acknowledged through the harness, not speed.
const tinyRecords = 2000

func TestMedian(t *testing.T) {
	cases := []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd count, unsorted", []float64{9, 1, 5}, 5},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, median(tc.in), 1e-12)
		})
	}
}

func TestThousands(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{999.4, "999"},
		{1000, "1,000"},
		{1234567.8, "1,234,568"},
		{-12345, "-12,345"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, thousands(tc.in), "%v", tc.in)
	}
}

func TestOptionsDefaults(t *testing.T) {
	cases := []struct {
		name    string
		in      Options
		clients []string
		err     string
	}{
		{name: "zero value runs everything", clients: Clients},
		{name: "ours is added first", in: Options{Clients: []string{"sarama", "kgo"}}, clients: []string{"samsa", "kgo", "sarama"}},
		{name: "duplicates collapse", in: Options{Clients: []string{"kgo", "samsa", "kgo"}}, clients: []string{"samsa", "kgo"}},
		{name: "unknown client", in: Options{Clients: []string{"rdkafka"}}, err: `unknown client "rdkafka"`},
		{name: "unknown workload", in: Options{Workloads: []string{"1GiB"}}, err: `unknown workload "1GiB"`},
		{name: "negative runs", in: Options{Runs: -1}, err: "runs -1"},
		{name: "TLS compare needs testbroker", in: Options{Broker: BrokerKfake, TLSCompare: true}, err: "comparing plaintext with TLS needs broker testbroker"},
		{name: "no TLS with real Kafka", in: Options{Broker: BrokerKafka, TLS: true}, err: "TLS needs broker testbroker or kfake"},
		{name: "TLS compare implies TLS", in: Options{TLSCompare: true}, clients: Clients},
		{name: "buffer memory below a batch", in: Options{BufferMemory: 1 << 10}, err: "buffer memory 1024 is below the batch size"},
		{name: "unknown key order", in: Options{Keys: []string{"random"}}, err: `unknown key order "random"`},
		{name: "unknown values", in: Options{Values: []string{"xml"}}, err: `unknown values "xml"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			err := o.defaults()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.clients, o.Clients)
			assert.Equal(t, workload.DefaultRecords, o.Records)
			assert.Equal(t, 3, o.Runs)
			assert.Len(t, o.Workloads, len(workload.All(1)))
			assert.Equal(t, int64(workload.DefaultBufferMemory), o.BufferMemory, "64 MiB for every client")
			assert.Equal(t, []string{Ours, Baseline}, o.Profile, "the codec split compares samsa with kgo")
		})
	}
}

func TestRatiosAndTarget(t *testing.T) {
	run := func(rps, cpu float64) []RunResult {
		return []RunResult{{RecordsPerSec: rps, CPUNsPerRecord: cpu, PeakRSSBytes: 1 << 20}}
	}
	cases := []struct {
		name       string
		ours, base []RunResult
		met        bool
		verdict    string
	}{
		{"both targets met", run(1300, 700), run(1000, 1000), true, "throughput 1.30× kgo (issue 6's target ≥ 1.3: met), CPU/record 0.70× kgo (issue 6's target ≤ 0.7: met)"},
		{"throughput short", run(1200, 500), run(1000, 1000), false, "issue 6's target ≥ 1.3: NOT met"},
		{"cpu short", run(2000, 800), run(1000, 1000), false, "issue 6's target ≤ 0.7: NOT met"},
		{"baseline failed", run(2000, 500), []RunResult{{Error: "boom"}}, false, "no comparison with kgo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := WorkloadReport{Clients: []Summary{{Client: Ours, Runs: tc.ours}, {Client: Baseline, Runs: tc.base}}}
			for i := range w.Clients {
				w.Clients[i].summarize()
			}
			w.ratios()
			met, verdict := w.Target()
			assert.Equal(t, tc.met, met)
			assert.Contains(t, verdict, tc.verdict)
			assert.InDelta(t, 1.0, w.Clients[0].ThroughputRatio, 1e-12, "ours against itself")
		})
	}
}

// cgoWorks reports whether the go command can build cgo packages here: the
// confluent client needs it.
func cgoWorks(t *testing.T) (bool, string) {
	t.Helper()
	out, err := exec.Command("go", "env", "CGO_ENABLED", "CC").Output()
	require.NoError(t, err)
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "1" {
		return false, "CGO_ENABLED is not 1"
	}
	if _, err := exec.LookPath(f[1]); err != nil {
		return false, "no C compiler: " + err.Error()
	}
	return true, ""
}

// runTiny runs the harness for clients with tinyRecords records and one
// run, and checks what a reader of the table relies on: every run of every
// client succeeded with every record acknowledged, the measures are filled
// in, and the Markdown has a row per client and workload.
func runTiny(t *testing.T, clients, workloads []string) *Report {
	t.Helper()
	return runTinyWith(t, Options{Clients: clients, Workloads: workloads})
}

// runTinyWith is runTiny with o's broker and profile options.
func runTinyWith(t *testing.T, o Options) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log bytes.Buffer
	o.Records, o.Runs, o.Timeout, o.BinDir, o.Log = tinyRecords, 1, 3*time.Minute, t.TempDir(), &log
	want := o
	require.NoError(t, want.defaults())
	rep, err := Run(ctx, o)
	require.NoError(t, err, "log:\n%s", log.String())
	require.Empty(t, rep.BuildErrors)
	require.Empty(t, rep.Skipped)
	require.Len(t, rep.Workloads, len(want.Workloads))
	assert.NotContains(t, log.String(), "reading the CPU profile")
	batches := o.Broker != BrokerKafka // real Kafka counts records and bytes, not batches
	if o.Broker == BrokerKafka {
		// A warm-up round per workload, every client once, not counted
		// (the runs below are one per client).
		for _, c := range want.Clients {
			assert.Regexp(t, regexp.MustCompile(`(?m)^  `+c+` +warm-up: +\d+ records/s \(`+strconv.Itoa(tinyRecords)+` records, not counted\)$`), log.String())
		}
	}

	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	for _, w := range rep.Workloads {
		require.Empty(t, w.Error)
		for _, s := range w.Clients {
			require.Len(t, s.Runs, 1)
			r := s.Runs[0]
			require.True(t, r.OK(), "%s on %s: %s", s.Client, w.Spec.Name, r.Error)
			assert.Equal(t, int64(tinyRecords), r.Acked)
			assert.Positive(t, r.RecordsPerSec)
			assert.Positive(t, r.CPUNsPerRecord)
			assert.Positive(t, r.ProcessCPUNsPerRecord)
			assert.Positive(t, r.ProduceCPU, "%s reports the timed phase's CPU", s.Client)
			assert.GreaterOrEqual(t, r.CPU, r.ProduceCPU, "the timed phase is part of the process's life")
			assert.Positive(t, r.PeakRSSBytes)
			require.NotEmpty(t, r.RSSKiB, "RSS sampled from the process's start")
			assert.Positive(t, slices.Max(r.RSSKiB))
			assert.LessOrEqual(t, slices.Max(r.RSSKiB)<<10, r.PeakRSSBytes, "the peak covers every sample")
			assert.Contains(t, md.String(), "Broker: "+rep.Broker)
			// The broker's counts: every record (and the warm-up) was
			// appended during the run, in at least one 61-byte batch.
			assert.GreaterOrEqual(t, r.BrokerRecords, int64(tinyRecords), "%s on %s", s.Client, w.Spec.Name)
			assert.Positive(t, s.WireBytesPerRecord, "%s on %s: wire bytes for every client", s.Client, w.Spec.Name)
			if batches {
				assert.Positive(t, r.Batches)
				assert.GreaterOrEqual(t, r.WireBytes, 61*r.Batches)
				assert.Positive(t, s.RecordsPerBatch)
			} else {
				assert.Zero(t, r.Batches)
				assert.GreaterOrEqual(t, r.WireBytes, int64(61))
			}
			assert.Equal(t, 1, s.OK)
			assert.Positive(t, s.ThroughputRatio)
			assert.Positive(t, s.CPURatio)
			assert.Contains(t, md.String(), "| "+w.Spec.Name+" | "+s.Client+" | ")
		}
		_, verdict := w.Target()
		assert.Contains(t, md.String(), verdict)
	}
	assert.NotContains(t, md.String(), "Failures:")

	// The JSON report is what -json prints: it must round-trip.
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rep.Workloads[0].Clients[0].Runs[0].Acked, back.Workloads[0].Clients[0].Runs[0].Acked)
	return rep
}

// TestRunQuick runs ours and kgo through issue 26's six workloads,
// 10 000-partition topic included, end to end: build, broker process,
// client processes, getrusage, report.
func TestRunQuick(t *testing.T) {
	var all []string
	for _, s := range workload.All(tinyRecords) {
		all = append(all, s.Name)
	}
	rep := runTiny(t, []string{"samsa", "kgo"}, all)
	for _, c := range []string{"samsa", "kgo"} {
		assert.NotEmpty(t, rep.Notes[c], "every client says which defaults it relies on")
	}
}

// TestRunOtherPeers checks that sarama, kafka-go and confluent-kafka-go
// build and get every record acknowledged by the test broker. The
// confluent client needs cgo; without it, it is left out (and said so),
// never hidden when it fails.
func TestRunOtherPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three more clients, one with cgo")
	}
	clients := []string{"sarama", "kafkago"}
	if ok, why := cgoWorks(t); ok {
		clients = append(clients, "confluent")
	} else {
		t.Logf("confluent left out: %s", why)
	}
	runTiny(t, clients, []string{"100B-lz4"})
}

// TestRunKfake runs ours and kgo against kfake in its own process, in
// blackhole mode and storing, with the CPU profiles split by codec, in
// other key orders and with other values than the workloads' own.
func TestRunKfake(t *testing.T) {
	cases := []struct {
		name      string
		store     bool
		workloads []string
		keys      []string
		values    []string
		buffer    int64 // Options.BufferMemory
		want      []string
		header    string
	}{
		{"blackhole, zipf keys", false, []string{"W2c", "W4"}, []string{"zipf"}, nil, 0,
			[]string{"100B-json-lz4", "100B-keyed-10k-partitions-zipf"}, "Buffer memory: 64 MiB for every client with such a bound"},
		{"storing, ordered keys, letters", true, []string{"W3c"}, []string{"ordered"}, []string{ValuesOwn, "letters"}, 32 << 20,
			[]string{"1KiB-json-zstd-keyed-ordered", "1KiB-json-zstd-keyed-ordered-letters"}, "Buffer memory: 32 MiB for every client with such a bound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prof := t.TempDir()
			rep := runTinyWith(t, Options{
				Clients: []string{"samsa", "kgo"}, Workloads: tc.workloads, Keys: tc.keys, Values: tc.values,
				Broker: BrokerKfake, BrokerStore: tc.store, ProfileDir: prof, BufferMemory: tc.buffer,
			})
			var names []string
			for _, w := range rep.Workloads {
				names = append(names, w.Spec.Name)
			}
			assert.Equal(t, tc.want, names)
			var md bytes.Buffer
			require.NoError(t, rep.WriteMarkdown(&md))
			assert.Contains(t, md.String(), tc.header)
			assert.Equal(t, BrokerKfake, rep.BrokerName)
			assert.Contains(t, rep.Broker, "kfake")
			assert.Equal(t, !tc.store, strings.Contains(rep.Broker, "blackhole"))
			for _, c := range []string{"samsa", "kgo"} {
				_, err := os.Stat(filepath.Join(prof, tc.want[0]+"-"+c+"-run1.pprof"))
				assert.NoError(t, err, "%s's CPU profile", c)
			}
		})
	}
}

// TestRunJava builds the Java client (Maven, javac) and runs it through
// the harness: every record acknowledged, its CPU measured over the timed
// phase. Without java, javac or mvn the harness skips it, said so.
func TestRunJava(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches kafka-clients with Maven and starts a JVM")
	}
	if why := missingJavaTools(); why != "" {
		var log bytes.Buffer
		rep, err := Run(context.Background(), Options{Clients: []string{Java}, Workloads: []string{"100B"},
			Records: 10, Runs: 1, BinDir: t.TempDir(), Log: &log})
		require.NoError(t, err)
		assert.Equal(t, why, rep.Skipped[Java])
		assert.Contains(t, log.String(), "skipping the Java client: "+why)
		return
	}
	// Keys in the zipf order the payload file carries, and zstd through JNI.
	rep := runTinyWith(t, Options{Clients: []string{Java}, Workloads: []string{"W3"}, Keys: []string{workload.KeysZipf}})
	assert.NotEmpty(t, rep.Notes[Java])
	assert.NotEmpty(t, rep.JavaVersion)
	for _, w := range rep.Workloads {
		s := w.summary(Java)
		require.NotNil(t, s)
		r := s.Runs[0]
		// The JVM's start-up is outside the timed phase.
		assert.Less(t, r.ProduceCPU, r.CPU, "%s", w.Spec.Name)
	}
}

// TestRunKafka runs ours, kgo and Java against the real Kafka cluster at
// SAMSA_KAFKA_BROKERS (make test starts one); it is skipped without one.
func TestRunKafka(t *testing.T) {
	addr := os.Getenv("SAMSA_KAFKA_BROKERS")
	if addr == "" {
		t.Skip("SAMSA_KAFKA_BROKERS is not set: no real Kafka cluster")
	}
	clients := []string{"samsa", "kgo"}
	if missingJavaTools() == "" && !testing.Short() {
		clients = append(clients, Java)
	}
	rep := runTinyWith(t, Options{Clients: clients, Workloads: []string{"100B-lz4"}, Broker: BrokerKafka, KafkaBootstrap: addr})
	assert.Contains(t, rep.Broker, "Apache Kafka")
}

func TestOptionsBroker(t *testing.T) {
	cases := []struct {
		name string
		in   Options
		want string
		err  string
	}{
		{name: "testbroker by default", want: BrokerTestbroker},
		{name: "kfake", in: Options{Broker: BrokerKfake}, want: BrokerKfake},
		{name: "kafka with a running cluster", in: Options{Broker: BrokerKafka, KafkaBootstrap: "127.0.0.1:9092"}, want: BrokerKafka},
		{name: "unknown broker", in: Options{Broker: "redpanda"}, err: `unknown broker "redpanda"`},
		{name: "a bootstrap address without kafka", in: Options{Broker: BrokerKfake, KafkaBootstrap: "x:1"}, err: "needs broker kafka"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			err := o.defaults()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.Broker)
			assert.NotEmpty(t, describeBroker(o))
		})
	}
}

// TestCodecSummary: the codec share is the median over the profiled runs
// only, it splits the CPU per record, and the rest is compared with ours.
func TestCodecSummary(t *testing.T) {
	prof := func(cpu float64, codec, total time.Duration) RunResult {
		return RunResult{RecordsPerSec: 1000, CPUNsPerRecord: cpu, ProfileCPU: total, CodecCPU: codec}
	}
	ours := Summary{Client: Ours, Runs: []RunResult{prof(1000, 50, 100), prof(1000, 60, 100), prof(1000, 0, 0)}}
	base := Summary{Client: Baseline, Runs: []RunResult{prof(2000, 50, 100)}}
	none := Summary{Client: "sarama", Runs: []RunResult{prof(3000, 0, 0)}}
	w := WorkloadReport{Spec: workload.Spec{Name: "100B"}, Clients: []Summary{ours, base, none}}
	for i := range w.Clients {
		w.Clients[i].summarize()
	}
	w.ratios()
	o, b, n := w.Clients[0], w.Clients[1], w.Clients[2]
	assert.Equal(t, 2, o.ProfiledRuns)
	assert.InDelta(t, 0.55, o.CodecShare, 1e-12)
	assert.InDelta(t, 550, o.CodecNsPerRecord, 1e-9)
	assert.InDelta(t, 450, o.RestNsPerRecord, 1e-9)
	assert.InDelta(t, 1000, b.RestNsPerRecord, 1e-9)
	assert.InDelta(t, 0.45, b.RestRatio, 1e-12, "ours/kgo outside the codec")
	assert.Zero(t, n.ProfiledRuns)
	assert.Zero(t, n.RestRatio, "no profile, no split")

	var md bytes.Buffer
	require.NoError(t, (&Report{Workloads: []WorkloadReport{w}}).WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| 100B | samsa | 2 | 55.0% | 550 | 450 | 1.00 |")
	assert.Contains(t, md.String(), "| 100B | kgo | 1 | 50.0% | 1,000 | 1,000 | 0.45 |")
	assert.NotContains(t, md.String(), "| 100B | sarama | 0 |")
}

// TestBrokerTLS starts each broker with Options.TLS and checks its TLS
// listener as a client would: a handshake that trusts the CA the broker
// wrote succeeds (host name checked), one that trusts the system's roots
// fails, and the plaintext listener, where there is one, is not TLS.
func TestBrokerTLS(t *testing.T) {
	cases := []struct {
		broker    string
		plaintext bool // it keeps a plaintext listener
	}{
		{BrokerTestbroker, true},
		{BrokerKfake, false},
	}
	for _, tc := range cases {
		t.Run(tc.broker, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o := Options{Broker: tc.broker, TLS: true, BinDir: t.TempDir(), Workloads: []string{"100B"}}
			require.NoError(t, o.defaults())
			o.Clients = nil // the broker only
			var err error
			o.modDir, err = moduleDir(ctx)
			require.NoError(t, err)
			_, err = build(ctx, o, map[string]string{})
			require.NoError(t, err)
			spec, err := workload.ByName("100B", 10)
			require.NoError(t, err)
			b, err := startBroker(ctx, o, spec)
			require.NoError(t, err)
			defer func() { assert.NoError(t, b.stop()) }()

			require.NotEmpty(t, b.tlsBootstrap())
			cfg, err := workload.LoadCA(caFile(o, spec))
			require.NoError(t, err)
			dialer := &net.Dialer{Timeout: 10 * time.Second}
			conn, err := tls.DialWithDialer(dialer, "tcp", b.tlsBootstrap(), cfg)
			require.NoError(t, err, "a client trusting the broker's CA")
			assert.True(t, conn.ConnectionState().HandshakeComplete)
			_ = conn.Close()
			_, err = tls.DialWithDialer(dialer, "tcp", b.tlsBootstrap(), &tls.Config{MinVersion: tls.VersionTLS12})
			assert.Error(t, err, "a client that does not trust the CA")
			if tc.plaintext {
				assert.NotEqual(t, b.bootstrap(), b.tlsBootstrap())
				_, err = tls.DialWithDialer(dialer, "tcp", b.bootstrap(), cfg)
				assert.Error(t, err, "the plaintext listener does not speak TLS")
			} else {
				assert.Equal(t, b.bootstrap(), b.tlsBootstrap(), "kfake's one listener is TLS")
			}
		})
	}
}

// TestRunTLS runs ours and kgo through the harness over TLS: against
// testbroker's plaintext and TLS listeners in the same rounds (rows
// client+tls and the TLS overhead table), and against kfake's TLS
// listener.
func TestRunTLS(t *testing.T) {
	t.Run("testbroker compare", func(t *testing.T) {
		rep := runTinyWith(t, Options{Clients: []string{"samsa", "kgo"}, Workloads: []string{"100B-lz4"}, TLSCompare: true})
		assert.True(t, rep.TLS)
		var names []string
		for _, s := range rep.Workloads[0].Clients {
			names = append(names, s.Client)
		}
		assert.Equal(t, []string{"samsa", "samsa+tls", "kgo", "kgo+tls"}, names)
		ovh := rep.Workloads[0].TLSOverheads()
		require.Len(t, ovh, 2)
		for i, c := range []string{"samsa", "kgo"} {
			assert.Equal(t, c, ovh[i].Client)
			assert.Equal(t, 1, ovh[i].Pairs)
			assert.Positive(t, ovh[i].ThroughputRatio)
		}
		var md bytes.Buffer
		require.NoError(t, rep.WriteMarkdown(&md))
		assert.Contains(t, md.String(), "TLS overhead")
		assert.Contains(t, md.String(), "| 100B-lz4 | samsa | ")
		assert.Contains(t, md.String(), "TLS listener")
	})
	t.Run("kfake", func(t *testing.T) {
		rep := runTinyWith(t, Options{Clients: []string{"samsa", "kgo"}, Workloads: []string{"100B"}, Broker: BrokerKfake, TLS: true})
		assert.Contains(t, rep.Broker, "kfake.TLS")
		require.Len(t, rep.Workloads[0].Clients, 2)
		assert.Empty(t, rep.Workloads[0].TLSOverheads(), "no plaintext runs to compare with")
	})
}
