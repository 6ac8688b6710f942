package samsatest

import (
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// API is the kind of a Kafka request (its API key), for [Fault].Requests.
type API int16

// The requests a producer sends, and the few others a test may want to
// fail.
const (
	Produce        API = 0
	Fetch          API = 1
	ListOffsets    API = 2
	Metadata       API = 3
	APIVersions    API = 18
	CreateTopics   API = 19
	InitProducerID API = 22
)

// Fault is a failure injected into the requests it matches, registered
// with [Cluster.Inject].
//
// A request matches when its kind is in Requests (or Requests is empty)
// and it reaches a broker in Brokers (or Brokers is empty). When several
// registered faults match a request, the first one registered applies;
// with AfterHandling set, a fault competes only with the other
// AfterHandling faults, so one of each kind can apply to the same request.
//
// What a fault does, in this order: Delay, then Stall, then Drop, or else
// Code. A Fault with none of them only counts its Times.
type Fault struct {
	// Requests are the kinds of request matched; empty matches every
	// request.
	Requests []API
	// Brokers are the broker ids matched; empty matches every broker.
	Brokers []int32
	// Times is how many requests the fault applies to, after which it is
	// removed by itself; 0 means until removed. A stall keeps the requests
	// it holds until the fault is removed, Times or not.
	Times int
	// AfterHandling applies the fault after the broker has handled the
	// request (a Produce is appended) instead of before: a Drop or a Code
	// then makes an outcome the client cannot know, as a timeout after a
	// write does on a real cluster. Default false: the request is not
	// handled at all.
	AfterHandling bool

	// Delay holds the request (or, with AfterHandling, its response) for
	// that long.
	Delay time.Duration
	// Stall holds the request (or its response) until the fault is
	// removed or the cluster is closed: the broker does not answer, and
	// reads nothing more from that connection meanwhile.
	Stall bool
	// Drop closes the client's connection instead of answering.
	Drop bool
	// Code, when not 0, is the error code answered in every topic and
	// partition of the response (and in its top-level error code, for the
	// requests that have one). A Metadata request answered with a code
	// reports it for every topic it asked for.
	Code ErrorCode
}

// Inject registers f and returns the function that removes it, which
// also releases the requests it stalls; calling it again does nothing.
// [Cluster.Close] removes what is left registered.
func (c *Cluster) Inject(f Fault) (remove func()) {
	i := testbroker.Interceptor{
		Brokers:   f.Brokers,
		Times:     f.Times,
		After:     f.AfterHandling,
		Delay:     f.Delay,
		Stall:     f.Stall,
		Drop:      f.Drop,
		ErrorCode: int16(f.Code),
	}
	for _, r := range f.Requests {
		i.Keys = append(i.Keys, int16(r))
	}
	return c.c.Intercept(i)
}

// FailProduce makes the next n Produce requests, to any broker, fail with
// code without being appended (n <= 0: every Produce request until
// removed). It is Inject(Fault{Requests: []API{Produce}, Times: n, Code:
// code}).
func (c *Cluster) FailProduce(n int, code ErrorCode) (remove func()) {
	return c.Inject(Fault{Requests: []API{Produce}, Times: max(n, 0), Code: code})
}
