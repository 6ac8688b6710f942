package samsatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// Each fault as a user's test meets it: what the producer reports and
// what the cluster stored.
func TestFaults(t *testing.T) {
	produce := []samsatest.API{samsatest.Produce}
	cases := []struct {
		name    string
		fault   func(c *samsatest.Cluster) func()
		failed  bool  // the record fails
		retries int64 // Metrics().Producer.BatchRetryTotal at least this
		stored  int   // records in the topic afterwards
	}{
		{"retriable code, twice", func(c *samsatest.Cluster) func() {
			return c.FailProduce(2, samsatest.NotEnoughReplicas)
		}, false, 2, 1},
		{"fatal code", func(c *samsatest.Cluster) func() {
			return c.FailProduce(1, samsatest.TopicAuthorizationFailed)
		}, true, 0, 0},
		{"drop before handling", func(c *samsatest.Cluster) func() {
			return c.Inject(samsatest.Fault{Requests: produce, Times: 1, Drop: true})
		}, false, 1, 1},
		{"drop after handling: stored once", func(c *samsatest.Cluster) func() {
			return c.Inject(samsatest.Fault{Requests: produce, Times: 1, AfterHandling: true, Drop: true})
		}, false, 1, 1},
		{"timeout after handling: stored once", func(c *samsatest.Cluster) func() {
			return c.Inject(samsatest.Fault{Requests: produce, Times: 1, AfterHandling: true, Code: samsatest.RequestTimedOut})
		}, false, 1, 1},
		{"metadata fails a while", func(c *samsatest.Cluster) func() {
			return c.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Metadata}, Times: 3, Code: samsatest.LeaderNotAvailable})
		}, false, 0, 1},
		{"another broker only", func(c *samsatest.Cluster) func() {
			leader, err := c.Leader("t", 0)
			require.NoError(t, err)
			return c.Inject(samsatest.Fault{Requests: produce, Brokers: []int32{(leader + 1) % 3}, Code: samsatest.NotLeaderOrFollower})
		}, false, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
			remove := tc.fault(c)
			defer remove()
			p := newProducer(t, c, producer.Config{})
			ctx := t.Context()
			_, err := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
			if tc.failed {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.GreaterOrEqual(t, p.Metrics().Producer.BatchRetryTotal, tc.retries)
			if tc.retries == 0 {
				assert.Zero(t, p.Metrics().Producer.BatchRetryTotal)
			}
			recs, err := c.Records("t")
			require.NoError(t, err)
			assert.Len(t, recs, tc.stored)
		})
	}
}

// A Delay holds each matching request at least that long.
func TestFaultDelay(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
	p := newProducer(t, c, producer.Config{})
	ctx := t.Context()
	_, err := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("warm-up")}).Wait(ctx)
	require.NoError(t, err)

	const delay = 300 * time.Millisecond
	remove := c.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Produce}, Delay: delay})
	defer remove()
	start := time.Now()
	_, err = p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("late")}).Wait(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), delay)
}

// A Stall holds requests until it is removed; Times bounds how many it
// catches, not how long it holds them; Close releases what is still
// stalled.
func TestFaultStall(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
	release := c.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Produce}, Times: 1, Stall: true})
	p := newProducer(t, c, producer.Config{})
	ctx := t.Context()
	f := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")})

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := f.Wait(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing answers while stalled")
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.Zero(t, hw, "a stalled request is not handled")

	release()
	release() // idempotent
	_, err = f.Wait(ctx)
	require.NoError(t, err)

	// A stall left in place is released by Close.
	c2 := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
	c2.Inject(samsatest.Fault{Requests: []samsatest.API{samsatest.Produce}, Stall: true})
	p2 := newProducer(t, c2, producer.Config{DeliveryTimeout: 2 * time.Second, RequestTimeout: time.Second, Linger: time.Millisecond})
	f2 := p2.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")})
	c2.Close()
	_, err = f2.Wait(ctx)
	assert.Error(t, err, "the cluster went away")
}

// FailProduce with n <= 0 fails every Produce until removed.
func TestFailProduceUntilRemoved(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Topics: map[string]int32{"t": 1}})
	remove := c.FailProduce(0, samsatest.NotEnoughReplicas)
	p := newProducer(t, c, producer.Config{})
	ctx := t.Context()
	f := p.Send(ctx, &producer.Record{Topic: "t", Value: []byte("v")})
	require.Eventually(t, func() bool { return p.Metrics().Producer.BatchRetryTotal >= 5 }, 10*time.Second, 5*time.Millisecond,
		"retried while the fault stays")
	remove()
	_, err := f.Wait(ctx)
	require.NoError(t, err)
}
