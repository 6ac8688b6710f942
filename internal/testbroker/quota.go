package testbroker

import (
	"math"
	"sync"
	"time"
)

// bucketSet is a token bucket per quota entity, as KIP-599 defines it for
// the controller mutation quota: K tokens, burst B, rate R per second, and
// T the last update. At time now, K = min(K + (now-T)×R, B). Tokens may go
// negative, so a single mutation of any size can always be admitted when
// K > 0; the debt is then paid back over time.
//
// The produce byte-rate quota uses the same bucket, with a burst of one
// second of the rate.
//
// Each call names the limit (rate and burst) that applies to the key now:
// quotas altered by AlterClientQuotas take effect at once, and a bucket
// keeps its tokens across a change of its limit, as Kafka's sensors keep
// their samples when a quota bound changes.
type bucketSet struct {
	def   limit // the limit of admit, record and tokens
	clock func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

// limit is one quota: R tokens per second, up to B.
type limit struct {
	rate, burst float64
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newBucketSet(rate, burst float64, clock func() time.Time) *bucketSet {
	return &bucketSet{def: limit{rate, burst}, clock: clock, buckets: make(map[string]*bucket)}
}

// refillLocked returns key's bucket brought up to date under l; a new key
// starts with a full bucket.
func (s *bucketSet) refillLocked(key string, l limit) *bucket {
	now := s.clock()
	b := s.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		s.buckets[key] = b
		return b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(b.tokens+elapsed.Seconds()*l.rate, l.burst)
		b.last = now
	}
	b.tokens = math.Min(b.tokens, l.burst) // the burst may have shrunk
	return b
}

// waitLocked is the time until the bucket holds more than zero tokens: the
// throttle time of a refused (or over-quota) request. It is never below
// 1ms, so that a throttle is always visible in a ThrottleTimeMs field.
//
// KIP-599 is ambiguous here: its formula line says a client must wait
// "R * (-K + 1)", but its worked example (K = -60 at R = 5 waits 12 s) is
// -K/R, which is also the only reading whose unit is seconds. This follows
// the example.
func waitLocked(b *bucket, l limit) time.Duration {
	d := time.Duration(-b.tokens / l.rate * float64(time.Second))
	return max(d.Round(time.Millisecond), time.Millisecond)
}

// admit is KIP-599's strict admission: a mutation of n partitions is
// admitted iff K > 0, and then K -= n. Otherwise nothing is taken and the
// wait until K > 0 is returned.
func (s *bucketSet) admit(key string, n float64) (ok bool, wait time.Duration) {
	return s.admitWith(key, n, s.def)
}

func (s *bucketSet) admitWith(key string, n float64, l limit) (ok bool, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.refillLocked(key, l)
	if b.tokens > 0 {
		b.tokens -= n
		return true, 0
	}
	return false, waitLocked(b, l)
}

// record takes n tokens unconditionally (a permissive quota: old request
// versions, auto topic creation, produced bytes) and returns the throttle
// time the client has earned: 0 while K >= 0, else the time until K > 0.
func (s *bucketSet) record(key string, n float64) time.Duration {
	return s.recordWith(key, n, s.def)
}

func (s *bucketSet) recordWith(key string, n float64, l limit) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.refillLocked(key, l)
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return waitLocked(b, l)
}

// tokens returns key's current token count under the default limit, for
// tests.
func (s *bucketSet) tokens(key string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refillLocked(key, s.def).tokens
}
