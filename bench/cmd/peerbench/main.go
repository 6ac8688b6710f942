// Command peerbench runs the same workloads through samsa, franz-go (kgo),
// IBM/sarama, segmentio/kafka-go, confluent-kafka-go and Apache Kafka's
// Java producer, each client in a process of its own, against one broker
// per workload (testbroker in sink mode by default, kfake in blackhole
// mode, or a real Kafka broker; several brokers in turn), and prints in
// Markdown the README's table (samsa against kgo per workload and broker:
// records/s, CPU ns per record, wire bytes per record, peak RSS), a table
// of every workload variant and client, issue 26's targets, and every
// broker's report in full. Run it from bench/:
//
//	go run ./cmd/peerbench               # full run: 6 workloads × 1M records × 3 runs, testbroker
//	go run ./cmd/peerbench -quick        # 100 000 records, 1 run
//	go run ./cmd/peerbench -clients samsa,kgo -workloads W2c -records 200000
//	go run ./cmd/peerbench -broker kfake,kafka -clients samsa,kgo,java -keys scattered,ordered,zipf -summary   # issue 26's table (W4 on Kafka: 100 000 records)
//	go run ./cmd/peerbench -from-json report.json -summary   # the tables of a run saved with -jsonfile, again
//	go run ./cmd/peerbench -broker kfake -clients samsa,kgo -workloads W3 -values own,letters   # ProducerPerformance's payload too
//	go run ./cmd/peerbench -buffer-memory 134217728   # 128 MiB of buffer memory for every client
//	go run ./cmd/peerbench -cpuprofile /tmp/prof   # CPU and heap profiles of samsa's and kgo's runs, codec share
//	go run ./cmd/peerbench -tls -clients samsa,kgo           # over the broker's TLS listener
//	go run ./cmd/peerbench -tls-compare -clients samsa,kgo   # plaintext and TLS, same broker, same rounds
//	go run ./cmd/peerbench -rates 5000,20000,50000           # issue 35: samsa, kgo and Java at fixed rates on Kafka, latency quantiles and CPU
//
// With -rates it runs the fixed-rate mode instead (issue 35; bench/README):
// each client paced by Java ProducerPerformance's throttle, its latency
// from just before the send to the callback, its CPU over the steady
// phase, one row per linger (-lingers) and rate.
//
// Progress goes to stderr, the tables to stdout (or the JSON of every
// report with -json). With -strict the exit status is 1 when a run fails
// or one of issue 26's targets is not met; failures and targets are always
// listed under the table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/bench/internal/harness"
	"github.com/samsa-go/samsa/bench/internal/workload"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run() error {
	var names []string
	for _, s := range workload.All(0) {
		names = append(names, s.ID)
	}
	clients := flag.String("clients", strings.Join(harness.Clients, ","), "comma-separated clients to run (samsa is always run)")
	workloads := flag.String("workloads", strings.Join(names, ","), "comma-separated workloads to run, by ID (W1 … W4, W2c, W3c) or name")
	keys := flag.String("keys", "", "comma-separated key orders each keyed workload runs in: "+strings.Join(workload.KeyOrders, ", ")+
		" (default: as named, scattered for a base workload)")
	values := flag.String("values", harness.ValuesOwn, "comma-separated values each workload runs with: "+harness.ValuesOwn+
		" (the workload's own), "+strings.Join(workload.ValueKinds, ", "))
	records := flag.Int("records", workload.DefaultRecords, "records per workload and run")
	runs := flag.Int("runs", 3, "runs of each client per workload, interleaved")
	quick := flag.Bool("quick", false, "smoke test: 100 000 records and 1 run unless -records or -runs are given")
	asJSON := flag.Bool("json", false, "print the report as JSON instead of Markdown")
	jsonFile := flag.String("jsonfile", "", "also write the JSON report to this file")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on one client run")
	bindir := flag.String("bindir", "", "build the binaries here (default: a temporary directory)")
	cpuprofile := flag.String("cpuprofile", "", "write CPU and heap profiles of the -profile clients' runs to this directory")
	profile := flag.String("profile", harness.Ours+","+harness.Baseline, "comma-separated clients to profile with -cpuprofile")
	freshValues := flag.Bool("fresh-values", false, "every record of the Go clients gets a newly allocated value, as an application that serializes each record passes (the clients that keep the caller's value until its completion then hold that memory); default: records share the payload's 4 096 values")
	bufferMemory := flag.Int64("buffer-memory", workload.DefaultBufferMemory, "bytes every client may buffer, where it has such a bound (samsa BufferMemory, kgo MaxBufferedBytes, Java buffer.memory, librdkafka queue.buffering.max.kbytes, kafka-go's bytes in flight)")
	strict := flag.Bool("strict", false, "exit with status 1 when a run fails or one of issue 26's targets against kgo is not met")
	broker := flag.String("broker", harness.BrokerTestbroker, "comma-separated brokers to run against, in turn: "+strings.Join(harness.Brokers, "|")+
		" (testbroker: sink, kfake: blackhole, kafka: interop/kafka/start.sh, 1 node); with several, one of them kafka, the Java client runs on kafka only")
	brokerStore := flag.Bool("broker-store", false, "testbroker and kfake store the batches instead of acknowledging without storing")
	useTLS := flag.Bool("tls", false, "the broker (testbroker, kfake) serves TLS with a CA it generates, and the clients connect over TLS (-tls-ca)")
	tlsCompare := flag.Bool("tls-compare", false, "with -broker testbroker: every client runs over the broker's plaintext and its TLS listener in each round (rows client+tls), and the report gives the TLS overhead; implies -tls")
	warmup := flag.Int("warmup-records", 0, "with -broker kafka: records every client sends once to each workload's topic before the measured runs, not counted (the broker's JIT warms up); default -records (with -rates 100 000), -1 none")
	kafkaManyPartitions := flag.Int("kafka-many-partition-records", harness.DefaultKafkaManyPartitionRecords, "with -broker kafka: records per run of W4 (10 000 partitions, which one Kafka broker appends at thousands of records/s), when fewer than -records; -1: -records")
	kafkaBootstrap := flag.String("kafka-bootstrap", "", "with -broker kafka: use this running cluster instead of starting one (topics are created, the cluster is left running)")
	summaryOnly := flag.Bool("summary", false, "print the summary tables and the targets only, not every broker's report")
	rates := flag.String("rates", "", "fixed-rate mode (issue 35): comma-separated rates in records a second, e.g. 5000,20000,50000; samsa, kgo and java only, -broker kafka unless given")
	lingers := flag.String("lingers", strings.Join(harness.DefaultRateLingers, ","), "with -rates: comma-separated lingers, a row each per rate (a duration, or default: each client's own)")
	rateDuration := flag.Duration("rate-duration", 60*time.Second, "with -rates: the measured steady phase of each run")
	rateWarmup := flag.Duration("rate-warmup", 10*time.Second, "with -rates: each run's warm-up at the same rate, not measured")
	fromJSON := flag.String("from-json", "", "run nothing: print the tables of a report saved with -jsonfile (with -summary, -json, -strict as for a run)")
	flag.Parse()

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["records"] {
			*records = 100_000
		}
		if !set["runs"] {
			*runs = 1
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var valueList []string
	for _, v := range list(*values) {
		if v != harness.ValuesOwn && !slices.Contains(workload.ValueKinds, v) {
			return fmt.Errorf("-values: unknown values %q (want %s or one of %s)", v, harness.ValuesOwn, strings.Join(workload.ValueKinds, ", "))
		}
		valueList = append(valueList, v)
	}
	if *rates != "" {
		return runRate(ctx, set, *rates, *lingers, *rateDuration, *rateWarmup, harness.Options{
			Clients:        list(*clients),
			Runs:           *runs,
			Timeout:        *timeout,
			BinDir:         *bindir,
			Log:            os.Stderr,
			BufferMemory:   *bufferMemory,
			KafkaBootstrap: *kafkaBootstrap,
			WarmupRecords:  *warmup,
		}, *broker, *asJSON, *jsonFile)
	}
	var suite *harness.Suite
	var err error
	if *fromJSON != "" {
		b, rerr := os.ReadFile(*fromJSON)
		if rerr != nil {
			return rerr
		}
		suite = &harness.Suite{}
		if rerr := json.Unmarshal(b, suite); rerr != nil {
			return fmt.Errorf("-from-json %s: %w", *fromJSON, rerr)
		}
	} else {
		suite, err = harness.RunSuite(ctx, harness.Options{
			Clients:    list(*clients),
			Workloads:  list(*workloads),
			Keys:       list(*keys),
			Values:     valueList,
			Records:    *records,
			Runs:       *runs,
			Timeout:    *timeout,
			BinDir:     *bindir,
			ProfileDir: *cpuprofile,
			Profile:    list(*profile),
			Log:        os.Stderr,

			BufferMemory: *bufferMemory,
			FreshValues:  *freshValues,

			BrokerStore:    *brokerStore,
			KafkaBootstrap: *kafkaBootstrap,
			WarmupRecords:  *warmup,

			KafkaManyPartitionRecords: *kafkaManyPartitions,
			TLS:                       *useTLS,
			TLSCompare:                *tlsCompare,
		}, list(*broker))
	}
	if suite == nil {
		return err
	}
	if *jsonFile != "" {
		b, jerr := json.MarshalIndent(suite, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(*jsonFile, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			return jerr
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(suite); err != nil {
			return err
		}
	} else if *summaryOnly {
		if err := suite.WriteSummary(os.Stdout); err != nil {
			return err
		}
		if err := suite.WriteChecks(os.Stdout); err != nil {
			return err
		}
	} else if err := suite.WriteMarkdown(os.Stdout); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if *strict {
		for _, r := range suite.Reports {
			for _, w := range r.Workloads {
				if w.Error != "" {
					return fmt.Errorf("%s, workload %s: %s", r.BrokerName, w.Spec.Name, w.Error)
				}
				for _, s := range w.Clients {
					if s.OK != len(s.Runs) {
						return fmt.Errorf("%s, workload %s: %s: %d of %d runs failed", r.BrokerName, w.Spec.Name, s.Client, len(s.Runs)-s.OK, len(s.Runs))
					}
				}
			}
		}
		for _, c := range suite.Checks() {
			if !c.Met() {
				return fmt.Errorf("issue 26's target %s on %s, %s is not met", c.Target, c.Workload, c.Broker)
			}
		}
	}
	return nil
}

// runRate runs the fixed-rate mode (-rates) and prints its table (or its
// JSON with -json; -jsonfile writes it too). The broker is kafka unless
// -broker names one; -clients defaults to samsa, kgo and java.
func runRate(ctx context.Context, set map[string]bool, rates, lingers string, duration, warmup time.Duration,
	o harness.Options, broker string, asJSON bool, jsonFile string) error {
	ro := harness.RateOptions{Lingers: list(lingers), Duration: duration, Warmup: warmup}
	for _, r := range list(rates) {
		n, err := strconv.ParseInt(r, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("-rates: %q is not a rate in records a second", r)
		}
		ro.Rates = append(ro.Rates, n)
	}
	o.Broker = harness.BrokerKafka
	if set["broker"] {
		o.Broker = broker
	}
	if !set["clients"] {
		o.Clients = []string{harness.Ours, harness.Baseline, harness.Java}
	}
	rep, err := harness.RunRate(ctx, o, ro)
	if rep == nil {
		return err
	}
	if jsonFile != "" {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(jsonFile, append(b, '\n'), 0o644)
		}
		if jerr != nil {
			return jerr
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil {
			return jerr
		}
	} else if werr := rep.WriteMarkdown(os.Stdout); werr != nil {
		return werr
	}
	return err
}
