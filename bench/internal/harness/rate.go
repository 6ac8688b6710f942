package harness

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// The fixed-rate mode (issue 35): samsa, kgo and Java at a fixed rate of
// records a second, each row one linger and one rate, with the latency
// quantiles and the CPU per record of every client.

// RateOptions configures RunRate; everything else comes from Options
// (clients, runs, broker, buffer memory, timeout, bin directory, log).
type RateOptions struct {
	// Rates are the rates in records a second, one row each per linger.
	// Required.
	Rates []int64
	// Lingers are the lingers, a row each per rate: a duration, or
	// "default" for each client's own (samsa 5ms, kgo 10ms, Java 5ms).
	// Default DefaultRateLingers.
	Lingers []string
	// Duration is the steady phase of a run, measured. Default 60s.
	Duration time.Duration
	// Warmup is the run's first phase, at the same rate, not measured.
	// Default 10s.
	Warmup time.Duration
}

// DefaultRateLingers are RateOptions.Lingers' default: issue 35's rows.
var DefaultRateLingers = []string{"1ms", "default"}

// rateWorkload is the fixed-rate mode's workload (workload.Rated).
const rateWorkload = "1KiB"

// rateBrokerWarmup is, with BrokerKafka, the records every client sends
// once, as fast as it can, before the rows (the broker's JIT), unless
// Options.WarmupRecords says otherwise.
const rateBrokerWarmup = 100_000

func (ro *RateOptions) defaults() error {
	if len(ro.Rates) == 0 {
		return fmt.Errorf("no rate")
	}
	for _, r := range ro.Rates {
		if r <= 0 {
			return fmt.Errorf("rate %d: want records a second > 0", r)
		}
	}
	if len(ro.Lingers) == 0 {
		ro.Lingers = slices.Clone(DefaultRateLingers)
	}
	for _, l := range ro.Lingers {
		if _, err := workload.ParseLinger(l); err != nil || l == "" {
			return fmt.Errorf("linger %q: want a duration or \"default\"", l)
		}
	}
	if ro.Duration == 0 {
		ro.Duration = 60 * time.Second
	}
	if ro.Warmup == 0 {
		ro.Warmup = 10 * time.Second
	}
	if ro.Duration < 0 || ro.Warmup < 0 {
		return fmt.Errorf("duration %v, warm-up %v: want neither negative", ro.Duration, ro.Warmup)
	}
	return nil
}

// rateSpec returns the workload of one row: spec at rate records a
// second with linger, its records a warm-up of ro.Warmup and a steady
// phase of ro.Duration at that rate.
func rateSpec(spec workload.Spec, ro RateOptions, rate int64, linger string) workload.Spec {
	spec.Rate = rate
	spec.RateWarmup = int(float64(rate) * ro.Warmup.Seconds())
	spec.Records = spec.RateWarmup + max(1, int(float64(rate)*ro.Duration.Seconds()))
	spec.Linger, _ = workload.ParseLinger(linger)
	return spec
}

// RateReport is the outcome of RunRate.
type RateReport struct {
	Started     time.Time         `json:"started"`
	Duration    time.Duration     `json:"duration_ns"`
	CPUs        int               `json:"cpus"`
	GoVersion   string            `json:"go_version"`
	JavaVersion string            `json:"java_version,omitempty"`
	Broker      string            `json:"broker"`
	Runs        int               `json:"runs"`
	Spec        workload.Spec     `json:"spec"`
	RunDuration time.Duration     `json:"run_duration_ns"`
	RunWarmup   time.Duration     `json:"run_warmup_ns"`
	Skipped     map[string]string `json:"skipped,omitempty"`
	BuildErrors map[string]string `json:"build_errors,omitempty"`
	Notes       map[string]string `json:"notes"`
	Clients     []string          `json:"clients"`
	Rows        []RateRow         `json:"rows"`
	// Error says why the rows stopped early (the broker failed), if so.
	Error string `json:"error,omitempty"`
}

