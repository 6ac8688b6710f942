// Package harness runs the peer benchmark: the same workloads through
// samsa and four other Go Kafka producers, each in a process of its own,
// against one testbroker process in sink mode.
//
// # Runs
//
// Run builds the broker and the client binaries (bench/clients/NAME) with
// the go command, starts one broker per workload with the workload's topic,
// and runs every client once per round, for Options.Runs rounds, rotating
// the client order between rounds so that machine noise spreads evenly.
//
// # Measures
//
// Each client times itself from the first send to the last
// acknowledgment, after an untimed warm-up record (package workload). The
// harness adds the process's user+system CPU time and peak RSS from
// getrusage (ProcessState.SysUsage), so CPU per record includes process
// start-up and connection setup. Summary holds the medians over the
// successful runs and the ratios ours/peer.
//
// # Failures
//
// A client that does not build, exits with an error, times out, or does
// not get every record acknowledged is reported with the exact error in
// the Report and in its Markdown; it never aborts the other clients.
package harness
