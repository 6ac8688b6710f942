package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
var Clients = []string{"samsa", "kgo", "sarama", "kafkago", "confluent"}

// Options configures Run. The zero value runs the full benchmark.
type Options struct {
	// Clients to run, by name (see Clients). Default all of them. Ours is
	// always added, as the ratios need it.
	Clients []string
	// Workloads to run, by name (see workload.All). Default all four.
	Workloads []string
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
	// Profile names the clients to profile. Default Ours.
	Profile []string
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
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
	if len(o.Workloads) == 0 {
		for _, s := range workload.All(o.Records) {
			o.Workloads = append(o.Workloads, s.Name)
		}
	}
	for _, w := range o.Workloads {
		if _, err := workload.ByName(w, o.Records); err != nil {
			return err
		}
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
		o.Profile = []string{Ours}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
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
	// BuildErrors maps a client that could not be built to the error.
	BuildErrors map[string]string `json:"build_errors,omitempty"`
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
}

// Summary is one client's medians over its successful runs of a workload.
type Summary struct {
	Client string `json:"client"`
	// OK counts the successful runs; the medians are over them.
	OK             int     `json:"ok_runs"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	CPUNsPerRecord float64 `json:"cpu_ns_per_record"`
	PeakRSSBytes   int64   `json:"peak_rss_bytes"`
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
	Run            int     `json:"run"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	CPUNsPerRecord float64 `json:"cpu_ns_per_record"`
	PeakRSSBytes   int64   `json:"peak_rss_bytes"`
	// CPU is user+system time of the whole process (start-up, connection
	// setup and the warm-up record included).
	CPU time.Duration `json:"cpu_ns"`
	// Wall is the client's own timing, first send to last ack.
	Wall  time.Duration `json:"wall_ns"`
	Setup time.Duration `json:"setup_ns"`
	Acked int64         `json:"acked"`
	// Batches, BrokerRecords and WireBytes are what the broker appended
	// during the run, from its counters before and after (the warm-up
	// record included): record batches, their records, and their length
	// as produced, headers included. All zero when the broker's counters
	// could not be read.
	Batches       int64 `json:"broker_batches,omitempty"`
	BrokerRecords int64 `json:"broker_records,omitempty"`
	WireBytes     int64 `json:"wire_bytes,omitempty"`
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

// Run builds the binaries, then runs every workload against a testbroker
// process of its own in sink mode: every client once per round, rounds
// repeated Runs times, the client order rotating between rounds. It fails
// only when nothing can run (bad options, the broker does not build); a
// client that fails to build or run is reported in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{
		Started: time.Now(), Records: o.Records, Runs: o.Runs,
		CPUs: numCPU(), Notes: map[string]string{}, BuildErrors: map[string]string{},
	}
	if o.BinDir == "" {
		dir, err := os.MkdirTemp("", "peerbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.BinDir = dir
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	var err error
	if rep.GoVersion, err = build(ctx, o, rep.BuildErrors); err != nil {
		return nil, err
	}
	rep.LoadStart = loadAvg()
	for _, name := range o.Workloads {
		spec, _ := workload.ByName(name, o.Records)
		rep.Workloads = append(rep.Workloads, runWorkload(ctx, o, spec, rep))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.Duration = time.Since(rep.Started)
	rep.LoadEnd = loadAvg()
	return rep, nil
}

// build compiles the broker and every client into o.BinDir. A client that
// does not build is recorded in buildErrs; a broker that does not build
// fails the whole run.
func build(ctx context.Context, o Options, buildErrs map[string]string) (goVersion string, err error) {
	modDir, err := moduleDir(ctx)
	if err != nil {
		return "", err
	}
	gobuild := func(out, pkg string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(o.BinDir, out), pkg)
		cmd.Dir = modDir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	fmt.Fprintf(o.Log, "building the broker and %s into %s\n", strings.Join(o.Clients, ", "), o.BinDir)
	if err := gobuild("testbroker", "github.com/samsa-go/samsa/internal/testbroker/cmd/testbroker"); err != nil {
		return "", err
	}
	for _, c := range o.Clients {
		if err := gobuild(c, "./clients/"+c); err != nil {
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
// must run in to build the clients.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
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
	fmt.Fprintf(o.Log, "workload %s: %d records, starting a broker with %d partitions\n", spec.Name, spec.Records, spec.Partitions)
	b, err := startBroker(ctx, filepath.Join(o.BinDir, "testbroker"), spec)
	if err != nil {
		wr.Error = err.Error()
		fmt.Fprintf(o.Log, "workload %s: %v\n", spec.Name, err)
	} else {
		counts := runStats{snap: b.stats}
		if err := counts.start(); err != nil {
			fmt.Fprintf(o.Log, "workload %s: no broker counters (records/batch and wire bytes left out): %v\n", spec.Name, err)
		}
		for r := range o.Runs {
			order := runnable(o.Clients, rep.BuildErrors)
			// Rotate, so that no client always runs right after another.
			k := r % max(1, len(order))
			order = append(order[k:], order[:k]...)
			for _, c := range order {
				res, notes := runClient(ctx, o, spec, b.addr, c, r)
				if notes != "" {
					rep.Notes[c] = notes
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
					fmt.Fprintf(o.Log, "  %-9s run %d: %10.0f records/s %8.0f CPU ns/record %6.1f MiB RSS %8.1f records/batch %6.1f wire B/record\n",
						c, r+1, res.RecordsPerSec, res.CPUNsPerRecord, float64(res.PeakRSSBytes)/(1<<20),
						res.RecordsPerBatch(), res.WireBytesPerRecord())
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
	for _, c := range o.Clients {
		s := Summary{Client: c, Runs: runs[c]}
		if msg, ok := rep.BuildErrors[c]; ok {
			s.Runs = []RunResult{{Error: "build failed: " + msg}}
		}
		s.summarize()
		wr.Clients = append(wr.Clients, s)
	}
	wr.ratios()
	return wr
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

// runClient runs one client process and measures it.
func runClient(ctx context.Context, o Options, spec workload.Spec, addr, client string, run int) (RunResult, string) {
	res := RunResult{Run: run + 1}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	args := []string{"-brokers", addr, "-workload", spec.Name, "-records", strconv.Itoa(spec.Records),
		"-timeout", o.Timeout.String()}
	if o.ProfileDir != "" && slices.Contains(o.Profile, client) {
		name := filepath.Join(o.ProfileDir, fmt.Sprintf("%s-%s-run%d", spec.Name, client, run+1))
		args = append(args, "-cpuprofile", name+".pprof", "-memprofile", name+".heap")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(o.BinDir, client), args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	if st := cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
			res.PeakRSSBytes = ru.Maxrss << 10 // Linux reports KiB
		}
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
	switch {
	case out.Errors > 0 || out.FirstError != "":
		res.Error = fmt.Sprintf("%d of %d records failed: %s", out.Errors, out.Records, out.FirstError)
	case out.Acked != int64(spec.Records):
		res.Error = fmt.Sprintf("%d of %d records acknowledged", out.Acked, spec.Records)
	case res.Wall <= 0:
		res.Error = "no wall time reported"
	default:
		res.RecordsPerSec = float64(spec.Records) / res.Wall.Seconds()
		res.CPUNsPerRecord = float64(res.CPU.Nanoseconds()) / float64(spec.Records)
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

// broker is a testbroker process.
type broker struct {
	cmd    *exec.Cmd
	addr   string
	stderr *brokerStderr
}

// startBroker starts a one-broker sink cluster with spec's topic and
// returns once it listens.
func startBroker(ctx context.Context, bin string, spec workload.Spec) (*broker, error) {
	cmd := exec.Command(bin, "-brokers", "1", "-sink", "-no-auto-create",
		"-partitions", strconv.Itoa(spec.Partitions), "-topic", spec.Topic())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &broker{cmd: cmd, stderr: newBrokerStderr()}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			addr <- sc.Text()
		}
		close(addr)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case a, ok := <-addr:
		if ok {
			b.addr = a
			return b, nil
		}
		_ = cmd.Wait()
		return nil, fmt.Errorf("the broker exited before listening: %s", strings.TrimSpace(b.stderr.String()))
	case <-time.After(30 * time.Second):
		err = errors.New("the broker did not print its address within 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, err
}

// stop interrupts the broker and waits for it, killing it after 10s.
func (b *broker) stop() error {
	_ = b.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("broker: %w: %s", err, strings.TrimSpace(b.stderr.String()))
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
		return errors.New("broker: did not stop within 10s of SIGINT; killed")
	}
}
