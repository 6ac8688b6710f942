package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// latencies returns a client's reported buckets for these latencies.
func latencies(ds ...time.Duration) [][2]int64 {
	var h workload.Histogram
	for _, d := range ds {
		h.Record(int64(d))
	}
	return h.Buckets()
}

func rateRun(run int, lat time.Duration, cpu time.Duration) RateRunResult {
	return rateFigures(RunResult{
		Run: run, SteadyRecords: 100_000, SteadySend: 20 * time.Second, ProduceCPU: cpu,
		LatencyBuckets: latencies(lat, lat, lat, lat),
	})
}

// The table shows, per linger and rate, the medians of each client's
// runs side by side (a dash for a client with no successful run), CPU
// seconds per 100 000 records, the rate achieved and the load average.
func TestRateTableShowsMediansPerRow(t *testing.T) {
	java := RateSummary{Client: Java, Runs: []RateRunResult{{RunResult: RunResult{Run: 1, Error: "boom"}}}}
	samsa := RateSummary{Client: Ours, Runs: []RateRunResult{
		rateRun(1, 1500*time.Microsecond, 3*time.Second),
		rateRun(2, 9*time.Millisecond, 5*time.Second), // the median is not the mean
		rateRun(3, 2*time.Millisecond, 4*time.Second),
	}}
	kgo := RateSummary{Client: Baseline, Runs: []RateRunResult{rateRun(1, 3*time.Millisecond, 2*time.Second)}}
	for _, s := range []*RateSummary{&samsa, &kgo, &java} {
		s.summarize()
	}
	rep := &RateReport{
		CPUs: 2, GoVersion: "go1.x", Broker: "kafka", Runs: 3, RunDuration: time.Minute, RunWarmup: 10 * time.Second,
		Spec:    workload.Rated(1)[0],
		Clients: []string{Ours, Baseline, Java},
		Rows: []RateRow{{Linger: "1ms", Rate: 5000, LoadStart: "0.50 0.40 0.30", LoadEnd: "1.50 1.00 0.50",
			Clients: []RateSummary{samsa, kgo, java}}},
	}
	var b strings.Builder
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| linger | rate | p50 ms samsa / kgo / java | p95 ms | p99 ms | p99.9 ms | CPU s per 100 k records, samsa / kgo / java |",
		// Each figure is its bucket's midpoint (3 ms: 3.01 ms, within 0.4 %).
		"| 1ms | 5,000/s | 2.00 / 3.01 / – | 2.00 / 3.01 / – | 2.00 / 3.01 / – | 2.00 / 3.01 / – | 4.00 / 2.00 / – | 5,000 / 5,000 / – | 0.50 0.40 0.30 → 1.50 1.00 0.50 |",
		"java run 1: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// A run whose client reported no latencies or no CPU is a failed run,
// not a row of zeros.
func TestRateFiguresRefuseEmptyRuns(t *testing.T) {
	cases := []struct {
		name string
		res  RunResult
	}{
		{"no latencies", RunResult{SteadyRecords: 10, ProduceCPU: time.Second}},
		{"no CPU", RunResult{SteadyRecords: 10, LatencyBuckets: latencies(time.Millisecond)}},
		{"no steady records", RunResult{ProduceCPU: time.Second, LatencyBuckets: latencies(time.Millisecond)}},
	}
	for _, tc := range cases {
		if fr := rateFigures(tc.res); fr.OK() {
			t.Errorf("%s: the run counts as successful", tc.name)
		}
	}
}

func TestRateOptionsDefaults(t *testing.T) {
	ro := RateOptions{Rates: []int64{5000}}
	if err := ro.defaults(); err != nil {
		t.Fatal(err)
	}
	if ro.Duration != time.Minute || ro.Warmup != 10*time.Second || strings.Join(ro.Lingers, ",") != "1ms,default" {
		t.Errorf("defaults: %+v", ro)
	}
	spec := rateSpec(workload.Rated(1)[0], ro, 5000, "default")
	if spec.RateWarmup != 50_000 || spec.Records != 350_000 || spec.Linger != workload.LingerClientDefault {
		t.Errorf("rateSpec: warm-up %d, records %d, linger %v", spec.RateWarmup, spec.Records, spec.Linger)
	}
	for _, bad := range []RateOptions{{}, {Rates: []int64{0}}, {Rates: []int64{1}, Lingers: []string{"soon"}}} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestRunRateKfake runs the fixed-rate mode end to end on kfake: build,
// broker, client processes at the rate, every row's figures (Java too
// unless -short or without its tools).
func TestRunRateKfake(t *testing.T) {
	clients := []string{Ours, Baseline}
	if !testing.Short() && missingJavaTools() == "" {
		clients = append(clients, Java)
	}
	var log bytes.Buffer
	rep, err := RunRate(context.Background(), Options{Clients: clients, Runs: 1, Broker: BrokerKfake, BinDir: t.TempDir(), Log: &log},
		RateOptions{Rates: []int64{2000}, Duration: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond})
	require.NoError(t, err, log.String())
	require.Len(t, rep.Rows, 2, "a row per default linger (1ms, default)")
	for _, row := range rep.Rows {
		require.Len(t, row.Clients, len(clients))
		for _, s := range row.Clients {
			require.Equal(t, 1, s.OK, "%s, linger %s: %+v\n%s", s.Client, row.Linger, s.Runs, log.String())
			r := s.Runs[0]
			assert.Equal(t, 3000, r.SteadyRecords, "%s: 1.5 s at 2 000/s", s.Client)
			// Java's throttle lets through whatever is sent in the first
			// millisecond and never pays back an oversleep while ahead, so
			// after a Go client's larger first burst the loop runs below
			// the rate until that credit is spent: a 0.5 s warm-up does
			// not cover it (10 s do); a loop that fell behind (a loaded
			// machine) catches up above it.
			assert.True(t, s.Achieved > 1200 && s.Achieved < 3000, "%s, linger %s: %.0f records/s achieved", s.Client, row.Linger, s.Achieved)
			assert.Positive(t, s.CPUPer100k)
			assert.Zero(t, r.SlotWaits)
			q := s.Quantiles
			assert.True(t, q[0] > 0 && q[0] <= q[1] && q[1] <= q[2] && q[2] <= q[3], "%s: quantiles %v", s.Client, q)
		}
		assert.NotEmpty(t, row.LoadStart)
	}
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| 1ms | 2,000/s | ")
	assert.Contains(t, md.String(), "| defaults (samsa 5ms, kgo 10ms, Java 5ms) | 2,000/s | ")
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var back RateReport
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rep.Rows[0].Clients[0].Quantiles, back.Rows[0].Clients[0].Quantiles)
}
