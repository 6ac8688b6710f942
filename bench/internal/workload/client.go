package workload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Client is one producer library under test, driven by Main in a process
// of its own.
type Client interface {
	// Open creates the producer for spec with the shared knobs, produces
	// one warm-up record and waits for its acknowledgment, so that
	// connections and metadata are in place before the clock starts.
	Open(ctx context.Context, spec Spec, brokers []string, p *Payload) error
	// Produce sends spec.Records records, record i with p.Key(i) and
	// p.Value(i), as fast as the library allows, and returns once every
	// one is acknowledged or failed, counting them in c.
	Produce(ctx context.Context, c *Counter)
	// Close releases the producer.
	Close() error
	// Notes says which of the client's own defaults the run relies on
	// (idempotence, partitioner, delivery path), for the report.
	Notes() string
}

// TxnClient is a Client that runs transactional workloads
// (Spec.TxnRecords > 0); Main refuses such a workload for other clients.
type TxnClient interface {
	Client
	// Transactional is a marker; it does nothing.
	Transactional()
}

// TLSClient is a Client that can connect over TLS. Main calls UseTLS
// before Open when it is given -tls-ca; a client that is not a TLSClient
// fails with -tls-ca.
type TLSClient interface {
	Client
	// UseTLS makes every broker connection use TLS with cfg, which trusts
	// only the CA in the PEM file caFile (for libraries that take a file)
	// and leaves ServerName empty: the library sets it from the broker's
	// host.
	UseTLS(caFile string, cfg *tls.Config)
}

// LoadCA returns a TLS client config that trusts only the PEM
// certificates in caFile.
func LoadCA(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Counter counts acknowledged and failed records; safe for concurrent use.
type Counter struct {
	acked, failed atomic.Int64
	first         atomic.Pointer[string]
}

// Ack counts one acknowledged record.
func (c *Counter) Ack() { c.acked.Add(1) }

// AckN counts n acknowledged records.
func (c *Counter) AckN(n int) { c.acked.Add(int64(n)) }

// Fail counts n failed records and keeps the first error.
func (c *Counter) Fail(n int, err error) {
	c.failed.Add(int64(n))
	if err == nil {
		err = errors.New("unknown error")
	}
	s := err.Error()
	c.first.CompareAndSwap(nil, &s)
}

// Err returns the first error counted by Fail, or nil.
func (c *Counter) Err() error {
	if p := c.first.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}

// Done returns the number of records acknowledged or failed so far.
func (c *Counter) Done() int64 { return c.acked.Load() + c.failed.Load() }

// ParseLinger reads a -linger flag: "" is 0 (the shared Linger),
// "default" LingerClientDefault, anything else a positive duration.
func ParseLinger(s string) (time.Duration, error) {
	switch s {
	case "":
		return 0, nil
	case "default":
		return LingerClientDefault, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("-linger %q: want a positive duration or \"default\"", s)
	}
	return d, nil
}

// processCPU returns the user+system time of every thread of this process
// so far, or -1 where getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// writeHeapProfile writes the heap profile to path, after a garbage
// collection: the profile's allocation counts are published only at the end
// of a GC cycle, so without one the last cycle's allocations are missing.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Main runs a client binary: it parses the flags, runs the workload through
// c and prints a Result as one JSON line on stdout. It exits with status 1,
// the error on stderr, when the client cannot be set up; failed records are
// counted in the Result instead.
func Main(name string, c Client) {
	if err := run(name, c, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name string, c Client, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	brokers := fs.String("brokers", "", "comma-separated bootstrap brokers (required)")
	wname := fs.String("workload", "", "workload name (required)")
	records := fs.Int("records", DefaultRecords, "records to produce")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the timed phase to this file")
	memprofile := fs.String("memprofile", "", "write a heap profile (in use and allocated) after the timed phase to this file")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	tlsCA := fs.String("tls-ca", "", "connect over TLS, trusting only the CA certificate in this PEM `file`")
	bufferMemory := fs.Int64("buffer-memory", DefaultBufferMemory, "bytes the client may buffer, where it has such a bound (Spec.BufferMemory)")
	fresh := fs.Bool("fresh-values", false, "give every record a newly allocated value (Spec.FreshValues)")
	rate := fs.Int64("rate", 0, "fixed-rate mode: send at this many records a second, Java ProducerPerformance's throttle (Spec.Rate)")
	rateWarmup := fs.Int("rate-warmup", 0, "fixed-rate mode: the first this many of -records are a warm-up, not measured (Spec.RateWarmup)")
	linger := fs.String("linger", "", "the producer's linger: a duration, or \"default\" for the client's own default (default: the shared 5ms)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" {
		return errors.New("-brokers is required")
	}
	spec, err := ByName(*wname, *records)
	if err != nil {
		return err
	}
	spec.BufferMemory = *bufferMemory
	spec.FreshValues = *fresh
	spec.Rate, spec.RateWarmup = *rate, *rateWarmup
	if spec.Linger, err = ParseLinger(*linger); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	rc, rateOK := c.(RateClient)
	if spec.Rate > 0 && !rateOK {
		return errors.New("-rate: this client has no fixed-rate mode in the benchmark")
	}
	if _, ok := c.(TxnClient); spec.TxnRecords > 0 && !ok {
		return fmt.Errorf("workload %s: this client does not run transactions in the benchmark", spec.Name)
	}
	if *tlsCA != "" {
		tc, ok := c.(TLSClient)
		if !ok {
			return errors.New("-tls-ca: this client does not connect over TLS in the benchmark")
		}
		cfg, err := LoadCA(*tlsCA)
		if err != nil {
			return fmt.Errorf("-tls-ca: %w", err)
		}
		tc.UseTLS(*tlsCA, cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	payload := NewPayload(spec)
	setup := time.Now()
	if err := c.Open(ctx, spec, strings.Split(*brokers, ","), payload); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	setupTime := time.Since(setup)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	var cnt Counter
	var rr *RateRun
	cpu0 := processCPU()
	start := time.Now()
	if spec.Rate > 0 {
		rr = newRateRun(spec, &cnt)
		rc.ProduceRate(ctx, rr)
		rr.finish()
	} else {
		c.Produce(ctx, &cnt)
	}
	wall := time.Since(start)
	produceCPU := processCPU() - cpu0
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			return err
		}
	}

	res := Result{
		Client:     name,
		Workload:   spec.Name,
		Records:    spec.Records,
		Acked:      cnt.acked.Load(),
		Errors:     cnt.failed.Load(),
		WallNanos:  wall.Nanoseconds(),
		SetupNanos: setupTime.Nanoseconds(),
		Notes:      c.Notes(),
	}
	if cpu0 >= 0 && produceCPU >= 0 {
		res.ProduceCPUNanos = produceCPU.Nanoseconds()
	}
	if rr != nil {
		rr.report(&res) // the steady phase's wall time and CPU instead
	}
	if p := cnt.first.Load(); p != nil {
		res.FirstError = *p
	}
	if missing := int64(spec.Records) - res.Acked - res.Errors; missing != 0 && res.FirstError == "" {
		res.FirstError = fmt.Sprintf("%d records neither acknowledged nor failed", missing)
	}
	_, err = stdout.Write(res.Encode())
	return err
}
