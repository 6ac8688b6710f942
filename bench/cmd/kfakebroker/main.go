// Command kfakebroker runs franz-go's kfake as a one-broker cluster in a
// process of its own, for the peer benchmark's -broker kfake: an
// independent broker implementation, so that the figures do not depend on
// samsa's own test broker.
//
//	kfakebroker -topic bench-100B -partitions 8          # blackhole: acknowledge, store nothing
//	kfakebroker -topic bench-100B -partitions 8 -store   # store every batch in memory
//	kfakebroker -topic bench-100B -tls-dir /tmp/ca       # a TLS listener; the CA in /tmp/ca/ca.pem
//
// By default the cluster runs with kfake.BlackholeProduce: Produce requests
// are answered with success and offsets advance (idempotent sequences are
// still checked), but the record bytes are dropped. -store keeps them in
// kfake's in-memory log instead. Topics are not auto-created: the one
// topic exists from the start with its partition count.
//
// It prints the listen address as the first line of stdout. On SIGUSR1 it
// prints its counters to stderr as one line, in the harness's format:
//
//	kfakebroker stats: produce=N batches=N records=N bytes=N
//
// produce counts Produce requests; batches, records and bytes are the
// record batches in them (every partition's Records field walked batch by
// batch: the batch count, the records each header declares, and the
// batches' length as sent, 61-byte headers included). They are counted as
// the requests arrive, through kfake's Control hook on Produce, which
// observes and hands every request on to kfake. SIGINT or SIGTERM closes
// the cluster and exits 0.
package main

import (
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(1)
	}
}

// serveTLS generates a CA, writes its certificate to dir/ca.pem and
// returns a server config with a certificate it signed for 127.0.0.1 and
// localhost.
func serveTLS(dir string) (*tls.Config, error) {
	ca, err := testbroker.NewTestCA()
	if err != nil {
		return nil, err
	}
	cfg, err := ca.ServerConfig("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return cfg, nil
}

// counters are the SIGUSR1 line's figures.
type counters struct {
	produce, batches, records, bytes atomic.Int64
}

// add counts the record batches of one Produce request.
func (c *counters) add(req *kmsg.ProduceRequest) {
	c.produce.Add(1)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			b, n, by := countBatches(p.Records)
			c.batches.Add(b)
			c.records.Add(n)
			c.bytes.Add(by)
		}
	}
}

func (c *counters) line() string {
	return fmt.Sprintf("kfakebroker stats: produce=%d batches=%d records=%d bytes=%d\n",
		c.produce.Load(), c.batches.Load(), c.records.Load(), c.bytes.Load())
}

// countBatches walks the v2 record batches in recs: each starts with its
// base offset (8 bytes) and its length after that field (4 bytes), and
// holds its record count at byte 57. A truncated tail is not counted.
func countBatches(recs []byte) (batches, records, bytes int64) {
	for len(recs) >= 61 {
		n := 12 + int(int32(binary.BigEndian.Uint32(recs[8:12])))
		if n < 61 || n > len(recs) {
			break
		}
		batches++
		records += int64(int32(binary.BigEndian.Uint32(recs[57:61])))
		bytes += int64(n)
		recs = recs[n:]
	}
	return batches, records, bytes
}

func run(args []string) error {
	fs := flag.NewFlagSet("kfakebroker", flag.ContinueOnError)
	topic := fs.String("topic", "", "the topic to create (required)")
	partitions := fs.Int("partitions", 8, "the topic's partition count")
	store := fs.Bool("store", false, "store the batches (default: kfake.BlackholeProduce, acknowledge without storing)")
	tlsDir := fs.String("tls-dir", "", "serve TLS (kfake.TLS) with a certificate from a CA generated at start and written to `directory`/ca.pem")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" {
		return fmt.Errorf("-topic is required")
	}
	if *partitions <= 0 {
		return fmt.Errorf("-partitions %d <= 0", *partitions)
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(*partitions), *topic)}
	if !*store {
		opts = append(opts, kfake.BlackholeProduce())
	}
	if *tlsDir != "" {
		cfg, err := serveTLS(*tlsDir)
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(cfg))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	var cnt counters
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if req, ok := r.(*kmsg.ProduceRequest); ok {
			cnt.add(req)
		}
		return nil, nil, false // not handled: kfake answers it, and the hook stays
	})

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	fmt.Println(c.ListenAddrs()[0])
	for s := range sig {
		if s != syscall.SIGUSR1 {
			return nil
		}
		fmt.Fprint(os.Stderr, cnt.line())
	}
	return nil
}
