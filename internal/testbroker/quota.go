package testbroker

import (
	"math"
	"sync"
	"time"
)

// bucketSet is a token bucket per client id, as KIP-599 defines it for the
// controller mutation quota: K tokens, burst B, rate R per second, and T the
// last update. At time now, K = min(K + (now-T)×R, B). Tokens may go
// negative, so a single request of any size can always be admitted when
// K > 0; the debt is then paid back over time.
//
// The produce byte-rate quota uses the same bucket, with a burst of one
// second of the rate.
type bucketSet struct {
	rate, burst float64
	clock       func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newBucketSet(rate, burst float64, clock func() time.Time) *bucketSet {
	return &bucketSet{rate: rate, burst: burst, clock: clock, buckets: make(map[string]*bucket)}
}

// refillLocked returns client's bucket brought up to date; a new client
// starts with a full bucket.
func (s *bucketSet) refillLocked(client string) *bucket {
	now := s.clock()
	b := s.buckets[client]
	if b == nil {
		b = &bucket{tokens: s.burst, last: now}
		s.buckets[client] = b
		return b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(b.tokens+elapsed.Seconds()*s.rate, s.burst)
		b.last = now
	}
	return b
}

// waitLocked is the time until the bucket holds more than zero tokens: the
// throttle time of a refused (or over-quota) request. It is never below
// 1ms, so that a throttle is always visible in a ThrottleTimeMs field.
func (s *bucketSet) waitLocked(b *bucket) time.Duration {
	d := time.Duration(-b.tokens / s.rate * float64(time.Second))
	return max(d.Round(time.Millisecond), time.Millisecond)
}

// admit is KIP-599's strict admission: a mutation of n partitions is
// admitted iff K > 0, and then K -= n. Otherwise nothing is taken and the
// wait until K > 0 is returned.
func (s *bucketSet) admit(client string, n float64) (ok bool, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.refillLocked(client)
	if b.tokens > 0 {
		b.tokens -= n
		return true, 0
	}
	return false, s.waitLocked(b)
}

// record takes n tokens unconditionally (a permissive quota: old request
// versions, auto topic creation, produced bytes) and returns the throttle
// time the client has earned: 0 while K >= 0, else the time until K > 0.
func (s *bucketSet) record(client string, n float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.refillLocked(client)
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return s.waitLocked(b)
}

// tokens returns client's current token count, for tests.
func (s *bucketSet) tokens(client string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refillLocked(client).tokens
}
