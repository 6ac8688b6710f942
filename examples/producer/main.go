package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	go func() {
		// After the first interrupt, a second one kills the program.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var usage usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintln(os.Stderr, errorLine(err))
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is the line main prints for err: the program's name, then the
// error. An error of package producer begins with that name already
// ("producer: invalid config: ..."), and is not prefixed twice.
func errorLine(err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, "producer: ") {
		return msg
	}
	return "producer: " + err.Error()
}

// usageError is a bad command line; main exits with status 2 for it.
// printed is set when the flag package has already shown it, with the
// usage.
type usageError struct {
	msg     string
	printed bool
}

func (e usageError) Error() string { return e.msg }

// options are the parsed command line.
type options struct {
	brokers     []string // empty: start the embedded cluster
	topic       string
	partitions  int
	records     int64
	recordSize  int
	keys        int
	compression compression.Type
	acks        producer.Acks
	linger      time.Duration
	batchSize   int
	idempotent  bool
	json        bool
	tls         *tls.Config    // nil: plaintext (security.go)
	sasl        sasl.Mechanism // nil: no SASL
	metricsAddr string         // "": no metrics server (metrics.go)
	txnID       string         // "": not transactional
	txnRecords  int64          // records per transaction, with txnID
	spoolDir    string         // "": no spool (a file's samsa.spool.* keys still apply)

	// file is the -properties file (nil without one): its Config is the
	// base of the producer's, under the settings above (properties.go).
	file *propertiesFile
	// settings say where each setting came from, with a file.
	settings []setting
}

// minRecordSize is the smallest value: it holds the record's sequence
// number, which the verification reads back.
const minRecordSize = 8

// The producer settings the example fixes unless a -properties file sets
// them, so that the flags' bounds are its own: the buffer memory and the
// request size (both the producer's defaults), and the longest -linger
// that fits the producer's default delivery timeout (120 s, at least
// linger + request timeout of 30 s).
const (
	bufferMemory   = 32 << 20
	maxRequestSize = 1 << 20
	maxLinger      = time.Minute
)

// bufferMemory is the producer's buffer memory: the file's buffer.memory,
// or the example's.
func (o options) bufferMemory() int64 {
	if o.file != nil && o.file.cfg.BufferMemory > 0 {
		return o.file.cfg.BufferMemory
	}
	return bufferMemory
}

// maxRequestSize is the producer's request size: the file's
// max.request.size, or the example's.
func (o options) maxRequestSize() int {
	if o.file != nil && o.file.cfg.MaxRequestSize > 0 {
		return o.file.cfg.MaxRequestSize
	}
	return maxRequestSize
}

// defaultTxnRecords is -txn-records' default: records per transaction.
const defaultTxnRecords = 1000

