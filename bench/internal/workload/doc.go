// Package workload defines what every client of the peer benchmark
// produces, and the shell that runs one client in a process of its own.
//
// # Workloads
//
// All returns issue 26's six workloads, W1 to W4 (100-byte values without
// compression, with lz4, 1 KiB keyed values with zstd, and 100-byte keyed
// values over 10 000 partitions) and W2c and W3c (W2 and W3 with JSON
// values). Spec.WithKeys and Spec.WithValues make variants: keys in
// another order (KeysScattered, KeysOrdered, KeysZipf) and other values
// (ValuesText, ValuesJSON, ValuesLetters); ByName finds a workload or a
// variant by its name or ID. Payload makes their keys and values once,
// from fixed seeds, before the clock starts.
//
// # Shared knobs
//
// Linger (5 ms), BatchBytes (1 MiB) and Spec.BufferMemory (-buffer-memory,
// DefaultBufferMemory) are the settings every client maps onto its own
// options; acks=all everywhere; everything else is each client's default.
//
// # Client processes
//
// A client binary implements Client and calls Main. Main creates the
// producer and gets one warm-up record acknowledged (untimed), then times
// Produce from the first send to the last acknowledgment, with the
// process's CPU time over that phase (getrusage), and prints a Result as
// one JSON line. The harness (package harness) reads it and adds the whole
// process's CPU time and peak RSS from getrusage.
//
// With -rate (Spec.Rate) a RateClient's ProduceRate runs instead: the
// records at that rate, paced by Throttler (Java ProducerPerformance's
// throttle), their first -rate-warmup a warm-up, and Result gets the
// steady phase's latency Histogram and CPU (rate.go).
//
// A client not written in Go (clients/java) gets the same keys and values
// from a file Payload.WriteFile writes, and prints the same Result line.
package workload