// RateRow is one linger and one rate: every client's runs.
type RateRow struct {
	Linger string `json:"linger"`
	Rate   int64  `json:"rate"`
	// LoadStart and LoadEnd are /proc/loadavg before the row's first run
	// and after its last.
	LoadStart string        `json:"load_start,omitempty"`
	LoadEnd   string        `json:"load_end,omitempty"`
	Clients   []RateSummary `json:"clients"`
}

// RateSummary is one client's medians over its successful runs of a row.
type RateSummary struct {
	Client string `json:"client"`
	OK     int    `json:"ok_runs"`
	// Quantiles are the medians of the runs' latency quantiles, in ms,
	// at workload.LatencyQuantiles (p50, p95, p99, p99.9).
	Quantiles []float64 `json:"quantiles_ms"`
	// CPUPer100k is the median of the process CPU (user + system, every
	// thread) over the steady phase, in seconds per 100 000 records.
	CPUPer100k float64 `json:"cpu_s_per_100k"`
	// Achieved is the median rate achieved, steady records over the time
	// from the first steady send to the last.
	Achieved float64         `json:"achieved_per_sec"`
	Runs     []RateRunResult `json:"runs"`
}

// RateRunResult is one run's figures.
type RateRunResult struct {
	RunResult
	Quantiles  []float64 `json:"quantiles_ms,omitempty"`
	CPUPer100k float64   `json:"cpu_s_per_100k,omitempty"`
	Achieved   float64   `json:"achieved_per_sec,omitempty"`
	// Load is /proc/loadavg right after the run.
	Load string `json:"load,omitempty"`
}

// rateFigures derives a run's figures from what its client reported.
func rateFigures(res RunResult) RateRunResult {
	out := RateRunResult{RunResult: res}
	if !res.OK() {
		return out
	}
	switch {
	case res.SteadyRecords <= 0 || len(res.LatencyBuckets) == 0:
		out.Error = "no steady-phase latencies reported"
		return out
	case res.ProduceCPU <= 0:
		out.Error = "no steady-phase CPU reported"
		return out
	}
	for _, q := range workload.Quantiles(res.LatencyBuckets) {
		out.Quantiles = append(out.Quantiles, q/1e6)
	}
	out.CPUPer100k = res.ProduceCPU.Seconds() / float64(res.SteadyRecords) * 100_000
	if res.SteadySend > 0 {
		out.Achieved = float64(res.SteadyRecords) / res.SteadySend.Seconds()
	}
	return out
}

// summarizeRate fills the medians of s over its successful runs.
func (s *RateSummary) summarize() {
	var cpu, achieved []float64
	qs := make([][]float64, len(workload.LatencyQuantiles))
	s.OK = 0
	for _, r := range s.Runs {
		if !r.OK() {
			continue
		}
		s.OK++
		cpu = append(cpu, r.CPUPer100k)
		achieved = append(achieved, r.Achieved)
		for i := range qs {
			qs[i] = append(qs[i], r.Quantiles[i])
		}
	}
	s.Quantiles = nil
	if s.OK == 0 {
		return
	}
	for i := range qs {
		s.Quantiles = append(s.Quantiles, median(qs[i]))
	}
	s.CPUPer100k, s.Achieved = median(cpu), median(achieved)
}

