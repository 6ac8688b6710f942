package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// Ours is the client every ratio compares against.
const Ours = "samsa"

// Baseline is the peer the targets name.
const Baseline = "kgo"

// Clients lists every client binary (a directory under bench/clients), ours
// first: the order of the tables.
var Clients = []string{"samsa", "kgo", "sarama", "kafkago", "confluent", Java}

// Java is the client that is not a Go binary: Apache Kafka's Java producer
// (clients/java), compiled with javac and run with java. Run skips it, with
// one line in the log and in the report, when java, javac or mvn is
// missing.
const Java = "java"

// Options configures Run. The zero value runs the full benchmark.
type Options struct {
	// Clients to run, by name (see Clients). Default all of them. Ours is
	// always added, as the ratios need it.
	Clients []string
	// Workloads to run, by name or ID (see workload.All and
	// workload.ByName: "W2c", "100B-json-lz4"). Default all six. defaults
	// expands them with Keys and Values into the names of the variants
	// that run.
	Workloads []string
	// Keys lists the key orders each keyed workload runs in (see
	// workload.KeyOrders). Default workload.KeysScattered only; an
	// unkeyed workload runs once whatever Keys says.
	Keys []string
	// Values lists the kinds of values each workload runs with (see
	// workload.ValueKinds), ValuesOwn for the workload's own. Default
	// ValuesOwn only.
	Values []string
	// Records per workload and run. Default workload.DefaultRecords.
	Records int
	// Runs is how many times each client runs each workload, interleaved
	// with the others. Default 3.
	Runs int
	// Timeout bounds one client run; the process is killed after it.
	// Default 10 minutes.
	Timeout time.Duration
	// BinDir is where the client and broker binaries are built. Default a
	// temporary directory, removed when Run returns.
	BinDir string
	// ProfileDir, when set, receives a CPU profile of the timed phase of
	// every run of the Profile clients, named workload-client-runN.pprof,
	// and a heap profile taken after it, workload-client-runN.heap.
	// Profiling slows those runs a little.
	ProfileDir string
	// Profile names the clients to profile. Default Ours and Baseline.
	Profile []string
	// Broker is the broker every workload runs against: BrokerTestbroker
	// (the default), BrokerKfake or BrokerKafka. One broker per workload,
	// its topic created up front with the workload's partition count.
	Broker string
	// BrokerStore makes testbroker and kfake store the batches instead of
	// acknowledging them without storing; real Kafka always stores.
	BrokerStore bool
	// KafkaBootstrap, with BrokerKafka, is a running cluster to use instead
	// of starting one with interop/kafka/start.sh; it is left running.
	KafkaBootstrap string
	// WarmupRecords, with BrokerKafka, is how many records every client
	// sends once to each workload's topic before the measured runs, not
	// counted: the broker's JIT compiles its produce path in that round,
	// so that no client's measured run pays for it. Default the workload's
	// records (a round of its own); negative: no warm-up round.
	WarmupRecords int
	// KafkaManyPartitionRecords, with BrokerKafka, is how many records a
	// run of a workload of more than manyPartitions partitions (W4: 10 000)
	// sends, when fewer than Records. Default 100 000; negative: Records.
	// One Kafka broker appends W4's batches of two or three records per
	// partition at 4 000–65 000 records/s on the test VM, against
	// hundreds of thousands to millions for the other workloads: at Records (1 000 000) W4 alone would take
	// hours with its key orders and warm-up rounds, so issue 26's table
	// runs it at this count, named in its row.
	KafkaManyPartitionRecords int
	// TLS makes the broker (testbroker or kfake) serve a TLS listener with
	// a certificate from a CA it generates and writes under BinDir, and
	// the clients connect to it, trusting only that CA (-tls-ca). Not with
	// BrokerKafka.
	TLS bool
	// TLSCompare, with BrokerTestbroker, implies TLS and runs every client
	// twice per round, over the broker's plaintext listener and over its
	// TLS listener: the TLS runs are reported as client+tls (TLSSuffix),
	// and the report adds the TLS overhead per client.
	TLSCompare bool
	// BufferMemory is what every client may buffer, in bytes, where it
	// has such a bound (workload.Spec.BufferMemory; each client's -buffer-memory).
	// Default workload.DefaultBufferMemory (64 MiB).
	BufferMemory int64
	// FreshValues gives every record of the Go clients a newly allocated
	// value (workload.Spec.FreshValues); the Java client, which copies
	// each value into its batch at send as samsa does, is not affected.
	FreshValues bool
	// Log receives progress lines. Default io.Discard.
	Log io.Writer

	modDir        string // the bench module's directory
	launchedKafka bool   // KafkaBootstrap is the cluster Run launched
}

