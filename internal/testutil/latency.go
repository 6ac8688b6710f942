package testutil

import (
	"slices"
	"testing"
	"time"
)

// ReportLatencies sorts lat and reports its p50, p99, p999 and maximum as
// the benchmark's metrics p50-ns, p99-ns, p999-ns and max-ns.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	for _, m := range []struct {
		q    float64
		name string
	}{{0.5, "p50-ns"}, {0.99, "p99-ns"}, {0.999, "p999-ns"}, {1, "max-ns"}} {
		b.ReportMetric(float64(lat[int(m.q*float64(len(lat)-1))].Nanoseconds()), m.name)
	}
}
