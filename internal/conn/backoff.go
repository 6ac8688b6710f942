package conn

import (
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before retry number attempt (0 for the
// first retry): base doubled per attempt, capped at max, with ±20% jitter
// (KIP-580, like retry.backoff.ms and retry.backoff.max.ms). It never returns
// more than max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	if max < base {
		max = base
	}
	d := base
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	jittered := time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return min(jittered, max)
}
