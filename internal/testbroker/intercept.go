package testbroker

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Interceptor injects a fault into the requests it matches. Register it
// with [Cluster.Intercept]; it applies until its Times are used up or it is
// removed.
//
// A request matches when its API key is in Keys (or Keys is empty), the
// broker is in Brokers (or Brokers is empty), Match returns true (or is
// nil) and, with a Probability, a random draw succeeds. Among the
// registered interceptors of a stage (before or after the handler), the
// first one, in registration order, that matches and still has Times left
// applies; the others are skipped for that request.
//
// Its actions run in this order: Delay, Stall, then Drop, or else
// ErrorCode and Throttle. Before the handler (the default), Drop closes the
// connection without handling the request, and ErrorCode answers with that
// code in every topic or partition without running the handler. After the
// handler (After set), the request has taken effect (records appended,
// topics created) and then Drop closes the connection before the response
// is written, or ErrorCode replaces the response's codes: both make the
// ambiguous outcomes of real clusters (REQUEST_TIMED_OUT after an append).
//
// Examples:
//
//	// Metadata answers after 2 s, until removed.
//	Interceptor{Keys: []int16{3}, Delay: 2 * time.Second}
//	// The next 3 Produce requests to broker 1 get NOT_LEADER_OR_FOLLOWER.
//	Interceptor{Keys: []int16{0}, Brokers: []int32{1}, Times: 3, ErrorCode: 6}
//	// Produce appends, then REQUEST_TIMED_OUT, once.
//	Interceptor{Keys: []int16{0}, Times: 1, After: true, ErrorCode: 7}
//	// Produce never answers until the interceptor is removed.
//	Interceptor{Keys: []int16{0}, Stall: true}
//	// 1% of all requests lose their connection.
//	Interceptor{Probability: 0.01, Drop: true}
type Interceptor struct {
	// Keys are the API keys matched (0 Produce, 1 Fetch, 2 ListOffsets,
	// 3 Metadata, 8 OffsetCommit, 9 OffsetFetch, 10 FindCoordinator,
	// 11 JoinGroup, 12 Heartbeat, 13 LeaveGroup, 14 SyncGroup, 18 ApiVersions,
	// 19 CreateTopics, 20 DeleteTopics, 22 InitProducerId,
	// 24 AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn,
	// 28 TxnOffsetCommit, 37 CreatePartitions, and the others of
	// apis.go); empty matches all. ErrorCode 53
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) on the transaction keys is
	// how a test denies a transactional id: the broker has no ACLs.
	Keys []int16
	// Brokers are the broker ids matched; empty matches all.
	Brokers []int32
	// Match, when set, must return true for the request to match. It runs
	// on the connection's goroutine with the decoded request, which it must
	// not keep or modify.
	Match func(broker int32, req kmsg.Request) bool
	// Probability, when in (0, 1), applies the interceptor to a matching
	// request with that probability; 0 (or >= 1) applies it always.
	Probability float64
	// Times is how many requests the interceptor applies to; 0 means until
	// removed.
	Times int
	// After applies the actions after the handler instead of before it.
	After bool

	// Delay holds the request (or, After, its response) for that long.
	Delay time.Duration
	// Stall holds the request (or its response) until the interceptor is
	// removed or the connection or cluster closes: the broker never
	// answers, and the connection reads nothing more meanwhile.
	Stall bool
	// Drop closes the connection.
	Drop bool
	// ErrorCode, when not 0, is the Kafka error code answered in every
	// topic or partition of the response (and in the top-level code of the
	// APIs that have one).
	ErrorCode int16
	// Throttle sets the response's ThrottleTimeMs and throttles the
	// connection as a quota would: for versions with KIP-219 semantics the
	// connection is not read for that long, for older ones the response
	// is delayed.
	Throttle time.Duration
	// Rewrite, with After, changes the handler's response before it is
	// written (for example drops a partition from a Produce answer). It
	// runs on the connection's goroutine.
	Rewrite func(resp kmsg.Response)
}

// interception is a registered Interceptor and its state.
type interception struct {
	Interceptor
	remaining atomic.Int64  // Times left; unused when Times is 0
	released  chan struct{} // closed on removal: ends stalls
	removed   atomic.Bool
}

// interceptors is the cluster's registry; the request path pays one atomic
// load when it is empty.
type interceptors struct {
	n    atomic.Int32
	mu   sync.Mutex
	list []*interception
}

// Intercept registers a copy of i and returns the function that removes it
// (idempotent), which also releases the requests it stalls. Interceptors
// left registered are removed by [Cluster.Close].
func (c *Cluster) Intercept(i Interceptor) (remove func()) {
	i.Keys, i.Brokers = slices.Clone(i.Keys), slices.Clone(i.Brokers)
	ic := &interception{Interceptor: i, released: make(chan struct{})}
	ic.remaining.Store(int64(i.Times))
	r := &c.icpt
	r.mu.Lock()
	r.list = append(r.list, ic)
	r.n.Store(int32(len(r.list)))
	r.mu.Unlock()
	return func() { r.remove(ic) }
}

func (r *interceptors) remove(ic *interception) {
	if !ic.removed.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	r.list = slices.DeleteFunc(r.list, func(x *interception) bool { return x == ic })
	r.n.Store(int32(len(r.list)))
	r.mu.Unlock()
	close(ic.released)
}

func (r *interceptors) releaseAll() {
	r.mu.Lock()
	list := slices.Clone(r.list)
	r.mu.Unlock()
	for _, ic := range list {
		r.remove(ic)
	}
}

// pick returns the interceptors that apply to req before and after its
// handler, consuming one of their Times.
func (r *interceptors) pick(broker int32, req kmsg.Request) (before, after *interception) {
	if r.n.Load() == 0 {
		return nil, nil
	}
	r.mu.Lock()
	list := slices.Clone(r.list)
	r.mu.Unlock()
	for _, ic := range list {
		if (ic.After && after != nil) || (!ic.After && before != nil) || !ic.matches(broker, req) {
			continue
		}
		if ic.Times > 0 {
			if ic.remaining.Add(-1) < 0 {
				continue
			}
			if ic.remaining.Load() == 0 && !ic.Stall {
				r.remove(ic) // used up; a stall stays until removed
			}
		}
		if ic.After {
			after = ic
		} else {
			before = ic
		}
	}
	return before, after
}

func (ic *interception) matches(broker int32, req kmsg.Request) bool {
	if ic.removed.Load() {
		return false
	}
	if len(ic.Keys) > 0 && !slices.Contains(ic.Keys, req.Key()) {
		return false
	}
	if len(ic.Brokers) > 0 && !slices.Contains(ic.Brokers, broker) {
		return false
	}
	if ic.Match != nil && !ic.Match(broker, req) {
		return false
	}
	if ic.Probability > 0 && ic.Probability < 1 && rand.Float64() >= ic.Probability {
		return false
	}
	return true
}