// effectiveBatchSize is the batch size the producer uses: a batch never
// outgrows a request.
func (o options) effectiveBatchSize() int { return min(o.batchSize, o.maxRequestSize()) }

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./examples/producer [flags]\n\n"+
			"Produces records with samsa, to an embedded 3-broker cluster unless -brokers is given,\n"+
			"verifies them and prints a summary. It exits with status 1 if any record failed.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	brokers := fs.String("brokers", "", "comma-separated `host:port` list of a real Kafka cluster; empty starts an embedded one (3 brokers) and reads the records back")
	fs.StringVar(&o.topic, "topic", "samsa-example", "topic to produce to")
	fs.IntVar(&o.partitions, "partitions", 12, "partitions of the topic when the example creates it (always on the embedded cluster; on a real one only if it does not exist, also where the brokers auto-create topics); the summary shows the topic's real count and warns when it differs")
	fs.Int64Var(&o.records, "records", 1_000_000, "number of records to produce")
	fs.IntVar(&o.recordSize, "record-size", 100, fmt.Sprintf("value size in `bytes` (at least %d)", minRecordSize))
	fs.IntVar(&o.keys, "keys", 10_000, "number of distinct keys, used in turn; 0 sends records without keys")
	codec := fs.String("compression", "lz4", "codec: none, gzip, snappy, lz4 or zstd")
	acks := fs.String("acks", "all", "acks: all (-1), leader (1) or none (0)")
	fs.DurationVar(&o.linger, "linger", 5*time.Millisecond, "how long a batch waits for more records (0: send at once; at most 1m)")
	fs.IntVar(&o.batchSize, "batch-size", 64<<10, "batch size in `bytes` (above 1 MiB a batch still stops at the 1 MiB request size)")
	fs.BoolVar(&o.idempotent, "idempotent", true, "idempotent producer (needs -acks all); turned off by default when -acks is not all")
	fs.BoolVar(&o.json, "json", false, "print the summary as one JSON object on stdout, and no progress bar")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve the producer's metrics in Prometheus' text format at http://`addr`/metrics while it runs (e.g. :9100); empty: none")
	fs.StringVar(&o.txnID, "transactional-id", "", "produce in transactions under this transactional.id (needs -acks all and idempotence), committing every -txn-records records; the embedded cluster's read-back then sees committed records only (read_committed); with -brokers nothing is read back")
	fs.Int64Var(&o.txnRecords, "txn-records", defaultTxnRecords, "records per transaction, with -transactional-id (the last one may be smaller)")
	fs.StringVar(&o.spoolDir, "spool", "", "write every record to a durable write-ahead spool in `DIR` before it is sent (producer.Config.Spool; README's \"Durable spool\"): it survives a crash and is sent again by the next run on the directory; empty: none")
	security := addSecurityFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{msg: err.Error(), printed: true}
	}
	if fs.NArg() > 0 {
		return o, usageError{msg: fmt.Sprintf("unexpected arguments: %q", fs.Args())}
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var bad []string
	if security.properties != "" {
		file, err := loadPropertiesFile(security.properties)
		if err != nil {
			return o, usageError{msg: "-properties: " + err.Error()}
		}
		o.file = file
	}
	src := sources{set: set, file: o.file}
	// report notes where a setting came from, when a file is given (without
	// one, every setting is a flag or its default, as -help says).
	report := func(name, flagName string, from int, value any) {
		if o.file != nil {
			o.settings = append(o.settings, setting{Name: name, Value: settingValue(value), Source: src.describe(from, flagName)})
		}
	}

	from := src.of("brokers", settingKeys["brokers"]...)
	switch from {
	case fromFlag:
		for b := range strings.SplitSeq(*brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				o.brokers = append(o.brokers, b)
			}
		}
	case fromFile:
		o.brokers = o.file.cfg.Brokers
	}
	report("brokers", "brokers", from, o.brokers)
	bad = append(bad, security.apply(&o, src, report)...)
	if o.records <= 0 {
		bad = append(bad, fmt.Sprintf("-records must be positive, got %d", o.records))
	}
	if o.recordSize < minRecordSize {
		bad = append(bad, fmt.Sprintf("-record-size must be at least %d, got %d", minRecordSize, o.recordSize))
	}
	if o.keys < 0 {
		bad = append(bad, fmt.Sprintf("-keys must not be negative, got %d", o.keys))
	}
	if o.partitions <= 0 {
		bad = append(bad, fmt.Sprintf("-partitions must be positive, got %d", o.partitions))
	}

	var err error
	from = src.of("compression", settingKeys["compression"]...)
	if from == fromFile {
		o.compression = o.file.cfg.Compression
	} else if o.compression, err = compression.ParseType(*codec); err != nil {
		bad = append(bad, fmt.Sprintf("-compression %q is not none, gzip, snappy, lz4 or zstd", *codec))
	}
	report("compression", "compression", from, o.compression)

	from = src.of("acks", settingKeys["acks"]...)
	if from == fromFile {
		o.acks = o.file.cfg.Acks
	} else if o.acks, err = producer.ParseAcks(*acks); err != nil {
		bad = append(bad, fmt.Sprintf("-acks %q is not all, leader or none", *acks))
	}
	report("acks", "acks", from, o.acks)

	from = src.of("linger", settingKeys["linger"]...)
	if from == fromFile {
		o.linger = max(o.file.cfg.Linger, 0) // NoWait: no linger
	} else if o.linger < 0 || o.linger > maxLinger {
		bad = append(bad, fmt.Sprintf("-linger must be in [0, %v], got %v", maxLinger, o.linger))
	}
	report("linger", "linger", from, o.linger)

	from = src.of("batch-size", settingKeys["batch-size"]...)
	if from == fromFile {
		o.batchSize = o.file.cfg.BatchSize
	} else if mem := o.bufferMemory(); o.batchSize <= 0 || int64(o.batchSize) > mem {
		bad = append(bad, fmt.Sprintf("-batch-size must be in [1, %d] (the buffer memory), got %d", mem, o.batchSize))
	}
	report("batch size", "batch-size", from, o.batchSize)

	// Idempotence: the flag, else the file's enable.idempotence, else as
	// the Java client does when it is not given: off when acks is not
	// all (or the file's retries=0 or max in flight above 5 rule it out).
	from = src.of("idempotent", settingKeys["idempotent"]...)
	idemSource := src.describe(from, "idempotent")
	switch from {
	case fromFile:
		o.idempotent = !o.file.cfg.DisableIdempotence
	case fromDefault:
		switch {
		case o.acks != producer.AcksAll:
			o.idempotent, idemSource = false, "off: acks is not all"
		case o.file != nil && (strings.TrimSpace(o.file.keys["retries"]) == "0" || o.file.cfg.MaxInFlight > 5):
			o.idempotent, idemSource = false, "off: "+o.file.name+" sets retries=0 or more than 5 in flight"
		}
	}
	if o.file != nil {
		o.settings = append(o.settings, setting{Name: "idempotent", Value: fmt.Sprint(o.idempotent), Source: idemSource})
	}
	if o.idempotent && o.acks != producer.AcksAll {
		bad = append(bad, fmt.Sprintf("-idempotent needs -acks all, got -acks %s (pass -idempotent=false, or leave -idempotent out)", o.acks))
	}

	from = src.of("transactional-id", settingKeys["transactional-id"]...)
	if from == fromFile {
		o.txnID = o.file.cfg.TransactionalID
	}
	report("transactional id", "transactional-id", from, o.txnID)
	switch {
	case o.txnID == "" && set["txn-records"]:
		bad = append(bad, "-txn-records needs -transactional-id")
	case o.txnID != "" && o.txnRecords <= 0:
		bad = append(bad, fmt.Sprintf("-txn-records must be positive, got %d", o.txnRecords))
	}
	if o.txnID != "" && o.acks != producer.AcksAll {
		bad = append(bad, fmt.Sprintf("-transactional-id needs -acks all, got -acks %s", o.acks))
	} else if o.txnID != "" && !o.idempotent {
		bad = append(bad, "-transactional-id needs -idempotent (a transactional producer is idempotent)")
	}
	if o.spoolDir != "" && o.txnID != "" {
		bad = append(bad, "-spool cannot be used with -transactional-id (a spool is not transactional yet)")
	}
	if len(bad) > 0 {
		return o, usageError{msg: strings.Join(bad, "; ")}
	}
	return o, nil
}

