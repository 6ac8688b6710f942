// Command testbroker runs an in-process Kafka cluster (internal/testbroker)
// as a process, for manual tests with kcat or any other client:
//
//	go run ./internal/testbroker/cmd/testbroker -brokers 3 -port 9092
//
// It prints the address of every broker, one per line, then serves until
// SIGINT or SIGTERM. Topics are auto-created by Metadata with -partitions
// partitions, and -topic creates some up front.
//
// Flags expose the two KIPs the broker implements, so that muting and
// throttling can be watched with kcat or kgo:
//
//	-queued-max-bytes N          KIP-72 queued.max.bytes (connections stop reading when reached)
//	-socket-request-max-bytes N  socket.request.max.bytes (default 100 MiB)
//	-mutation-rate R             KIP-599 controller_mutation_rate of every client id
//	-mutation-burst B            its burst (default R × samples × window)
//	-mutation-window D           controller.quota.window.size.seconds (default 1s)
//	-mutation-samples N          controller.quota.window.num (default 100)
//	-produce-byte-rate N         producer_byte_rate of every client id
//
// and the transaction coordinator's settings:
//
//	-txn-max-timeout D           transaction.max.timeout.ms (default 15m)
//	-txn-marker-delay D          delay of the commit and abort markers after EndTxn (default 0)
//
// Per-user and per-client-id quotas can also be set at run time with
// AlterClientQuotas (kafka-configs.sh, kadm). -v logs every connection
// opened and closed; -h prints the flags and exits 0.
//
// On SIGUSR1 it prints the cluster's counters to stderr as one line, for
// scripts (the peer benchmark reads it between client runs):
//
//	testbroker stats: requests=N produce=N batches=N records=N bytes=N
//
// requests counts the requests of every API, produce the Produce requests;
// batches, records and bytes count the record batches appended, their
// records and their length as produced, headers included (see
// testbroker.Stats). Every counter is cumulative since the start, and the
// line's format is stable: fields are only ever added at its end.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testbroker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("testbroker", flag.ContinueOnError)
	brokers := fs.Int("brokers", testbroker.DefaultBrokers, "number of brokers")
	host := fs.String("host", "127.0.0.1", "listen and advertised host")
	port := fs.Int("port", 0, "port of broker 0; broker i listens on port+i (0: random ports)")
	partitions := fs.Int("partitions", 1, "partitions of auto-created topics")
	topics := fs.String("topic", "", "comma-separated topics to create at start")
	sink := fs.Bool("sink", false, "validate and acknowledge produced batches without keeping them")
	noAuto := fs.Bool("no-auto-create", false, "do not create topics named by Metadata requests")
	verbose := fs.Bool("v", false, "log connections, lifecycle events and errors to stderr")
	// KIP-72
	queuedMax := fs.Int64("queued-max-bytes", 0,
		"bound on the bytes of requests read and not yet answered, across brokers (queued.max.bytes; <= 0: no bound); must exceed -socket-request-max-bytes")
	socketMax := fs.Int("socket-request-max-bytes", testbroker.DefaultSocketRequestMaxBytes,
		"largest request a connection accepts (socket.request.max.bytes)")
	// KIP-599 and the produce quota
	mutationRate := fs.Float64("mutation-rate", 0,
		"controller_mutation_rate of every client id: partition mutations per second (0: none; AlterClientQuotas can still set quotas)")
	mutationBurst := fs.Float64("mutation-burst", 0,
		"burst of the mutation quota in partition mutations (0: rate × samples × window)")
	mutationWindow := fs.Duration("mutation-window", time.Second,
		"quota window (controller.quota.window.size.seconds)")
	mutationSamples := fs.Int("mutation-samples", 100,
		"quota windows kept (controller.quota.window.num; Kafka's default is 11)")
	produceRate := fs.Int64("produce-byte-rate", 0,
		"producer_byte_rate of every client id in bytes per second (0: none)")
	txnMaxTimeout := fs.Duration("txn-max-timeout", testbroker.DefaultTransactionMaxTimeout,
		"transaction.max.timeout.ms: the longest transaction timeout InitProducerId accepts")
	txnMarkerDelay := fs.Duration("txn-marker-delay", 0,
		"delay before a transaction's commit or abort markers are written after EndTxn (0: before EndTxn answers)")
	secFlags := addSecurityFlags(fs) // security.go
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: testbroker [flags]\n\n"+
			"Prints each broker's address on stdout, then serves until SIGINT or SIGTERM.\n"+
			"SIGUSR1 prints the counters to stderr as one line:\n"+
			"  %s requests=N produce=N batches=N records=N bytes=N\n\nflags:\n", statsPrefix)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage was printed, nothing failed
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	security, announce, err := secFlags.build(*host)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	c, err := testbroker.New(testbroker.Config{
		Brokers:                *brokers,
		Host:                   *host,
		BasePort:               *port,
		DefaultPartitions:      int32(*partitions),
		AllowAutoTopicCreation: !*noAuto,
		Sink:                   *sink,
		QueuedMaxBytes:         *queuedMax,
		SocketRequestMaxBytes:  int32(min(*socketMax, math.MaxInt32)),
		MutationRate:           *mutationRate,
		MutationBurst:          *mutationBurst,
		MutationWindow:         *mutationWindow,
		MutationSamples:        *mutationSamples,
		ProduceByteRate:        *produceRate,
		TransactionMaxTimeout:  *txnMaxTimeout,
		TransactionMarkerDelay: *txnMarkerDelay,
		Security:               security,
		Logger:                 slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if *topics != "" {
		for _, name := range strings.Split(*topics, ",") {
			if err := c.CreateTopic(strings.TrimSpace(name), int32(*partitions)); err != nil {
				return err
			}
		}
	}
	// Before the addresses: whoever reads them may signal at once, and an
	// unhandled SIGUSR1 would end the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	for _, addr := range c.Addrs() {
		fmt.Println(addr)
	}
	if announce != nil {
		announce(c)
	}
	for s := range sig {
		if s != syscall.SIGUSR1 {
			break
		}
		fmt.Fprint(os.Stderr, statsLine(c.Stats()))
	}
	signal.Stop(sig)
	fmt.Fprintln(os.Stderr, "testbroker: stopping")
	return nil
}

// statsPrefix starts the line statsLine writes.
const statsPrefix = "testbroker stats:"

// statsLine formats st as the SIGUSR1 line, newline included (see the
// package comment).
func statsLine(st testbroker.Stats) string {
	return fmt.Sprintf("%s requests=%d produce=%d batches=%d records=%d bytes=%d\n",
		statsPrefix, sumRequests(st.Requests), st.Requests[0], st.Batches, st.Records, st.Bytes)
}

// sumRequests adds up the requests of every API.
func sumRequests(m map[int16]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
