package testbroker

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInterceptors(t *testing.T) {
	type outcome struct {
		code     int16 // Produce partition error code; -1: connection closed
		appended bool
	}
	cases := []struct {
		name string
		icpt Interceptor
		want []outcome // for three consecutive produce requests
	}{
		{
			name: "error twice before the handler",
			icpt: Interceptor{Keys: []int16{produceKey}, Times: 2, ErrorCode: ecNotLeaderOrFollower},
			want: []outcome{{ecNotLeaderOrFollower, false}, {ecNotLeaderOrFollower, false}, {0, true}},
		},
		{
			name: "timeout after the append, once",
			icpt: Interceptor{Keys: []int16{produceKey}, Times: 1, After: true, ErrorCode: 7},
			want: []outcome{{7, true}, {0, true}, {0, true}},
		},
		{
			name: "drop before the handler",
			icpt: Interceptor{Keys: []int16{produceKey}, Times: 1, Drop: true},
			want: []outcome{{-1, false}, {0, true}, {0, true}},
		},
		{
			name: "drop after the append",
			icpt: Interceptor{Keys: []int16{produceKey}, Times: 1, After: true, Drop: true},
			want: []outcome{{-1, true}, {0, true}, {0, true}},
		},
		{
			name: "until removed",
			icpt: Interceptor{Keys: []int16{produceKey}, ErrorCode: 19},
			want: []outcome{{19, false}, {19, false}, {19, false}},
		},
		{
			name: "other key does not match",
			icpt: Interceptor{Keys: []int16{metadataKey}, ErrorCode: 19},
			want: []outcome{{0, true}, {0, true}, {0, true}},
		},
		{
			name: "other broker does not match",
			icpt: Interceptor{Brokers: []int32{1}, ErrorCode: 19},
			want: []outcome{{0, true}, {0, true}, {0, true}},
		},
		{
			name: "predicate",
			icpt: Interceptor{Match: func(_ int32, req kmsg.Request) bool {
				p, ok := req.(*kmsg.ProduceRequest)
				return ok && p.Acks == -1
			}, ErrorCode: 19},
			want: []outcome{{19, false}, {19, false}, {19, false}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, Config{Brokers: 2})
			require.NoError(t, c.CreateTopic("t", 1)) // led by broker 0
			remove := c.Intercept(tc.icpt)
			defer remove()
			var hw int64
			for i, want := range tc.want {
				w := dialBroker(t, c.Addrs()[0], "icpt")
				require.NoError(t, w.send(produceRequest(9, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})))
				resp, err := w.recv()
				if want.code == -1 {
					assert.Error(t, err, "request %d: connection closed", i)
				} else {
					require.NoError(t, err, "request %d", i)
					assert.Equal(t, want.code, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, "request %d", i)
				}
				now, err := c.HighWatermark("t", 0)
				require.NoError(t, err)
				assert.Equal(t, want.appended, now > hw, "request %d appended", i)
				hw = now
			}
		})
	}
}

// TestInterceptorStall is the "broker stalls, never answers" fault: no
// response until the interceptor is removed, then every stalled request is
// answered.
func TestInterceptorStall(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	remove := c.Intercept(Interceptor{Keys: []int16{produceKey}, Stall: true})
	w := dialBroker(t, c.Addrs()[0], "stall")
	require.NoError(t, w.send(produceRequest(9, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})))
	_ = w.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := w.br.Peek(1)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "no response while stalled")

	remove()
	resp, err := w.recv()
	require.NoError(t, err)
	assert.Zero(t, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
}

// TestCloseReleasesStalls: Close ends stalled requests and their
// goroutines (goleak checks in TestMain).
func TestCloseReleasesStalls(t *testing.T) {
	c, err := New(Config{Brokers: 1})
	require.NoError(t, err)
	require.NoError(t, c.CreateTopic("t", 1))
	c.Intercept(Interceptor{Keys: []int16{produceKey}, Stall: true})
	w := dialBroker(t, c.Addrs()[0], "stall")
	require.NoError(t, w.send(produceRequest(9, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})))
	require.Eventually(t, func() bool { return c.Stats().Requests[produceKey] == 1 }, 5*time.Second, time.Millisecond)
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a stalled request")
	}
}

