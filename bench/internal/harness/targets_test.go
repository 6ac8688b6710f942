package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// TestIssue17Checks: each of issue 17's targets is evaluated from the
// medians, met or not at its limit, and "not measured" when the report
// lacks what it needs (a failed client, no profiles, a missing workload).
func TestIssue17Checks(t *testing.T) {
	sum := func(client string, cpu, rps, rest float64, rss int64, profiled int) Summary {
		return Summary{Client: client, OK: 1, CPUNsPerRecord: cpu, RecordsPerSec: rps, RestNsPerRecord: rest, PeakRSSBytes: rss, ProfiledRuns: profiled}
	}
	workloadOf := func(name string, ours, base Summary) WorkloadReport {
		w := WorkloadReport{Spec: workload.Spec{Name: name}, Clients: []Summary{ours, base}}
		w.ratios()
		return w
	}
	r := Report{Workloads: []WorkloadReport{
		workloadOf(w1, sum(Ours, 300, 2600, 300, 30, 0), sum(Baseline, 600, 2000, 600, 50, 0)),     // CPU 0.50 met, 1.30× met, RSS 0.6
		workloadOf(w2, sum(Ours, 900, 1500, 300, 60, 3), sum(Baseline, 1500, 1000, 800, 50, 3)),    // CPU 0.60 not met, RSS 1.2 not met
		workloadOf(w3, sum(Ours, 14000, 120, 900, 70, 0), sum(Baseline, 13000, 80, 1400, 90, 0)),   // no profiles
		workloadOf(w4, sum(Ours, 2500, 500, 2500, 100, 0), sum(Baseline, 4800, 400, 4800, 160, 0)), // 1.25× not met
	}}
	got := map[string]Check{}
	for _, c := range r.Checks() {
		got[c.Target+" "+c.Workload] = c
	}
	cases := []struct {
		key      string
		measured bool
		met      bool
		value    float64
	}{
		{"CPU/record ours/kgo " + w1, true, true, 0.5},
		{"records/s ours/kgo " + w1, true, true, 1.3},
		{"peak RSS ours/kgo " + w1, true, true, 0.6},
		{"CPU/record ours/kgo " + w2, true, false, 0.6},
		{"peak RSS ours/kgo " + w2, true, false, 1.2},
		{"CPU outside the codec ours/kgo " + w3, false, false, 0},
		{"records/s ours/kgo " + w4, true, false, 1.25},
		{"CPU/record W4 / W1 (ours) " + w4 + " / " + w1, true, false, 2500.0 / 300},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			c, ok := got[tc.key]
			require.True(t, ok, "check present")
			assert.Equal(t, tc.measured, c.Measured)
			assert.Equal(t, tc.met, c.Met())
			assert.InDelta(t, tc.value, c.Value, 1e-9)
		})
	}

	// With profiles the W3 check is measured.
	r.Workloads[2] = workloadOf(w3, sum(Ours, 14000, 120, 700, 70, 3), sum(Baseline, 13000, 80, 1400, 90, 3))
	for _, c := range r.Checks() {
		if c.Workload == w3 && strings.HasPrefix(c.Target, "CPU outside") {
			assert.True(t, c.Measured)
			assert.True(t, c.Met())
			assert.InDelta(t, 0.5, c.Value, 1e-9)
		}
	}

	// A failed baseline makes its workload's checks unmeasured, not met.
	r.Workloads[0].Clients[1] = Summary{Client: Baseline, Runs: []RunResult{{Error: "boom"}}}
	var b strings.Builder
	r.writeChecks(&b)
	assert.Contains(t, b.String(), "- CPU/record ours/kgo, 100B: not measured (a client has no successful run); target ≤ 0.50\n")
	assert.Contains(t, b.String(), "- CPU/record W4 / W1 (ours), 100B-keyed-10k-partitions / 100B: 8.33 (target ≤ 1.50): NOT met\n")
}
