package harness

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseVmRSS(t *testing.T) {
	cases := []struct {
		name   string
		status string
		want   int64
		ok     bool
	}{
		{"a status file", "Name:\tjava\nVmPeak:\t 9000 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 100 kB\n", 12345, true},
		{"no VmRSS (a kernel thread)", "Name:\tkthreadd\nState:\tS\n", 0, false},
		{"not a number", "VmRSS:\tlots kB\n", 0, false},
		{"another unit", "VmRSS:\t12 MB\n", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseVmRSS([]byte(tc.status))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadVmRSSOfThisProcess(t *testing.T) {
	kib, ok := readVmRSS("/proc/self/status")
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	assert.True(t, ok)
	assert.Positive(t, kib)
}

func TestRSSDigest(t *testing.T) {
	cases := []struct {
		name string
		kib  []int64
		n    int
		want []float64
	}{
		{"empty", nil, 12, nil},
		{"shorter than n: every value", []int64{1024, 2048}, 12, []float64{1, 2}},
		{"each point the maximum of its slice", []int64{1024, 3072, 2048, 4096, 1024, 1024}, 3, []float64{3, 4, 1}},
		{"uneven slices cover every value", []int64{1024, 1024, 1024, 1024, 10240}, 2, []float64{1, 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, rssDigest(tc.kib, tc.n))
		})
	}
}