func TestInterceptorDelayAndThrottle(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	var seen atomic.Int32
	c.Intercept(Interceptor{Keys: []int16{metadataKey}, Times: 1, Delay: 150 * time.Millisecond,
		Match: func(int32, kmsg.Request) bool { seen.Add(1); return true }})
	w := dialBroker(t, c.Addrs()[0], "slow")
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	start := time.Now()
	w.request(md)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "delayed")
	w.request(md)
	assert.EqualValues(t, 1, seen.Load(), "used up after one request")

	c.Intercept(Interceptor{Keys: []int16{metadataKey}, Times: 1, Throttle: 40 * time.Millisecond})
	resp := w.request(md).(*kmsg.MetadataResponse)
	assert.EqualValues(t, 40, resp.ThrottleMillis)
	// KIP-219 (Metadata v6+): the connection is muted after the response.
	start = time.Now()
	w.request(md)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "muted after a throttled response")
}

func TestStopRestartMoveLeader(t *testing.T) {
	c := newTestCluster(t, Config{})
	require.NoError(t, c.CreateTopic("t", 3))
	leader, epoch, err := c.Leader("t", 0)
	require.NoError(t, err)
	addr := c.Addrs()[leader]

	// A connection to the broker being stopped is closed.
	w := dialBroker(t, addr, "s")
	require.NoError(t, c.StopBroker(leader))
	_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = w.br.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "stopped broker refuses connections")

	// Its partitions moved, with a new epoch, and Metadata omits it.
	newLeader, newEpoch, err := c.Leader("t", 0)
	require.NoError(t, err)
	assert.NotEqual(t, leader, newLeader)
	assert.Greater(t, newEpoch, epoch)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mresp := dialBroker(t, c.Addrs()[newLeader], "s").request(md).(*kmsg.MetadataResponse)
	assert.Len(t, mresp.Brokers, 2)
	assert.ErrorIs(t, c.MoveLeader("t", 0, leader), ErrBrokerStopped)

	// Restart on the same port; leadership can be moved back.
	require.NoError(t, c.RestartBroker(leader))
	assert.Equal(t, addr, c.Addrs()[leader])
	w = dialBroker(t, addr, "s")
	resp := w.request(produceRequest(9, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})).(*kmsg.ProduceResponse)
	assert.Equal(t, ecNotLeaderOrFollower, resp.Topics[0].Partitions[0].ErrorCode)
	require.NoError(t, c.MoveLeader("t", 0, leader))
	resp = w.request(produceRequest(9, -1, "t", map[int32][]byte{0: testBatch{}.build(t)})).(*kmsg.ProduceResponse)
	assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)

	_, movedEpoch, err := c.Leader("t", 0)
	require.NoError(t, err)
	assert.Greater(t, movedEpoch, newEpoch)
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	assert.ErrorIs(t, c.StopBroker(7), ErrUnknownBroker)
	assert.ErrorIs(t, c.MoveLeader("nope", 0, 0), ErrUnknownTopic)
}

// TestAllBrokersStopped: partitions have no leader while every broker is
// down, and get one back at the first restart.
func TestAllBrokersStopped(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 2))
	require.NoError(t, c.StopBroker(0))
	require.NoError(t, c.StopBroker(1))
	leader, _, err := c.Leader("t", 0)
	require.NoError(t, err)
	assert.EqualValues(t, -1, leader)
	require.NoError(t, c.RestartBroker(1))
	for p := int32(0); p < 2; p++ {
		leader, _, err := c.Leader("t", p)
		require.NoError(t, err)
		assert.EqualValues(t, 1, leader)
	}
}