func (o *Options) defaults() error {
	if len(o.Clients) == 0 {
		o.Clients = slices.Clone(Clients)
	}
	for _, c := range o.Clients {
		if !slices.Contains(Clients, c) {
			return fmt.Errorf("unknown client %q (want one of %s)", c, strings.Join(Clients, ", "))
		}
	}
	if !slices.Contains(o.Clients, Ours) {
		o.Clients = append([]string{Ours}, o.Clients...)
	}
	// Table order, whatever order the caller gave.
	slices.SortStableFunc(o.Clients, func(a, b string) int {
		return slices.Index(Clients, a) - slices.Index(Clients, b)
	})
	o.Clients = slices.Compact(o.Clients)
	if o.Records == 0 {
		o.Records = workload.DefaultRecords
	}
	if o.Records < 0 {
		return fmt.Errorf("records %d < 0", o.Records)
	}
	if o.KafkaManyPartitionRecords == 0 {
		o.KafkaManyPartitionRecords = DefaultKafkaManyPartitionRecords
	}
	if len(o.Workloads) == 0 {
		for _, s := range workload.All(o.Records) {
			o.Workloads = append(o.Workloads, s.Name)
		}
	}
	var err error
	if o.Workloads, err = expand(o.Workloads, o.Keys, o.Values, o.Records); err != nil {
		return err
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Runs < 0 {
		return fmt.Errorf("runs %d < 0", o.Runs)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if len(o.Profile) == 0 {
		o.Profile = []string{Ours, Baseline}
	}
	if o.BufferMemory == 0 {
		o.BufferMemory = workload.DefaultBufferMemory
	}
	if o.BufferMemory < workload.BatchBytes {
		return fmt.Errorf("buffer memory %d is below the batch size (%d)", o.BufferMemory, workload.BatchBytes)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Broker == "" {
		o.Broker = BrokerTestbroker
	}
	if !slices.Contains(Brokers, o.Broker) {
		return fmt.Errorf("unknown broker %q (want one of %s)", o.Broker, strings.Join(Brokers, ", "))
	}
	if o.TLSCompare {
		if o.Broker != BrokerTestbroker {
			return fmt.Errorf("comparing plaintext with TLS needs broker %s (one broker, both listeners), not %s", BrokerTestbroker, o.Broker)
		}
		o.TLS = true
	}
	if o.TLS && o.Broker == BrokerKafka {
		return fmt.Errorf("TLS needs broker %s or %s, not %s", BrokerTestbroker, BrokerKfake, o.Broker)
	}
	if o.KafkaBootstrap != "" && o.Broker != BrokerKafka {
		return fmt.Errorf("a Kafka bootstrap address needs broker %s, not %s", BrokerKafka, o.Broker)
	}
	return nil
}

// DefaultKafkaManyPartitionRecords is Options.KafkaManyPartitionRecords'
// default.
const DefaultKafkaManyPartitionRecords = 100_000

// manyPartitions is the partition count above which a workload runs
// Options.KafkaManyPartitionRecords records on BrokerKafka.
const manyPartitions = 1000

// spec returns the workload variant name as Run runs it: with
// recordsFor's records and o's buffer memory and values.
func (o *Options) spec(name string) workload.Spec {
	spec, _ := workload.ByName(name, o.recordsFor(name))
	spec.BufferMemory = o.BufferMemory
	spec.FreshValues = o.FreshValues
	return spec
}

// needsOwnBroker reports whether spec runs on a Kafka broker of its own,
// launched for it, when Run launched the cluster: a workload of more than
// manyPartitions partitions does unless it is the first on the broker
// (used: a workload has run there). A Kafka 4.4 broker that had held one
// topic of 10 000 partitions made the logs of only 9 841–9 886 of the
// next one's (three tries on 2026-12-05: after the first topic's logs
// were gone, in steps of 5 000 or 1 000 partitions) and answered
// NOT_LEADER_OR_FOLLOWER for the others for good.
func needsOwnBroker(used bool, spec workload.Spec) bool {
	return used && spec.Partitions > manyPartitions
}

// recordsFor returns how many records a run of the workload variant
// name sends: o.Records, or on BrokerKafka o.KafkaManyPartitionRecords
// for a workload of more than manyPartitions partitions when fewer.
func (o *Options) recordsFor(name string) int {
	spec, err := workload.ByName(name, o.Records)
	if err != nil || o.Broker != BrokerKafka || spec.Partitions <= manyPartitions ||
		o.KafkaManyPartitionRecords < 0 || o.KafkaManyPartitionRecords >= o.Records {
		return o.Records
	}
	return o.KafkaManyPartitionRecords
}

// ValuesOwn in Options.Values stands for each workload's own values.
const ValuesOwn = "own"

// expand returns the names of the variants of workloads (names or IDs) in
// each key order of keys (unkeyed workloads once) and with each kind of
// values of values (ValuesOwn: the workload's own), in that order, each
// once. Without keys or values a workload runs as named.
func expand(workloads, keys, values []string, records int) ([]string, error) {
	if len(keys) == 0 {
		keys = []string{""}
	}
	if len(values) == 0 {
		values = []string{ValuesOwn}
	}
	var out []string
	for _, w := range workloads {
		base, err := workload.ByName(w, records)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			ks := base
			if k != "" {
				if ks, err = base.WithKeys(k); err != nil {
					return nil, err
				}
			}
			for _, v := range values {
				vs := ks
				if v != ValuesOwn {
					if vs, err = ks.WithValues(v); err != nil {
						return nil, err
					}
				}
				if !slices.Contains(out, vs.Name) {
					out = append(out, vs.Name)
				}
			}
		}
	}
	return out, nil
}

// Report is the outcome of Run.
type Report struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Records  int           `json:"records"`
	Runs     int           `json:"runs"`
	// CPUs is the number of CPUs the machine has.
	CPUs int `json:"cpus"`
	// LoadStart and LoadEnd are /proc/loadavg when the runs start and end:
	// other processes on the machine skew the figures.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
	// GoVersion is the toolchain the binaries were built with.
	GoVersion string `json:"go_version"`
	// JavaVersion is `java -version`'s first line, when the Java client ran.
	JavaVersion string `json:"java_version,omitempty"`
	// Broker says which broker served the runs, in words.
	Broker string `json:"broker"`
	// BrokerName is Options.Broker.
	BrokerName string `json:"broker_name"`
	// TLS and TLSCompare are Options.TLS and Options.TLSCompare.
	TLS        bool `json:"tls,omitempty"`
	TLSCompare bool `json:"tls_compare,omitempty"`
	// Skipped maps a client that was left out to why (no Java tools).
	Skipped map[string]string `json:"skipped,omitempty"`
	// RSSIntervalNanos is the sampling interval of every run's RSS series.
	RSSIntervalNanos time.Duration `json:"rss_interval_ns"`
	// BuildErrors maps a client that could not be built to the error.
	BuildErrors map[string]string `json:"build_errors,omitempty"`
	// BufferMemory is what every client with such a bound buffered at
	// most in the runs, in bytes (Options.BufferMemory).
	BufferMemory int64 `json:"buffer_memory"`
	// FreshValues is Options.FreshValues.
	FreshValues bool `json:"fresh_values,omitempty"`
	// Notes maps each client to the choices it reported (idempotence,
	// partitioner, delivery path).
	Notes     map[string]string `json:"notes"`
	Workloads []WorkloadReport  `json:"workloads"`
}

// WorkloadReport holds every client's runs of one workload.
type WorkloadReport struct {
	Spec    workload.Spec `json:"spec"`
	Clients []Summary     `json:"clients"`
	// Error is set when the workload could not run at all (the broker did
	// not start).
	Error string `json:"error,omitempty"`
	// Skipped says, per client left out of this workload alone, why
	// (javaManyPartitions).
	Skipped map[string]string `json:"skipped,omitempty"`
}

// javaManyPartitions is why the Java client is left out of a workload of
// more than manyPartitions partitions.
const javaManyPartitions = "left out above 1 000 partitions: its buffer pool hands every open batch a batch.size buffer (1 MiB), " +
	"so 64 MiB hold the batches of 64 of W4's 10 000 partitions at a time"

// workloadClients returns the clients that run spec: o.Clients that
// built, less Java above manyPartitions partitions (recorded in
// wr.Skipped).
func workloadClients(o Options, spec workload.Spec, rep *Report, wr *WorkloadReport) []string {
	clients := runnable(o.Clients, rep.BuildErrors)
	if spec.Partitions > manyPartitions && slices.Contains(clients, Java) {
		clients = slices.DeleteFunc(clients, func(c string) bool { return c == Java })
		wr.Skipped = map[string]string{Java: javaManyPartitions}
		fmt.Fprintf(o.Log, "workload %s: the Java client is %s\n", spec.Name, javaManyPartitions)
	}
	return clients
}

// Summary is one client's medians over its successful runs of a workload.
type Summary struct {
	Client string `json:"client"`
	// OK counts the successful runs; the medians are over them.
	OK             int     `json:"ok_runs"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	CPUNsPerRecord float64 `json:"cpu_ns_per_record"`
	// ProcessCPUNsPerRecord is the median of the runs' whole-process CPU
	// per record.
	ProcessCPUNsPerRecord float64 `json:"process_cpu_ns_per_record"`
	PeakRSSBytes          int64   `json:"peak_rss_bytes"`
	// CodecShare is the median, over the successful profiled runs, of the
	// fraction of CPU profile samples in compression code; CodecNsPerRecord
	// and RestNsPerRecord split CPUNsPerRecord by it. All zero without
	// profiles. RestRatio is ours/this client's RestNsPerRecord.
	CodecShare       float64 `json:"codec_share,omitempty"`
	CodecNsPerRecord float64 `json:"codec_ns_per_record,omitempty"`
	RestNsPerRecord  float64 `json:"rest_ns_per_record,omitempty"`
	RestRatio        float64 `json:"rest_ratio,omitempty"`
	ProfiledRuns     int     `json:"profiled_runs,omitempty"`
	// RecordsPerBatch and WireBytesPerRecord are the medians of the runs'
	// [RunResult.RecordsPerBatch] and [RunResult.WireBytesPerRecord], over
	// the successful runs with the broker's counts; zero when none has
	// them.
	RecordsPerBatch    float64 `json:"records_per_batch,omitempty"`
	WireBytesPerRecord float64 `json:"wire_bytes_per_record,omitempty"`
	// ThroughputRatio is ours/this client's records/s (> 1: ours is
	// faster); CPURatio is ours/this client's CPU per record (< 1: ours
	// uses less). Zero when either side has no successful run.
	ThroughputRatio float64     `json:"throughput_ratio"`
	CPURatio        float64     `json:"cpu_ratio"`
	Runs            []RunResult `json:"runs"`
}

// RunResult is one run of one client process.
type RunResult struct {
	Run           int     `json:"run"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// CPUNsPerRecord is ProduceCPU per record, or CPU per record when the
	// client did not report ProduceCPU.
	CPUNsPerRecord float64 `json:"cpu_ns_per_record"`
	// ProcessCPUNsPerRecord is CPU per record.
	ProcessCPUNsPerRecord float64 `json:"process_cpu_ns_per_record"`
	// PeakRSSBytes is the process's maxrss from getrusage, or the highest
	// RSS sample where that is higher.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// CPU is user+system time of the whole process (start-up, connection
	// setup, the warm-up record and Close included), from getrusage.
	CPU time.Duration `json:"cpu_ns"`
	// ProduceCPU is the user+system time the process spent in the timed
	// phase, first send to last ack, as the client measured it (every
	// thread: getrusage for the Go clients, the JVM's process CPU time for
	// Java).
	ProduceCPU time.Duration `json:"produce_cpu_ns,omitempty"`
	// RSSKiB is the process's VmRSS every Report.RSSIntervalNanos from its
	// start, in KiB.
	RSSKiB []int64 `json:"rss_kib,omitempty"`
	// ProfileCPU and CodecCPU are the CPU time in the run's CPU profile
	// samples, all of them and those in compression code; zero when the
	// run was not profiled.
	ProfileCPU time.Duration `json:"profile_cpu_ns,omitempty"`
	CodecCPU   time.Duration `json:"codec_cpu_ns,omitempty"`
	// Wall is the client's own timing, first send to last ack.
	Wall  time.Duration `json:"wall_ns"`
	Setup time.Duration `json:"setup_ns"`
	Acked int64         `json:"acked"`
	// Batches, BrokerRecords and WireBytes are what the broker appended
	// during the run, from its counters before and after (the warm-up
	// record included): record batches, their records, and their length
	// as produced, headers included. All zero when the broker's counters
	// could not be read; Batches zero on real Kafka, which does not count
	// them (its BrokerRecords and WireBytes come from the topic's end
	// offsets and log sizes).
	Batches       int64 `json:"broker_batches,omitempty"`
	BrokerRecords int64 `json:"broker_records,omitempty"`
	WireBytes     int64 `json:"wire_bytes,omitempty"`
	// The fixed-rate mode's (RunRate), as the client reported them
	// (workload.Result): the records after the warm-up, the time from the
	// first of them sent to the last sent, their latencies in
	// workload.Histogram's buckets, and the send loop's waits for a busy
	// callback slot. There ProduceCPU and Wall cover the steady phase.
	SteadyRecords  int           `json:"steady_records,omitempty"`
	SteadySend     time.Duration `json:"steady_send_ns,omitempty"`
	LatencyBuckets [][2]int64    `json:"latency_buckets,omitempty"`
	SlotWaits      int64         `json:"slot_waits,omitempty"`
	// Error says why the run failed; empty for a successful run.
	Error string `json:"error,omitempty"`
}

// OK reports whether the run produced every record without error.
func (r RunResult) OK() bool { return r.Error == "" }

// RecordsPerBatch is the mean batch size the broker saw, in records; 0
// without the broker's counts.
func (r RunResult) RecordsPerBatch() float64 {
	if r.Batches <= 0 {
		return 0
	}
	return float64(r.BrokerRecords) / float64(r.Batches)
}

// WireBytesPerRecord is the bytes of record batches the broker appended
// per record; 0 without the broker's counts.
func (r RunResult) WireBytesPerRecord() float64 {
	if r.BrokerRecords <= 0 {
		return 0
	}
	return float64(r.WireBytes) / float64(r.BrokerRecords)
}

// Run builds the binaries, then runs every workload against a broker of
// its own (Options.Broker; BrokerKafka: one cluster for all, each workload
// on a topic of its own, after a warm-up round, but a new cluster for
// each workload of more than manyPartitions partitions that follows
// another: needsOwnBroker), every client once per round, rounds repeated
// Runs times, the client order rotating between rounds. It fails only
// when nothing can run (bad options, the broker does not build or,
// Kafka, start; a Kafka cluster launched for a workload that does not
// start ends the run with the reports so far); a client that fails to
// build or run is reported in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{
		Started: time.Now(), Records: o.Records, Runs: o.Runs,
		CPUs: numCPU(), Notes: map[string]string{}, BuildErrors: map[string]string{},
		Skipped: map[string]string{}, Broker: describeBroker(o), BrokerName: o.Broker,
		RSSIntervalNanos: RSSInterval, TLS: o.TLS, TLSCompare: o.TLSCompare,
		BufferMemory: o.BufferMemory, FreshValues: o.FreshValues,
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	cleanup, err := prepare(ctx, &o, rep.Skipped, rep.BuildErrors, &rep.GoVersion, &rep.JavaVersion)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var k *kafkaBroker // the cluster Run launched
	stopKafka := func() {
		if err := k.stop(); err != nil {
			fmt.Fprintf(o.Log, "stopping the kafka broker: %v\n", err)
		}
		k = nil
	}
	if o.Broker == BrokerKafka && o.KafkaBootstrap == "" {
		// One cluster for every workload, as a user's: its JIT warms up
		// once, and each workload's topic is deleted after it.
		fmt.Fprintf(o.Log, "starting a kafka broker (interop/kafka/start.sh) for every workload\n")
		if k, err = launchKafka(ctx, o); err != nil {
			return nil, err
		}
		defer func() {
			if k != nil {
				stopKafka()
			}
		}()
		o.KafkaBootstrap, o.launchedKafka = k.addr, true
	}
	rep.LoadStart = loadAvg()
	used := false // a workload has run on k
	for _, name := range o.Workloads {
		spec := o.spec(name)
		if o.launchedKafka && needsOwnBroker(used, spec) {
			fmt.Fprintf(o.Log, "workload %s: a new kafka broker for its %d partitions\n", spec.Name, spec.Partitions)
			stopKafka()
			if k, err = launchKafka(ctx, o); err != nil {
				rep.Duration, rep.LoadEnd = time.Since(rep.Started), loadAvg()
				return rep, fmt.Errorf("workload %s: %w", spec.Name, err)
			}
			o.KafkaBootstrap = k.addr
		}
		used = true
		rep.Workloads = append(rep.Workloads, runWorkload(ctx, o, spec, rep))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.Duration = time.Since(rep.Started)
	rep.LoadEnd = loadAvg()
	return rep, nil
}

// prepare readies o for a run of its clients: the module directory, the
// Java client left out when its tools are missing (why, in skipped), a
// temporary BinDir unless one is given (removed by cleanup), and the
// clients built (a client that does not build is in buildErrors). It sets
// the Go version and, with the Java client, Java's.
func prepare(ctx context.Context, o *Options, skipped, buildErrors map[string]string, goVersion, javaVer *string) (cleanup func(), err error) {
	cleanup = func() {}
	if o.modDir, err = moduleDir(ctx); err != nil {
		return cleanup, err
	}
	if slices.Contains(o.Clients, Java) {
		if why := missingJavaTools(); why != "" {
			fmt.Fprintf(o.Log, "skipping the Java client: %s\n", why)
			skipped[Java] = why
			o.Clients = slices.DeleteFunc(o.Clients, func(c string) bool { return c == Java })
		}
	}
	if o.BinDir == "" {
		dir, err := os.MkdirTemp("", "peerbench-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		o.BinDir = dir
	}
	if *goVersion, err = build(ctx, *o, buildErrors); err != nil {
		cleanup()
		return func() {}, err
	}
	if slices.Contains(o.Clients, Java) {
		*javaVer = javaVersion(ctx)
	}
	return cleanup, nil
}

// missingJavaTools says which of java, javac and mvn is not on PATH, or ""
// when all are.
func missingJavaTools() string {
	var missing []string
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "no " + strings.Join(missing, ", ") + " on PATH"
}

// javaVersion returns the first line of `java -version`.
func javaVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// javaDir is the Java client's directory in the bench module, and
// javaClasses the javac output under BinDir.
const (
	javaDir     = "clients/java"
	javaClasses = "java-classes"
	javaMain    = "BenchProducer"
)

// buildJava fetches kafka-clients into clients/java/target/lib with Maven
// (the repository cache is ~/.m2) and compiles the client with javac into
// BinDir.
func buildJava(ctx context.Context, o Options) error {
	dir := filepath.Join(o.modDir, javaDir)
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	if err := run("mvn", "-q", "-B", "dependency:copy-dependencies"); err != nil {
		return err
	}
	return run("javac", "-d", filepath.Join(o.BinDir, javaClasses), "-cp", filepath.Join("target", "lib", "*"),
		filepath.Join("src", javaMain+".java"))
}

// build compiles the broker and every client into o.BinDir. A client that
// does not build is recorded in buildErrs; a broker that does not build
// fails the whole run.
func build(ctx context.Context, o Options, buildErrs map[string]string) (goVersion string, err error) {
	gobuild := func(out, pkg string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(o.BinDir, out), pkg)
		cmd.Dir = o.modDir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	fmt.Fprintf(o.Log, "building the broker (%s) and %s into %s\n", o.Broker, strings.Join(o.Clients, ", "), o.BinDir)
	switch o.Broker {
	case BrokerTestbroker:
		err = gobuild("testbroker", "github.com/samsa-go/samsa/internal/testbroker/cmd/testbroker")
	case BrokerKfake:
		err = gobuild("kfakebroker", "./cmd/kfakebroker")
	}
	if err != nil {
		return "", err
	}
	for _, c := range o.Clients {
		if c == Java {
			err = buildJava(ctx, o)
		} else {
			err = gobuild(c, "./clients/"+c)
		}
		if err != nil {
			buildErrs[c] = err.Error()
			fmt.Fprintf(o.Log, "client %s does not build: %v\n", c, err)
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// benchModule is the module path of bench/.
const benchModule = "github.com/samsa-go/samsa/bench"

// moduleDir returns the directory of the bench module, which the go command
// must run in to build the clients. It names the module, since in the
// repository's workspace (go.work) "go list -m" lists every module.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Dir}}", benchModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m (run peerbench from inside bench/): %w", err)
	}
	path, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if path != benchModule {
		return "", fmt.Errorf("the current module is %q, not %s: run peerbench from inside bench/", path, benchModule)
	}
	return dir, nil
}

func runWorkload(ctx context.Context, o Options, spec workload.Spec, rep *Report) WorkloadReport {
	wr := WorkloadReport{Spec: spec}
	runs := map[string][]RunResult{}
	if o.Broker == BrokerKafka {
		fmt.Fprintf(o.Log, "workload %s: %d records, its topic (%d partitions) on the kafka broker\n", spec.Name, spec.Records, spec.Partitions)
	} else {
		fmt.Fprintf(o.Log, "workload %s: %d records, starting a %s broker with %d partitions\n", spec.Name, spec.Records, o.Broker, spec.Partitions)
	}
	clients := workloadClients(o, spec, rep, &wr)
	payload := ""
	if slices.Contains(clients, Java) {
		payload = filepath.Join(o.BinDir, "payload-"+spec.Name)
		if err := workload.NewPayload(spec).WriteFile(payload, spec); err != nil {
			wr.Error = fmt.Sprintf("writing the Java client's payload file: %v", err)
			return wr
		}
	}
	b, err := startBroker(ctx, o, spec)
	if err != nil {
		wr.Error = err.Error()
		fmt.Fprintf(o.Log, "workload %s: %v\n", spec.Name, err)
	} else {
		if o.Broker == BrokerKafka {
			warmUp(ctx, o, spec, b, clients, payload)
		}
		counts := runStats{snap: b.stats}
		if err := counts.start(); err != nil {
			fmt.Fprintf(o.Log, "workload %s: no broker counters (records/batch and wire bytes left out): %v\n", spec.Name, err)
		}
		for r := range o.Runs {
			order := variants(o, clients)
			// Rotate, so that no client always runs right after another.
			k := r % max(1, len(order))
			order = append(order[k:], order[:k]...)
			for _, v := range order {
				addr := b.bootstrap()
				if v.tls {
					addr = b.tlsBootstrap()
				}
				c := v.name(o)
				res, notes := runClient(ctx, o, spec, addr, v, r, payload)
				if notes != "" {
					rep.Notes[v.client] = notes
				}
				// The client has exited: every batch it got acknowledged is
				// counted. A failure here costs the columns, never the run.
				if d, ok, err := counts.next(); err != nil {
					fmt.Fprintf(o.Log, "  %-9s run %d: no broker counters: %v\n", c, r+1, err)
				} else if ok {
					res.Batches, res.BrokerRecords, res.WireBytes = d.Batches, d.Records, d.Bytes
				}
				runs[c] = append(runs[c], res)
				if res.OK() {
					codec := ""
					if res.ProfileCPU > 0 {
						codec = fmt.Sprintf(" %4.1f%% codec", 100*float64(res.CodecCPU)/float64(res.ProfileCPU))
					}
					fmt.Fprintf(o.Log, "  %-9s run %d: %10.0f records/s %8.0f CPU ns/record (process %8.0f) %6.1f MiB RSS %8.1f records/batch %6.1f wire B/record%s\n",
						c, r+1, res.RecordsPerSec, res.CPUNsPerRecord, res.ProcessCPUNsPerRecord, float64(res.PeakRSSBytes)/(1<<20),
						res.RecordsPerBatch(), res.WireBytesPerRecord(), codec)
				} else {
					fmt.Fprintf(o.Log, "  %-9s run %d: FAILED: %s\n", c, r+1, res.Error)
				}
				if ctx.Err() != nil {
					break
				}
			}
		}
		if err := b.stop(); err != nil {
			wr.Error = err.Error()
		}
	}
	for _, v := range variants(o, o.Clients) {
		if _, skipped := wr.Skipped[v.client]; skipped {
			continue
		}
		s := Summary{Client: v.name(o), Runs: runs[v.name(o)]}
		if msg, ok := rep.BuildErrors[v.client]; ok {
			s.Runs = []RunResult{{Error: "build failed: " + msg}}
		}
		s.summarize()
		wr.Clients = append(wr.Clients, s)
	}
	wr.ratios()
	return wr
}

// warmUp runs every client once against b with spec's topic and
// o.WarmupRecords records (spec's by default), unprofiled and
// not counted, and logs each run. A failed warm-up run is only logged:
// the measured runs report their own failures.
func warmUp(ctx context.Context, o Options, spec workload.Spec, b brokerProc, clients []string, payload string) {
	n := o.WarmupRecords
	if n == 0 {
		n = spec.Records
	}
	if n < 0 {
		return
	}
	w := spec
	w.Records = n
	o.ProfileDir = ""
	for _, c := range clients {
		res, _ := runClient(ctx, o, w, b.bootstrap(), variant{client: c}, 0, payload)
		if res.OK() {
			fmt.Fprintf(o.Log, "  %-9s warm-up: %10.0f records/s (%d records, not counted)\n", c, res.RecordsPerSec, n)
		} else {
			fmt.Fprintf(o.Log, "  %-9s warm-up FAILED (not counted): %s\n", c, res.Error)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// TLSSuffix ends the name of a client's runs over TLS in an
// Options.TLSCompare report: "samsa+tls".
const TLSSuffix = "+tls"

// variant is one client over one of the broker's listeners.
type variant struct {
	client string
	tls    bool
}

// name is the variant's row in the report: the client, with TLSSuffix for
// its TLS runs when plaintext ones run too.
func (v variant) name(o Options) string {
	if v.tls && o.TLSCompare {
		return v.client + TLSSuffix
	}
	return v.client
}

// variants returns the runs of one round for clients: each over the
// plaintext listener, over the TLS one, or (TLSCompare) both in turn.
func variants(o Options, clients []string) []variant {
	var out []variant
	for _, c := range clients {
		if !o.TLS || o.TLSCompare {
			out = append(out, variant{client: c})
		}
		if o.TLS {
			out = append(out, variant{client: c, tls: true})
		}
	}
	return out
}

func runnable(clients []string, buildErrs map[string]string) []string {
	var out []string
	for _, c := range clients {
		if _, bad := buildErrs[c]; !bad {
			out = append(out, c)
		}
	}
	return out
}

// clientCommand returns the command that runs client with args.
func clientCommand(ctx context.Context, o Options, client string, args []string, payload string) *exec.Cmd {
	if client != Java {
		return exec.CommandContext(ctx, filepath.Join(o.BinDir, client), args...)
	}
	cp := filepath.Join(o.BinDir, javaClasses) + string(os.PathListSeparator) +
		filepath.Join(o.modDir, javaDir, "target", "lib", "*")
	jargs := append([]string{"-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", javaMain}, args...)
	return exec.CommandContext(ctx, "java", append(jargs, "-payload", payload)...)
}

// runClient runs one client process and measures it.
func runClient(ctx context.Context, o Options, spec workload.Spec, addr string, v variant, run int, payload string) (RunResult, string) {
	res := RunResult{Run: run + 1}
	client := v.client
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	args := []string{"-brokers", addr, "-workload", spec.Name, "-records", strconv.Itoa(spec.Records),
		"-timeout", o.Timeout.String()}
	if v.tls {
		args = append(args, "-tls-ca", caFile(o, spec))
	}
	args = append(args, "-buffer-memory", strconv.FormatInt(spec.BufferMemory, 10))
	if spec.FreshValues && client != Java {
		args = append(args, "-fresh-values")
	}
	if spec.Rate > 0 {
		args = append(args, "-rate", strconv.FormatInt(spec.Rate, 10), "-rate-warmup", strconv.Itoa(spec.RateWarmup))
	}
	switch {
	case spec.Linger == workload.LingerClientDefault:
		args = append(args, "-linger", "default")
	case spec.Linger > 0:
		args = append(args, "-linger", spec.Linger.String())
	}
	profile := ""
	if o.ProfileDir != "" && slices.Contains(o.Profile, client) && client != Java {
		name := filepath.Join(o.ProfileDir, fmt.Sprintf("%s-%s-run%d", spec.Name, v.name(o), run+1))
		profile = name + ".pprof"
		args = append(args, "-cpuprofile", profile, "-memprofile", name+".heap")
	}
	cmd := clientCommand(ctx, o, client, args, payload)
	cmd.WaitDelay = 5 * time.Second
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Start()
	if err == nil {
		rss := sampleRSS(cmd.Process.Pid)
		err = cmd.Wait()
		res.RSSKiB = rss.stop()
	}
	if st := cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
			res.PeakRSSBytes = ru.Maxrss << 10 // Linux reports KiB
		}
	}
	// The kernel updates maxrss lazily, so a sample may be a little above it.
	for _, kib := range res.RSSKiB {
		res.PeakRSSBytes = max(res.PeakRSSBytes, kib<<10)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timeout %v)", err, o.Timeout)
		}
		res.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String()))
		return res, ""
	}
	var out workload.Result
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &out); err != nil {
		res.Error = fmt.Sprintf("reading the result line %q: %v", lastLine(stdout.Bytes()), err)
		return res, ""
	}
	res.Acked = out.Acked
	res.Wall = time.Duration(out.WallNanos)
	res.Setup = time.Duration(out.SetupNanos)
	res.ProduceCPU = time.Duration(out.ProduceCPUNanos)
	res.SteadyRecords, res.SteadySend = out.SteadyRecords, time.Duration(out.SteadySendNanos)
	res.LatencyBuckets, res.SlotWaits = out.LatencyBuckets, out.SlotWaits
	if profile != "" {
		if split, err := readCodecSplit(profile); err != nil {
			fmt.Fprintf(o.Log, "  %-9s run %d: reading the CPU profile: %v\n", client, run+1, err)
		} else {
			res.ProfileCPU, res.CodecCPU = time.Duration(split.Total), time.Duration(split.Codec)
		}
	}
	switch {
	case out.Errors > 0 || out.FirstError != "":
		res.Error = fmt.Sprintf("%d of %d records failed: %s", out.Errors, out.Records, out.FirstError)
	case out.Acked != int64(spec.Records):
		res.Error = fmt.Sprintf("%d of %d records acknowledged", out.Acked, spec.Records)
	case res.Wall <= 0:
		res.Error = "no wall time reported"
	default:
		res.RecordsPerSec = float64(spec.Records) / res.Wall.Seconds()
		res.ProcessCPUNsPerRecord = float64(res.CPU.Nanoseconds()) / float64(spec.Records)
		res.CPUNsPerRecord = res.ProcessCPUNsPerRecord
		if res.ProduceCPU > 0 {
			res.CPUNsPerRecord = float64(res.ProduceCPU.Nanoseconds()) / float64(spec.Records)
		}
	}
	return res, out.Notes
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "" where the
// system does not say.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
