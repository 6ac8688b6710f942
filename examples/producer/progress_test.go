package main

import (
	"github.com/samsa-go/samsa/internal/testutil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/samsa-go/samsa/producer"
)

func TestProgressLine(t *testing.T) {
	st := producer.ProducerMetrics{RequestsInFlight: 3, BufferAvailableBytes: 27 << 20, BufferTotalBytes: 32 << 20}
	cases := []struct {
		name                  string
		done, total, recBytes int64
		elapsed               time.Duration
		want                  string
	}{
		{"start", 0, 100, 100, 0,
			"[>                             ]   0.0%       0 rec/s     0.0 MiB/s  in-flight 3  buffer 5.0MiB/32.0MiB"},
		{"half", 500_000, 1_000_000, 100, time.Second,
			"[===============>              ]  50.0%  500.0k rec/s    47.7 MiB/s  in-flight 3  buffer 5.0MiB/32.0MiB"},
		{"done", 1_000_000, 1_000_000, 110, 500 * time.Millisecond,
			"[==============================] 100.0%   2.00M rec/s   209.8 MiB/s  in-flight 3  buffer 5.0MiB/32.0MiB"},
		{"over", 5, 4, 1, time.Second,
			"[==============================] 100.0%       5 rec/s     0.0 MiB/s  in-flight 3  buffer 5.0MiB/32.0MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, progressLine(tc.done, tc.total, tc.recBytes, tc.elapsed, st))
		})
	}
}

func TestHumanBytes(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{{0, "0B"}, {1023, "1023B"}, {1024, "1.0KiB"}, {1536, "1.5KiB"}, {32 << 20, "32.0MiB"}}
	for _, tc := range cases {
		assert.Equal(t, tc.want, humanBytes(tc.n))
	}
}

type syncBuffer = testutil.SyncBuffer

// The bar redraws one line with \r while records complete, and ends it
// with the final state and a newline when stopped.
func TestProgressBarRedraws(t *testing.T) {
	var out syncBuffer
	var acked, failed atomic.Int64
	metrics := func() producer.Metrics {
		return producer.Metrics{Producer: producer.ProducerMetrics{BufferTotalBytes: 1 << 20, BufferAvailableBytes: 1 << 20}}
	}
	b := startProgress(&out, metrics, &acked, &failed, 10, 100)
	acked.Store(3)
	assert.Eventually(t, func() bool { return strings.Contains(out.String(), " 30.0%") }, 5*time.Second, 10*time.Millisecond)
	acked.Store(9)
	failed.Store(1)
	b.stop()

	s := out.String()
	assert.True(t, strings.HasPrefix(s, "\r["), "%q", s)
	assert.True(t, strings.HasSuffix(s, "\n"), "%q", s)
	assert.Equal(t, 1, strings.Count(s, "\n"), "one line, redrawn")
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\r")
	assert.Contains(t, lines[len(lines)-1], "100.0%", "the final line counts failed records as done")
}