// RunRate builds the binaries and runs the fixed-rate mode: for each
// linger of ro and each rate, Options.Runs rounds of every client, the
// client order rotating between rounds, each run a process of its own
// that sends ro.Warmup then ro.Duration of the 1 KiB workload at the rate
// (Java ProducerPerformance's throttle), against one broker for every row
// (Options.Broker, default BrokerKafka: interop/kafka/start.sh, the
// topic created once; with BrokerKafka every client first sends
// Options.WarmupRecords, default 100 000, unmeasured). It fails only when
// nothing can run; a client that fails to build or run is in the report.
func RunRate(ctx context.Context, o Options, ro RateOptions) (*RateReport, error) {
	if err := ro.defaults(); err != nil {
		return nil, err
	}
	if o.Broker == "" {
		o.Broker = BrokerKafka
	}
	o.Workloads = []string{rateWorkload}
	if o.Records == 0 {
		o.Records = 1 // each row sets its own; Options.defaults wants some
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	o.Timeout = max(o.Timeout, 2*(ro.Duration+ro.Warmup))
	rep := &RateReport{
		Started: time.Now(), CPUs: numCPU(), Broker: describeBroker(o), Runs: o.Runs,
		RunDuration: ro.Duration, RunWarmup: ro.Warmup,
		Skipped: map[string]string{}, BuildErrors: map[string]string{}, Notes: map[string]string{},
	}
	for _, c := range o.Clients {
		if c != Ours && c != Baseline && c != Java {
			return nil, fmt.Errorf("client %s has no fixed-rate mode (samsa, kgo and java have)", c)
		}
	}
	cleanup, err := prepare(ctx, &o, rep.Skipped, rep.BuildErrors, &rep.GoVersion, &rep.JavaVersion)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep.Clients = o.Clients
	spec := o.spec(rateWorkload)
	rep.Spec = spec
	clients := runnable(o.Clients, rep.BuildErrors)
	payload := ""
	if slices.Contains(clients, Java) {
		payload = filepath.Join(o.BinDir, "payload-"+spec.Name)
		if err := workload.NewPayload(spec).WriteFile(payload, spec); err != nil {
			return nil, fmt.Errorf("writing the Java client's payload file: %w", err)
		}
	}
	if o.Broker == BrokerKafka && o.KafkaBootstrap == "" {
		fmt.Fprintf(o.Log, "starting a kafka broker (interop/kafka/start.sh) for every row\n")
		k, err := launchKafka(ctx, o)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := k.stop(); err != nil {
				fmt.Fprintf(o.Log, "stopping the kafka broker: %v\n", err)
			}
		}()
		o.KafkaBootstrap, o.launchedKafka = k.addr, true
	}
	b, err := startBroker(ctx, o, spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := b.stop(); err != nil && rep.Error == "" {
			rep.Error = err.Error()
		}
	}()
	if o.Broker == BrokerKafka {
		w := o
		if w.WarmupRecords == 0 {
			w.WarmupRecords = rateBrokerWarmup
		}
		warmUp(ctx, w, spec, b, clients, payload)
	}
	for _, linger := range ro.Lingers {
		for _, rate := range ro.Rates {
			rs := rateSpec(spec, ro, rate, linger)
			row := RateRow{Linger: linger, Rate: rate, LoadStart: loadAvg()}
			fmt.Fprintf(o.Log, "linger %s, %d records/s: %d records a run, the first %d a warm-up\n", linger, rate, rs.Records, rs.RateWarmup)
			runs := map[string][]RateRunResult{}
			for r := range o.Runs {
				order := slices.Clone(clients)
				k := r % max(1, len(order))
				order = append(order[k:], order[:k]...)
				for _, c := range order {
					res, notes := runClient(ctx, o, rs, b.bootstrap(), variant{client: c}, r, payload)
					if notes != "" {
						rep.Notes[c] = notes
					}
					fr := rateFigures(res)
					fr.Load = loadAvg()
					runs[c] = append(runs[c], fr)
					logRateRun(o.Log, c, r, fr)
					if ctx.Err() != nil {
						break
					}
				}
			}
			row.LoadEnd = loadAvg()
			for _, c := range o.Clients {
				s := RateSummary{Client: c, Runs: runs[c]}
				if msg, ok := rep.BuildErrors[c]; ok {
					s.Runs = []RateRunResult{{RunResult: RunResult{Error: "build failed: " + msg}}}
				}
				s.summarize()
				row.Clients = append(row.Clients, s)
			}
			rep.Rows = append(rep.Rows, row)
			if ctx.Err() != nil {
				rep.Duration = time.Since(rep.Started)
				return rep, ctx.Err()
			}
		}
	}
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

func logRateRun(w io.Writer, client string, run int, r RateRunResult) {
	if !r.OK() {
		fmt.Fprintf(w, "  %-9s run %d: FAILED: %s\n", client, run+1, r.Error)
		return
	}
	waits := ""
	if r.SlotWaits > 0 {
		waits = fmt.Sprintf(" (%d slot waits)", r.SlotWaits)
	}
	fmt.Fprintf(w, "  %-9s run %d: p50 %.2f p95 %.2f p99 %.2f p99.9 %.2f ms, %.2f CPU s/100k records, %.0f records/s achieved, load %s%s\n",
		client, run+1, r.Quantiles[0], r.Quantiles[1], r.Quantiles[2], r.Quantiles[3], r.CPUPer100k, r.Achieved, r.Load, waits)
}

// WriteMarkdown writes the fixed-rate table: a row per linger and rate,
// each figure as the clients' medians side by side, with the load
// average beside each row, then the failures and the clients' notes.
func (r *RateReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	clients := strings.Join(r.Clients, " / ")
	fmt.Fprintf(&b, "Fixed rate (issue 35): %d B %s values, unkeyed, no compression, %d partitions; acks=all, idempotent (each client's default), batch %s, buffer memory %s; %s; %d CPUs, %s",
		r.Spec.ValueSize, r.Spec.Values, r.Spec.Partitions, mib(workload.BatchBytes), mib(r.Spec.BufferMemory), r.Broker, r.CPUs, r.GoVersion)
	if r.JavaVersion != "" {
		fmt.Fprintf(&b, ", %s", r.JavaVersion)
	}
	fmt.Fprintf(&b, "; median of %d interleaved runs of %v after a %v warm-up at the same rate (not measured), "+
		"Java ProducerPerformance's throttle; latency from just before the send to the callback; "+
		"CPU: the client process's user + system time over the steady phase.\n\n", r.Runs, r.RunDuration, r.RunWarmup)
	fmt.Fprintf(&b, "| linger | rate | p50 ms %s | p95 ms | p99 ms | p99.9 ms | CPU s per 100 k records, %s | records/s achieved | load average (1 5 15 min), start → end |\n", clients, clients)
	b.WriteString("|---|---:|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		linger := row.Linger
		if linger == "default" {
			linger = "defaults (samsa 5ms, kgo 10ms, Java 5ms)"
		}
		fmt.Fprintf(&b, "| %s | %s/s |", linger, thousands(float64(row.Rate)))
		for i := range workload.LatencyQuantiles {
			b.WriteString(" " + joinClients(row.Clients, func(s RateSummary) string { return fmt.Sprintf("%.2f", s.Quantiles[i]) }) + " |")
		}
		b.WriteString(" " + joinClients(row.Clients, func(s RateSummary) string { return fmt.Sprintf("%.2f", s.CPUPer100k) }) + " |")
		b.WriteString(" " + joinClients(row.Clients, func(s RateSummary) string { return thousands(s.Achieved) }) + " |")
		fmt.Fprintf(&b, " %s → %s |\n", row.LoadStart, row.LoadEnd)
	}
	var failures []string
	for _, row := range r.Rows {
		for _, s := range row.Clients {
			for _, run := range s.Runs {
				if !run.OK() {
					failures = append(failures, fmt.Sprintf("- linger %s, %d/s, %s run %d: %s", row.Linger, row.Rate, s.Client, run.Run, oneLine(run.Error)))
				} else if run.SlotWaits > 0 {
					failures = append(failures, fmt.Sprintf("- linger %s, %d/s, %s run %d: the send loop waited %d times for a callback slot", row.Linger, row.Rate, s.Client, run.Run, run.SlotWaits))
				}
			}
		}
	}
	if len(failures) > 0 {
		b.WriteString("\n" + strings.Join(failures, "\n") + "\n")
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "\nStopped: %s\n", oneLine(r.Error))
	}
	for _, c := range slices.Sorted(mapKeys(r.Skipped)) {
		fmt.Fprintf(&b, "\nSkipped %s: %s\n", c, r.Skipped[c])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// joinClients writes each client's figure, "–" for a client with no
// successful run, separated by " / ".
func joinClients(ss []RateSummary, f func(RateSummary) string) string {
	var out []string
	for _, s := range ss {
		if s.OK == 0 {
			out = append(out, "–")
			continue
		}
		out = append(out, f(s))
	}
	return strings.Join(out, " / ")
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