// config returns the producer's Config for o: the -properties file's
// Config, if any (every producer key of the file), with o's settings on
// top.
func (o options) config(brokers []string) producer.Config {
	var cfg producer.Config
	if o.file != nil {
		cfg = o.file.cfg
		if cfg.Compression != o.compression {
			cfg.CompressionLevel = 0 // the file's level was for its codec
		}
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "samsa-example"
	}
	linger := o.linger
	if linger == 0 {
		linger = producer.NoWait // a zero Config.Linger would mean the default
	}
	cfg.Brokers = brokers
	cfg.Acks = o.acks
	cfg.Linger = linger
	cfg.BatchSize = o.batchSize
	cfg.BufferMemory = o.bufferMemory()
	cfg.MaxRequestSize = o.maxRequestSize()
	cfg.Compression = o.compression
	cfg.DisableIdempotence = !o.idempotent
	cfg.AutoCreateTopics = true
	cfg.AutoCreatePartitions = int32(o.partitions)
	cfg.TLS, cfg.SASL = o.tls, o.sasl
	cfg.TransactionalID = o.txnID
	if o.spoolDir != "" {
		cfg.Spool = &producer.SpoolConfig{Dir: o.spoolDir}
	}
	return cfg
}

// run is the whole program: it parses args, produces, verifies, and writes
// the summary to stdout. Progress goes to stderr when it is a terminal and
// -json is not given. The error is non-nil when the command line is bad,
// when any record failed, or when the verification found a problem.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	var progressOut io.Writer
	if !o.json && isTerminal(stderr) {
		progressOut = stderr
	}
	s, err := produce(ctx, o, progressOut)
	if err != nil {
		return err
	}
	if o.json {
		err = s.writeJSON(stdout)
	} else {
		err = s.writeText(stdout)
	}
	if err != nil {
		return err
	}
	return s.err()
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
