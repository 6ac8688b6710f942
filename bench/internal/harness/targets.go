package harness

import (
	"fmt"
	"slices"
	"strings"
)

// Issue 26's targets, samsa against kgo with both buffering the same
// bytes (Options.BufferMemory): CPU per record on W1, W2, W2c and W4,
// throughput and peak RSS on each of the six workloads, in every key
// order and on every broker.
const (
	// TargetCPURatioW1 is the highest ours/kgo CPU per record on W1.
	TargetCPURatioW1 = 0.4
	// TargetCPURatio26 is the highest ours/kgo CPU per record on W2, W2c
	// and W4.
	TargetCPURatio26 = 0.5
	// TargetThroughputRatio26 is the lowest ours/kgo records/s on each
	// workload.
	TargetThroughputRatio26 = 1.5
	// TargetRSSRatio26 is the highest ours/kgo peak RSS on each workload.
	TargetRSSRatio26 = 1.0
)

// cpuTargets maps the IDs of the workloads with a CPU target to it.
var cpuTargets = map[string]float64{"W1": TargetCPURatioW1, "W2": TargetCPURatio26, "W2c": TargetCPURatio26, "W4": TargetCPURatio26}

// targetIDs are the workloads issue 26's targets cover, in order.
var targetIDs = []string{"W1", "W2", "W2c", "W3", "W3c", "W4"}

// Check is one target evaluated on a report.
type Check struct {
	Target string `json:"target"`
	// Workload is the workload's name (a variant's, with its key order
	// or values), Broker the report's broker.
	Workload string  `json:"workload"`
	Broker   string  `json:"broker,omitempty"`
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

// Checks evaluates issue 26's targets on the workloads of the report
// that they cover (by Spec.ID, every variant). Each needs both clients'
// successful runs.
func (r *Report) Checks() []Check {
	var out []Check
	for i := range r.Workloads {
		w := &r.Workloads[i]
		if !slices.Contains(targetIDs, w.Spec.ID) {
			continue
		}
		ours, base := w.summary(Ours), w.summary(Baseline)
		ok := ours != nil && base != nil && ours.OK > 0 && base.OK > 0
		why := ""
		if !ok {
			why = "a client has no successful run"
		}
		check := func(target string, limit float64, atLeast bool, value func() (float64, string)) {
			c := Check{Target: target, Workload: w.Spec.Name, Broker: brokerLabel(r, w), Limit: limit, AtLeast: atLeast, Measured: ok, Why: why}
			if ok {
				v, missing := value()
				if missing != "" {
					c.Measured, c.Why = false, missing
				} else {
					c.Value = v
				}
			}
			out = append(out, c)
		}
		if limit, has := cpuTargets[w.Spec.ID]; has {
			check("CPU/record samsa/kgo", limit, false, func() (float64, string) { return base.CPURatio, "" })
		}
		check("records/s samsa/kgo", TargetThroughputRatio26, true, func() (float64, string) { return base.ThroughputRatio, "" })
		check("peak RSS samsa/kgo", TargetRSSRatio26, false, func() (float64, string) {
			if base.PeakRSSBytes <= 0 {
				return 0, "no RSS for kgo"
			}
			return float64(ours.PeakRSSBytes) / float64(base.PeakRSSBytes), ""
		})
	}
	return out
}

// writeChecks writes checks as a list under a heading, when there are
// any.
func writeChecks(b *strings.Builder, checks []Check) {
	if len(checks) == 0 {
		return
	}
	fmt.Fprintf(b, "\nIssue 26's targets (samsa against kgo, both buffering the same bytes; CPU/record ≤ %.1f× on W1 and ≤ %.1f× on W2, W2c and W4, "+
		"records/s ≥ %.1f× and peak RSS ≤ %.1f× on each workload):\n\n", TargetCPURatioW1, TargetCPURatio26, TargetThroughputRatio26, TargetRSSRatio26)
	for _, c := range checks {
		cmp := "≤"
		if c.AtLeast {
			cmp = "≥"
		}
		where := c.Workload
		if c.Broker != "" {
			where += ", " + c.Broker
		}
		if !c.Measured {
			fmt.Fprintf(b, "- %s, %s: not measured (%s); target %s %.2f\n", c.Target, where, c.Why, cmp, c.Limit)
			continue
		}
		verdict := "met"
		if !c.Met() {
			verdict = "NOT met"
		}
		fmt.Fprintf(b, "- %s, %s: %.2f (target %s %.2f): %s\n", c.Target, where, c.Value, cmp, c.Limit, verdict)
	}
}
