package producer

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// Tests of Close: it returns, from anywhere, leaves no goroutine or
// connection behind, and completes every record racing it exactly once.

// goroutineStacks returns the stacks of every goroutine.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestCloseFromCallbackReturns: a callback that calls Close (a common way to
// stop on the first error) must not deadlock the producer: Close waits for
// every record to complete, including the one whose callback is running.
func TestCloseFromCallbackReturns(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p, err := New(Config{Brokers: c.Addrs()}) // no cleanup Close: it would hang with the bug
	require.NoError(t, err)
	closed := make(chan error, 1)
	p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		closed <- p.Close(ctx)
	})
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close called from a callback did not return within 5s (its ctx ended after 0.5s)")
	}
}

// TestCloseLeavesNoDialGoroutine: Close promises that the producer's
// goroutines have exited when it returns; a dial started by the IO goroutine
// must end (and its connection be closed) by then, not after DialTimeout.
func TestCloseLeavesNoDialGoroutine(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	var apiVersions atomic.Int32
	// The metadata client's connection comes first; the IO goroutine's
	// own connection to the leader handshakes slowly.
	slow := func(int32, kmsg.Request) bool { return apiVersions.Add(1) >= 2 }
	c.Intercept(testbroker.Interceptor{Keys: []int16{18}, Match: slow, Delay: 1500 * time.Millisecond})
	p, err := New(Config{Brokers: c.Addrs(), DisableIdempotence: true, Linger: -1})
	require.NoError(t, err)
	p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")})
	require.True(t, waitFor(5*time.Second, func() bool {
		return strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}), "the IO goroutine started dialing the leader")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Close(ctx)
	assert.False(t, strings.Contains(goroutineStacks(), "producer.(*sink).dial.func"), "a dial goroutine outlived Close")
	// Once the slow handshake ends, nothing of the producer may hold a
	// connection to the broker.
	require.True(t, waitFor(5*time.Second, func() bool {
		return !strings.Contains(goroutineStacks(), "producer.(*sink).dial.func")
	}))
	require.True(t, waitFor(2*time.Second, func() bool { return c.Stats().Connections == 0 }),
		"%d connections left open after Close", c.Stats().Connections)
}

// TestSendsRacingCloseCompleteOnce: Sends from many goroutines racing with
// Close (to known and unknown topics, some waiting for memory) all complete
// exactly once (Future.complete panics on a second completion), with
// success or an error wrapping ErrClosed, and Close returns.
func TestSendsRacingCloseCompleteOnce(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 3))
	p := newProducer(t, c, Config{BufferMemory: 256 << 10, BatchSize: 16 << 10})
	const senders, each = 8, 400
	futures := make([][]*Future, senders)
	start := make(chan struct{})
	done := make(chan struct{})
	for g := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			for i := range each {
				topic := "t"
				if i%5 == 0 {
					topic = "unknown"
				}
				futures[g] = append(futures[g], p.Send(context.Background(), &Record{Topic: topic, Value: make([]byte, 500)}))
			}
		}()
	}
	close(start)
	time.Sleep(2 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
	for range senders {
		<-done
	}
	for g := range futures {
		for i, f := range futures[g] {
			md, ok, err := f.Result()
			require.True(t, ok, "sender %d record %d not completed after Close", g, i)
			if err != nil {
				require.ErrorIs(t, err, ErrClosed, "sender %d record %d", g, i)
			} else {
				require.Equal(t, "t", md.Topic)
			}
		}
	}
}
