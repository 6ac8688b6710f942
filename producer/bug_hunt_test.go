package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestBugFailedParkedRecordsFreeMemoryBeforeDelivery: DESIGN.md rule 3 ("a
// batch's memory outlives its completions": memory returns to the pool only
// after the completion goroutine delivered the outcomes, so that slow
// callbacks slow Send down instead of growing memory) holds for batches,
// not for parked records. ExpireParked, FailParked and MoveParked's fail
// path pop the record (Topic.popLocked / resetLocked release its chunk and
// its parking charge at once) and push a heap copy of its completion to the
// completer's unbounded queue (sink.expire, sink.failTopic,
// sink.moveParked, sink.failBuffered). Interleaving: 2000 records park for
// a missing topic; after MaxBlock the IO goroutine expires them all and
// the pool is empty again, while the first callback blocks and the other
// 1999 outcomes (completion, outcome, future: ~250 bytes each) wait
// uncharged; Sends to healthy topics can meanwhile fill the whole pool
// again.
func TestBugFailedParkedRecordsFreeMemoryBeforeDelivery(t *testing.T) {
	c := newCluster(t, testbroker.Config{}) // does not auto-create
	p := newProducer(t, c, Config{MaxBlock: 200 * time.Millisecond, DeliveryTimeout: time.Minute})
	release := make(chan struct{})
	var delivered atomic.Int64
	const n = 2000
	for range n {
		p.SendCallback(context.Background(), &Record{Topic: "missing"}, func(RecordMetadata, error) {
			if delivered.Add(1) == 1 {
				<-release // a slow callback
			}
		})
	}
	defer close(release)
	require.Eventually(t, func() bool { return delivered.Load() == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the IO goroutine finishes popping the expired records
	require.Positive(t, p.Stats().BufferUsed,
		"%d records' outcomes are not delivered yet, but the pool already took back all their memory", n-delivered.Load())
}
