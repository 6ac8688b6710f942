package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// specOf returns the workload named name (an ID or a variant's name).
func specOf(t *testing.T, name string) workload.Spec {
	t.Helper()
	s, err := workload.ByName(name, 1000)
	require.NoError(t, err)
	return s
}

// pairOf returns a workload report with ours and kgo's medians and their
// ratios.
func pairOf(spec workload.Spec, ours, base Summary) WorkloadReport {
	w := WorkloadReport{Spec: spec, Clients: []Summary{ours, base}}
	w.ratios()
	return w
}

// sumOf is a client's summary of one successful run.
func sumOf(client string, cpu, rps float64, rss int64) Summary {
	return Summary{Client: client, OK: 1, CPUNsPerRecord: cpu, RecordsPerSec: rps, PeakRSSBytes: rss}
}

// TestIssue26Checks: each of issue 26's targets is evaluated from the
// medians of each workload variant it covers, met or not at its limit,
// and "not measured" when a client failed.
func TestIssue26Checks(t *testing.T) {
	r := Report{BrokerName: BrokerKfake, Workloads: []WorkloadReport{
		pairOf(specOf(t, "W1"), sumOf(Ours, 400, 3000, 30), sumOf(Baseline, 1000, 2000, 50)),   // CPU 0.40 met, 1.50× met, RSS 0.6
		pairOf(specOf(t, "W2"), sumOf(Ours, 600, 1400, 60), sumOf(Baseline, 1000, 1000, 50)),   // CPU 0.60, 1.40×, RSS 1.2: none met
		pairOf(specOf(t, "W2c"), sumOf(Ours, 500, 1500, 50), sumOf(Baseline, 1000, 1000, 50)),  // all met at the limit
		pairOf(specOf(t, "W3-zipf"), sumOf(Ours, 9000, 90, 70), sumOf(Baseline, 9000, 80, 90)), // no CPU target; 1.125× not met
		pairOf(specOf(t, "W3c"), sumOf(Ours, 9000, 160, 70), sumOf(Baseline, 9000, 100, 90)),   // 1.6× met
		pairOf(specOf(t, "W4"), sumOf(Ours, 2500, 500, 100), sumOf(Baseline, 4800, 400, 160)),  // CPU 0.52 not met
		pairOf(specOf(t, "100B-txn"), sumOf(Ours, 100, 100, 1), sumOf(Baseline, 100, 100, 1)),  // not a target workload
	}}
	got := map[string]Check{}
	for _, c := range r.Checks() {
		assert.Equal(t, BrokerKfake, c.Broker)
		got[c.Target+" "+c.Workload] = c
	}
	cases := []struct {
		key   string
		met   bool
		value float64
	}{
		{"CPU/record samsa/kgo 100B", true, 0.4},
		{"records/s samsa/kgo 100B", true, 1.5},
		{"peak RSS samsa/kgo 100B", true, 0.6},
		{"CPU/record samsa/kgo 100B-lz4", false, 0.6},
		{"records/s samsa/kgo 100B-lz4", false, 1.4},
		{"peak RSS samsa/kgo 100B-lz4", false, 1.2},
		{"CPU/record samsa/kgo 100B-json-lz4", true, 0.5},
		{"records/s samsa/kgo 100B-json-lz4", true, 1.5},
		{"peak RSS samsa/kgo 100B-json-lz4", true, 1.0},
		{"records/s samsa/kgo 1KiB-zstd-keyed-zipf", false, 1.125},
		{"records/s samsa/kgo 1KiB-json-zstd-keyed", true, 1.6},
		{"CPU/record samsa/kgo 100B-keyed-10k-partitions", false, 2500.0 / 4800},
		{"records/s samsa/kgo 100B-keyed-10k-partitions", false, 1.25},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			c, ok := got[tc.key]
			require.True(t, ok, "check present")
			assert.True(t, c.Measured)
			assert.Equal(t, tc.met, c.Met())
			assert.InDelta(t, tc.value, c.Value, 1e-9)
		})
	}
	for _, absent := range []string{"CPU/record samsa/kgo 1KiB-zstd-keyed-zipf", "CPU/record samsa/kgo 1KiB-json-zstd-keyed", "records/s samsa/kgo 100B-txn"} {
		_, ok := got[absent]
		assert.False(t, ok, "no such target: %s", absent)
	}
	assert.Len(t, got, 4*3+2*2, "W1, W2, W2c, W4: CPU, throughput, RSS; W3, W3c: throughput, RSS")

	// A failed baseline makes its workload's checks unmeasured, not met.
	r.Workloads[0].Clients[1] = Summary{Client: Baseline, Runs: []RunResult{{Error: "boom"}}}
	var b strings.Builder
	writeChecks(&b, r.Checks())
	assert.Contains(t, b.String(), "- CPU/record samsa/kgo, 100B, kfake: not measured (a client has no successful run); target ≤ 0.40\n")
	assert.Contains(t, b.String(), "- CPU/record samsa/kgo, 100B-lz4, kfake: 0.60 (target ≤ 0.50): NOT met\n")
	assert.Contains(t, b.String(), "- records/s samsa/kgo, 1KiB-json-zstd-keyed, kfake: 1.60 (target ≥ 1.50): met\n")
}
