package harness

import (
	"fmt"
	"strings"
)

// Issue 17's targets, samsa against kgo: CPU per record on the
// uncompressed and lz4 workloads, CPU outside the codec with zstd, peak RSS
// on every workload, and the cost of a record with 10 000 partitions
// against the cost with 8.
const (
	// TargetCPURatio17 is the highest ours/kgo CPU per record on W1, W2 and W4.
	TargetCPURatio17 = 0.5
	// TargetRestRatio17 is the highest ours/kgo CPU outside the codec on W3.
	TargetRestRatio17 = 0.5
	// TargetRSSRatio17 is the highest ours/kgo peak RSS on every workload.
	TargetRSSRatio17 = 1.0
	// TargetPartitionCost17 is the highest W4/W1 CPU per record of ours.
	TargetPartitionCost17 = 1.5
)

// The workloads issue 17's targets name.
const (
	w1 = "100B"
	w2 = "100B-lz4"
	w3 = "1KiB-zstd-keyed"
	w4 = "100B-keyed-10k-partitions"
)

// Check is one target evaluated on a report.
type Check struct {
	Target   string  `json:"target"`
	Workload string  `json:"workload"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
	AtLeast  bool    `json:"at_least"` // Value must be >= Limit (else <=)
	Measured bool    `json:"measured"` // false: the report lacks what it needs
	Why      string  `json:"why,omitempty"`
}

// Met reports whether the check was measured and passed.
func (c Check) Met() bool {
	if !c.Measured {
		return false
	}
	if c.AtLeast {
		return c.Value >= c.Limit
	}
	return c.Value <= c.Limit
}

// Checks evaluates issue 17's targets on the workloads the report has.
// Each needs both clients' successful runs; the W3 check needs CPU
// profiles (-cpuprofile) and W4 against W1 needs both workloads.
func (r *Report) Checks() []Check {
	var out []Check
	byName := map[string]*WorkloadReport{}
	for i := range r.Workloads {
		byName[r.Workloads[i].Spec.Name] = &r.Workloads[i]
	}
	pair := func(w *WorkloadReport) (ours, base *Summary, ok bool) {
		ours, base = w.summary(Ours), w.summary(Baseline)
		return ours, base, ours != nil && base != nil && ours.OK > 0 && base.OK > 0
	}
	for i := range r.Workloads {
		w := &r.Workloads[i]
		name := w.Spec.Name
		ours, base, ok := pair(w)
		why := ""
		if !ok {
			why = "a client has no successful run"
		}
		switch name {
		case w1, w2, w4:
			out = append(out,
				Check{Target: "CPU/record ours/kgo", Workload: name, Value: ratio(ok, base, func(s *Summary) float64 { return s.CPURatio }), Limit: TargetCPURatio17, Measured: ok, Why: why},
				Check{Target: "records/s ours/kgo", Workload: name, Value: ratio(ok, base, func(s *Summary) float64 { return s.ThroughputRatio }), Limit: TargetThroughputRatio, AtLeast: true, Measured: ok, Why: why})
		case w3:
			c := Check{Target: "CPU outside the codec ours/kgo", Workload: name, Limit: TargetRestRatio17, Measured: ok, Why: why}
			if ok && (ours.ProfiledRuns == 0 || base.ProfiledRuns == 0 || base.RestNsPerRecord == 0) {
				c.Measured, c.Why = false, "needs CPU profiles of both (-cpuprofile DIR)"
			} else if ok {
				c.Value = ours.RestNsPerRecord / base.RestNsPerRecord
			}
			out = append(out, c)
		}
		if name == w1 || name == w2 || name == w3 || name == w4 {
			c := Check{Target: "peak RSS ours/kgo", Workload: name, Limit: TargetRSSRatio17, Measured: ok, Why: why}
			if ok && base.PeakRSSBytes > 0 {
				c.Value = float64(ours.PeakRSSBytes) / float64(base.PeakRSSBytes)
			} else if ok {
				c.Measured, c.Why = false, "no RSS for kgo"
			}
			out = append(out, c)
		}
	}
	if a, b := byName[w1], byName[w4]; a != nil && b != nil {
		o1, o4 := a.summary(Ours), b.summary(Ours)
		c := Check{Target: "CPU/record W4 / W1 (ours)", Workload: w4 + " / " + w1, Limit: TargetPartitionCost17}
		if o1 != nil && o4 != nil && o1.OK > 0 && o4.OK > 0 && o1.CPUNsPerRecord > 0 {
			c.Measured, c.Value = true, o4.CPUNsPerRecord/o1.CPUNsPerRecord
		} else {
			c.Why = "samsa has no successful run of one of them"
		}
		out = append(out, c)
	}
	return out
}

func ratio(ok bool, s *Summary, f func(*Summary) float64) float64 {
	if !ok {
		return 0
	}
	return f(s)
}

// writeChecks writes issue 17's targets as a list, when the report has
// any of the workloads they name.
func (r *Report) writeChecks(b *strings.Builder) {
	checks := r.Checks()
	if len(checks) == 0 {
		return
	}
	b.WriteString("\nIssue 17's targets (samsa against kgo, on this run):\n\n")
	for _, c := range checks {
		cmp := "≤"
		if c.AtLeast {
			cmp = "≥"
		}
		if !c.Measured {
			fmt.Fprintf(b, "- %s, %s: not measured (%s); target %s %.2f\n", c.Target, c.Workload, c.Why, cmp, c.Limit)
			continue
		}
		verdict := "met"
		if !c.Met() {
			verdict = "NOT met"
		}
		fmt.Fprintf(b, "- %s, %s: %.2f (target %s %.2f): %s\n", c.Target, c.Workload, c.Value, cmp, c.Limit, verdict)
	}
}
