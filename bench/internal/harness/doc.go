// Package harness runs the peer benchmark: the same workloads through
// samsa, four other Go Kafka producers and Apache Kafka's Java producer,
// each in a process of its own, against one broker per workload.
//
// # Brokers
//
// Options.Broker picks it: BrokerTestbroker (internal/testbroker as a
// process, sink mode: checked, acknowledged, not stored), BrokerKfake
// (franz-go's kfake as a process, cmd/kfakebroker, blackhole mode) or
// BrokerKafka (a one-node Apache Kafka started by interop/kafka/start.sh,
// or the cluster at Options.KafkaBootstrap). Options.BrokerStore makes
// testbroker and kfake store the batches. Each workload's topic exists
// before the first run, with the workload's partition count. RunSuite runs
// Run once per broker of a list and a Suite writes the summary table over
// all of them.
//
// # Runs
//
// Run builds the broker and the client binaries (bench/clients/NAME) with
// the go command, and the Java client (clients/java) with Maven's
// dependency:copy-dependencies and javac; without java, javac or mvn it
// skips the Java client and says so (Report.Skipped). It starts one broker
// per workload and runs every client once per round, for Options.Runs
// rounds, rotating the client order between rounds so that machine noise
// spreads evenly.
//
// # Measures
//
// Each client times itself from the first send to the last
// acknowledgment, after an untimed warm-up record, and measures its own
// process CPU over that phase (package workload; the JVM's process CPU
// time in Java). The harness adds the whole process's user+system CPU time
// and peak RSS from getrusage (ProcessState.SysUsage), samples VmRSS from
// /proc every RSSInterval, and with Options.ProfileDir splits the Go
// clients' CPU profiles between compression code and the rest. The
// broker's counts before and after each client run give its wire bytes
// and records per batch (the stats line of testbroker and kfakebroker;
// DescribeLogDirs and ListOffsets on real Kafka, which has no batch
// count). Summary holds the medians over the successful runs and the
// ratios ours/peer; Report.Checks and Suite.Checks evaluate issue 26's
// targets.
//
// # Fixed rate
//
// RunRate runs issue 35's fixed-rate mode instead of the workloads: the
// 1 KiB workload (workload.Rated) through samsa, kgo and Java, one row
// per linger and rate of RateOptions, each client paced by Java
// ProducerPerformance's throttle and reporting its steady phase's latency
// histogram and CPU; RateReport.WriteMarkdown prints the table.
//
// # Failures
//
// A client that does not build, exits with an error, times out, or does
// not get every record acknowledged is reported with the exact error in
// the Report and in its Markdown; it never aborts the other clients.
package harness
