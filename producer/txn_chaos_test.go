package producer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestTransactionChaos runs transactions of random size, committed or
// aborted at random, some with consumer offsets, at transaction versions 1
// and 2, while the test broker's leaders and transaction coordinator move
// and its answers fail now and then: Produce (NOT_LEADER_OR_FOLLOWER, a
// dropped connection before or after the append, REQUEST_TIMED_OUT after
// it), EndTxn (CONCURRENT_TRANSACTIONS, the answer lost after the commit or
// abort, which at version 2 had bumped the epoch), the requests adding
// partitions or offsets (COORDINATOR_LOAD_IN_PROGRESS), and markers
// written late. Every commit succeeds or fails abortably (never fatally);
// read_committed sees every committed record exactly once, in Send order
// per partition, and no aborted one; the group's offset is the last
// committed one; every future completes and every byte of memory returns.
// At version 2 no AddPartitionsToTxn or AddOffsetsToTxn is sent.
func TestTransactionChaos(t *testing.T) {
	transactions := 40
	if testing.Short() {
		transactions = 15
	}
	forEachTxnVersion(t, func(t *testing.T, level int16) {
		const partitions = 6
		c := newCluster(t, testbroker.Config{Brokers: 3, TransactionVersion: level, TransactionMarkerDelay: 3 * time.Millisecond})
		require.NoError(t, c.CreateTopic("chaos", partitions))
		removers := []func(){
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.03, ErrorCode: 6}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.01, Drop: true}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.01, After: true, Drop: true}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Probability: 0.02, After: true, ErrorCode: 7}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{26}, Probability: 0.15, ErrorCode: 51}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{26}, Probability: 0.1, After: true, Drop: true}),
			c.Intercept(testbroker.Interceptor{Keys: []int16{24, 25, 28}, Probability: 0.1, ErrorCode: 14}),
		}
		defer func() {
			for _, r := range removers {
				r()
			}
		}()
		stop := make(chan struct{})
		var chaos sync.WaitGroup
		chaos.Go(func() {
			rng := rand.New(rand.NewPCG(3, 4))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(20+rng.IntN(30)) * time.Millisecond):
				}
				if rng.IntN(3) == 0 {
					_ = c.MoveCoordinator(1, "chaos-txn", int32(rng.IntN(3)))
				} else {
					_ = c.MoveLeader("chaos", int32(rng.IntN(partitions)), int32(rng.IntN(3)))
				}
			}
		})

		w := logTxnRequests(c)
		p := newProducer(t, c, Config{TransactionalID: "chaos-txn", Linger: 2 * time.Millisecond,
			RequestTimeout: 2 * time.Second, DeliveryTimeout: 30 * time.Second})
		ctx := testCtx(t)
		rng := rand.New(rand.NewPCG(1, 2))
		var committed []string
		lastOffset := int64(-1)
		aborted := 0
		for i := range transactions {
			require.NoError(t, p.BeginTransaction(), "transaction %d", i)
			var futs []*Future
			var vals []string
			for j := range 1 + rng.IntN(40) {
				v := fmt.Sprintf("t%d-%d", i, j)
				vals = append(vals, v)
				futs = append(futs, p.Send(ctx, &Record{Topic: "chaos", Key: []byte(fmt.Sprint(rng.IntN(12))), Value: []byte(v)}))
			}
			offset := int64(-1)
			if rng.IntN(3) == 0 {
				offset = int64(100 + i)
				err := p.SendOffsetsToTransaction(ctx, map[string]map[int32]TxnOffset{"in": {0: {Offset: offset, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
				require.NoError(t, err, "transaction %d's offsets", i)
			}
			commit := rng.IntN(3) != 0
			if commit {
				if err := p.CommitTransaction(ctx); err != nil {
					require.True(t, IsAbortable(err), "transaction %d: %v", i, err)
					t.Logf("transaction %d: commit failed, aborting: %v", i, err)
					commit = false
				}
			}
			if !commit {
				require.NoError(t, p.AbortTransaction(ctx), "transaction %d", i)
				aborted++
			} else {
				committed = append(committed, vals...)
				if offset >= 0 {
					lastOffset = offset
				}
			}
			for j, f := range futs {
				_, err := f.Wait(ctx)
				if commit {
					require.NoError(t, err, "transaction %d record %d", i, j)
				}
			}
		}
		close(stop)
		chaos.Wait()
		st := p.Metrics().Producer
		require.Zero(t, st.BufferedRecords, "every record completed")
		require.Zero(t, st.BufferTotalBytes-st.BufferAvailableBytes, "all memory returned")

		// Markers are written a moment after EndTxn answers.
		var got map[int32][]string
		require.Eventually(t, func() bool {
			got = committedValues(t, c, "chaos", partitions)
			n := 0
			for _, vs := range got {
				n += len(vs)
			}
			return n >= len(committed)
		}, 10*time.Second, 10*time.Millisecond)
		for part, vs := range got {
			for k := 1; k < len(vs); k++ {
				require.Less(t, sendOrder(t, vs[k-1]), sendOrder(t, vs[k]), "partition %d out of order or duplicated", part)
			}
		}
		require.ElementsMatch(t, committed, slices.Concat(got[0], got[1], got[2], got[3], got[4], got[5]),
			"read_committed sees exactly the committed records, once each")
		if lastOffset >= 0 {
			require.Eventually(t, func() bool { o, ok := c.CommittedOffset("g", "in", 0); return ok && o == lastOffset }, 10*time.Second, 10*time.Millisecond)
		}
		n := w.counts()
		if level >= 2 {
			require.Zero(t, n["AddPartitionsToTxn v3"], "%v", n)
			require.Zero(t, n["AddOffsetsToTxn v3"]+n["AddOffsetsToTxn v4"], "%v", n)
		}
		_, _, epoch, _ := c.TransactionState("chaos-txn")
		t.Logf("level %d: %d transactions (%d aborted), %d committed records, epoch %d, %d retries; requests %v",
			level, transactions, aborted, len(committed), epoch, st.BatchRetryTotal, n)
	})
}

// sendOrder maps "t<i>-<j>" to a number growing in Send order.
func sendOrder(t *testing.T, v string) int {
	var i, j int
	_, err := fmt.Sscanf(v, "t%d-%d", &i, &j)
	require.NoError(t, err)
	return i*1000 + j
}
