// Command producer is samsa's runnable example: it produces records as fast
// as one goroutine can send them, shows its progress, checks that every
// record arrived in order, and prints a summary.
//
// # Running it
//
//	go run ./examples/producer
//
// With no flags it starts an in-process cluster of 3 brokers (package
// samsatest, which your own tests can use), creates a topic of 12
// partitions and produces 1 000 000 records with 100-byte values, keyed by
// 10 000 distinct keys, compressed with lz4, with the idempotent producer
// and acks=all. On a
// terminal, a progress line on stderr shows the percentage done,
// records/s, MiB/s, Produce requests in flight and buffer memory in use,
// then "verifying" while the records are read back. Sizes are in binary
// units everywhere (KiB, MiB: 2^10, 2^20 bytes).
//
// Against a real cluster:
//
//	go run ./examples/producer -brokers kafka1:9092,kafka2:9092 -topic bench -records 100000
//
// The topic is created with -partitions partitions if it does not exist,
// also on brokers that auto-create topics (auto.create.topics.enable, with
// their own num.partitions): the producer's AutoCreateTopics keeps its
// Metadata requests from creating the topic first. A topic that exists
// keeps its partitions. After the run the example reads the topic's
// partition count from the cluster's metadata: the summary's header shows
// it, and a "warning" line says when it is not -partitions.
// -keys 0 sends records without keys (the sticky partitioner spreads
// them); -compression, -acks, -linger, -batch-size and -idempotent set the
// producer's knobs; -json prints the summary as one JSON object on stdout,
// with no progress line. -spool DIR writes every record to a durable
// write-ahead spool in DIR first (producer.Config.Spool): a run killed
// midway leaves its unsent records there, and the next run on DIR sends
// them again before its own. -help lists every flag with its default.
//
// From a Java or librdkafka properties file:
//
//	go run ./examples/producer -properties producer.properties -linger 20ms
//
// uses every producer key of the file (bootstrap.servers, the security
// keys, compression.type, linger.ms, buffer.memory, delivery.timeout.ms...,
// through producer.ConfigFromProperties); a flag given on the command line
// wins over the file. The summary then says where each setting came from
// ("compression: zstd (from producer.properties)", "linger: 20ms (flag
// -linger)", "acks: all (default)"), names the file's other keys, and lists
// the keys samsa has no setting for (Config.IgnoredProperties).
//
// In transactions:
//
//	go run ./examples/producer -transactional-id x -txn-records 1000
//
// sends the records in transactions of -txn-records records (default 1000),
// committing each; the summary counts the committed transactions. The
// embedded cluster's read-back then reads what a read_committed consumer
// sees; a real cluster is not read back (the example has no consumer).
//
// # What it verifies
//
// Record i carries i in the first 8 bytes of its value and, with keys, the
// key "key-<i mod keys>". The program checks what the producer reports
// (every record acknowledged, none failed; in each partition, callbacks in
// Send order with increasing offsets; each key in one partition), and, on
// the embedded cluster, reads every partition back: each record exactly
// once, with its key and value size, and each key's records in Send order.
// A real cluster is not read back.
//
// # The summary
//
// The effective linger and batch size (-batch-size, capped at the 1 MiB
// request size), records acknowledged and failed (with acks=none the
// producer only learns that a record was written to the connection, and
// the summary says so), payload bytes, batches and the
// compression ratio (bytes before compression over bytes on the wire, from
// Producer.Metrics), throughput from the first Send to the end of Flush,
// Send latency p50 and p99 (the time spent in SendCallback, one record in
// 64) and ack latency p50, p99 and max (from SendCallback to the record's
// callback, every record), and the verification's result.
//
// The exit status is 0 when every record was acknowledged and verified, 1
// when a record failed or the verification found a problem (the summary
// lists what), and 2 for a bad command line, a bad flag combination
// included (-idempotent with -acks other than all; -transactional-id with
// -acks other than all or with -idempotent=false; -txn-records without
// -transactional-id), named by its flags.
//
// Ctrl-C stops sending at once: the producer gets half a second to deliver
// what it has buffered, and a partial summary is printed (exit status 1).
// A second Ctrl-C kills the program.
//
// # How it sends
//
// One goroutine calls SendCallback in a loop with one reused Record. The
// callback is a method value bound once per tracking slot; slots are
// recycled through a sync.Pool, so the loop allocates nothing per record.
// Latencies go into fixed-size log-linear histograms (1% precision), so
// memory does not grow with -records.
package main
