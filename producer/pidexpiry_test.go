package producer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/kerr"
)

// TestIdempotentProducerIDExpiredWhileIdle: the broker forgets an idle
// producer id (producer.id.expiration.ms, KIP-854), then the producer sends
// thousands of records to several partitions with several batches of each
// in flight, and the first request after the idle period fails without
// being written. Kafka 2.5+ takes the first batch it sees of an unknown
// producer id, whatever its sequence, as the start: a later batch in
// flight must not get there first. Brokers before 2.5 answer
// UNKNOWN_PRODUCER_ID, which bumps the epoch. Either way every record is
// stored exactly once, in send order per partition, and none fails.
func TestIdempotentProducerIDExpiredWhileIdle(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unknownErrors bool
		txn           bool // a transactional producer (version 1: one epoch across transactions)
	}{
		{"any sequence accepted, Kafka 2.5+", false, false},
		{"UNKNOWN_PRODUCER_ID, Kafka before 2.5", true, false},
		{"transactional, any sequence accepted", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions, perPart = 4, 1000
			c := newCluster(t, testbroker.Config{Brokers: 1, UnknownProducerIDErrors: tc.unknownErrors, TransactionVersion: 1})
			require.NoError(t, c.CreateTopic("t", partitions))
			cfg := Config{Linger: 5 * time.Millisecond, BatchSize: 512, RequestTimeout: 5 * time.Second, DeliveryTimeout: 20 * time.Second}
			if tc.txn {
				cfg.TransactionalID = "idle"
			}
			p := newProducer(t, c, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			inTxn := func(f func()) {
				if !tc.txn {
					f()
					return
				}
				require.NoError(t, p.BeginTransaction())
				f()
				require.NoError(t, p.CommitTransaction(ctx))
			}

			send := func(from, to int) []*Future {
				var fs []*Future
				for i := from; i < to; i++ {
					for part := range int32(partitions) {
						v := fmt.Sprintf("%d-%06d", part, i)
						fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: part, ExplicitPartition: true, Value: []byte(v)}))
					}
				}
				return fs
			}
			wait := func(fs []*Future) {
				t.Helper()
				for _, f := range fs {
					_, err := f.Wait(ctx)
					require.NoError(t, err)
				}
			}
			inTxn(func() { wait(send(0, 100)) })
			time.Sleep(confirmLapse + 50*time.Millisecond) // idle
			require.Equal(t, partitions, c.ExpireProducerIDs())

			// The first Produce after the idle period is refused unwritten
			// (NOT_ENOUGH_REPLICAS, retriable), while later ones, if any
			// were sent behind it, are taken.
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 19, Delay: 20 * time.Millisecond})
			inTxn(func() { wait(send(100, perPart)) })

			for part := range int32(partitions) {
				recs, err := c.Records("t", part)
				require.NoError(t, err)
				got := make([]string, 0, len(recs))
				for _, r := range recs {
					if !r.Control {
						got = append(got, string(r.Value))
					}
				}
				want := make([]string, perPart)
				for i := range want {
					want[i] = fmt.Sprintf("%d-%06d", part, i)
				}
				if !equalStrings(got, want) {
					t.Fatalf("partition %d: %d records stored, want %d, in send order, once each; first difference: %s",
						part, len(got), len(want), firstDiff(got, want))
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			lo := max(0, i-2)
			return "at " + strconv.Itoa(i) + ": got " + strings.Join(got[lo:min(len(got), i+3)], ",") + ", want " + strings.Join(want[lo:min(len(want), i+3)], ",")
		}
	}
	return "at " + strconv.Itoa(min(len(got), len(want))) + ": one ends"
}

// TestTxnTransactionalIDExpiredIsFatal: a producer idle past
// transactional.id.expiration.ms finds its transactional id forgotten:
// the next transaction's first request (AddPartitionsToTxn or
// AddOffsetsToTxn at transaction version 1, Produce at version 2) gets
// INVALID_PRODUCER_ID_MAPPING, which is fatal, as in Java since 4.0
// (KAFKA-18019: recovering would let a fenced zombie write again). A new
// producer with the same transactional id then gets a new producer id and
// commits; read_committed sees exactly the committed records.
func TestTxnTransactionalIDExpiredIsFatal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		level   int16
		offsets bool // the transaction's first request is AddOffsetsToTxn
	}{
		{"version 1, AddPartitionsToTxn", 1, false},
		{"version 1, AddOffsetsToTxn", 1, true},
		{"version 2, Produce", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: tc.level})
			require.NoError(t, c.CreateTopic("t", 1))
			cfg := Config{TransactionalID: "idle", Linger: time.Millisecond}
			var logs testutil.SyncBuffer
			fcfg := cfg
			fcfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
			p := newProducer(t, c, fcfg)
			ctx := testCtx(t)
			commitOne(t, ctx, p, "before")
			_, oldPID, _, _ := c.TransactionState("idle")
			require.Equal(t, 1, c.ExpireTransactionalIDs())

			require.NoError(t, p.BeginTransaction())
			var err error
			if tc.offsets {
				err = p.SendOffsetsToTransaction(ctx, map[string]map[int32]TxnOffset{"in": {0: {Offset: 1, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
			} else {
				f := p.Send(ctx, &Record{Topic: "t", Value: []byte("lost")})
				_, ferr := f.Wait(ctx)
				require.Error(t, ferr)
				err = p.CommitTransaction(ctx)
			}
			require.Error(t, err)
			require.True(t, IsFatal(err), "fatal: %v", err)
			require.False(t, IsAbortable(err), "%v", err)
			require.ErrorIs(t, err, kerr.ForCode(49), "INVALID_PRODUCER_ID_MAPPING")
			require.True(t, IsFatal(p.AbortTransaction(ctx)), "only Close is left")
			require.True(t, IsFatal(p.BeginTransaction()))
			require.NoError(t, p.Close(ctx))
			// Said once, at Error, as Java logs the fatal state.
			require.Equal(t, 1, strings.Count(logs.String(), "failed for good"), "%s", logs.String())
			require.Contains(t, logs.String(), "INVALID_PRODUCER_ID_MAPPING")

			p2 := newProducer(t, c, cfg)
			commitOne(t, ctx, p2, "after")
			_, newPID, _, _ := c.TransactionState("idle")
			require.NotEqual(t, oldPID, newPID, "a new producer id")
			require.Equal(t, []string{"before", "after"}, committedValues(t, c, "t", 1)[0])
		})
	}
}

// TestTxnUnknownProducerIDFromCoordinator: UNKNOWN_PRODUCER_ID from
// AddPartitionsToTxn, AddOffsetsToTxn or EndTxn is abortable, as Java's
// abortableErrorIfPossible: after AbortTransaction the producer bumps its
// epoch (InitProducerId with its id and epoch, KIP-360) and the next
// transaction commits under it. An EndTxn(abort) answered so fails the
// abort, which is called again, as in Java. When the coordinator cannot
// bump (InitProducerId below v3) the error is fatal.
func TestTxnUnknownProducerIDFromCoordinator(t *testing.T) {
	isEnd := func(commit bool) func(int32, kmsg.Request) bool {
		return func(_ int32, r kmsg.Request) bool { return r.(*kmsg.EndTxnRequest).Commit == commit }
	}
	for _, tc := range []struct {
		name     string
		key      int16
		match    func(int32, kmsg.Request) bool
		offsets  bool
		noBump   bool // the coordinator serves InitProducerId v2 at most
		abortErr bool // the error comes from AbortTransaction itself
	}{
		{name: "AddPartitionsToTxn", key: 24},
		{name: "AddOffsetsToTxn", key: 25, offsets: true},
		{name: "EndTxn(commit)", key: 26, match: isEnd(true)},
		{name: "EndTxn(abort)", key: 26, match: isEnd(false), abortErr: true},
		{name: "AddPartitionsToTxn, no bump possible", key: 24, noBump: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			if tc.noBump {
				c.Intercept(testbroker.Interceptor{Keys: []int16{18}, After: true, Rewrite: func(resp kmsg.Response) {
					r := resp.(*kmsg.ApiVersionsResponse)
					for i := range r.ApiKeys {
						if r.ApiKeys[i].ApiKey == 22 {
							r.ApiKeys[i].MaxVersion = 2
						}
					}
				}})
			}
			p := newProducer(t, c, Config{TransactionalID: "unknown-pid", Linger: time.Millisecond})
			ctx := testCtx(t)
			commitOne(t, ctx, p, "before")
			_, pid, epoch, _ := c.TransactionState("unknown-pid")
			c.Intercept(testbroker.Interceptor{Keys: []int16{tc.key}, Match: tc.match, Times: 1, ErrorCode: 59})

			require.NoError(t, p.BeginTransaction())
			f := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted")})
			var err error
			if tc.offsets {
				err = p.SendOffsetsToTransaction(ctx, map[string]map[int32]TxnOffset{"in": {0: {Offset: 1, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
			} else if tc.abortErr {
				_, ferr := f.Wait(ctx) // written: the coordinator knows of the transaction
				require.NoError(t, ferr)
				err = p.AbortTransaction(ctx)
				require.ErrorIs(t, err, kerr.UnknownProducerID, "as in Java, the abort fails")
				require.False(t, IsFatal(err), "%v", err)
				require.NoError(t, p.AbortTransaction(ctx), "and is called again")
			} else {
				err = p.CommitTransaction(ctx)
			}
			if !tc.abortErr {
				require.Error(t, err)
				require.ErrorIs(t, err, kerr.UnknownProducerID)
				if tc.noBump {
					require.True(t, IsFatal(err), "%v", err)
					return
				}
				require.True(t, IsAbortable(err), "%v", err)
				require.False(t, IsFatal(err), "%v", err)
				require.NoError(t, p.AbortTransaction(ctx))
			}
			_, _ = f.Wait(ctx)

			commitOne(t, ctx, p, "after")
			_, pid2, epoch2, _ := c.TransactionState("unknown-pid")
			require.Equal(t, pid, pid2)
			require.Equal(t, epoch+1, epoch2, "the next transaction ran under a bumped epoch")
			require.Equal(t, []string{"before", "after"}, committedValues(t, c, "t", 1)[0])
		})
	}
}

// TestClassifyTxnProducerIDErrors: what Java 4.x's TransactionManager does
// with UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_ID_MAPPING, by request:
// the first is abortable with an epoch bump from AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn (abortableErrorIfPossible) when the
// coordinator can bump (InitProducerId v3+), fatal otherwise and from the
// other requests; the second is fatal everywhere (KAFKA-18019).
func TestClassifyTxnProducerIDErrors(t *testing.T) {
	c := &txnClient{}
	for _, tc := range []struct {
		what    string
		err     error
		initMax int32
		fatal   bool
	}{
		{"AddPartitionsToTxn", kerr.UnknownProducerID, 5, false},
		{"AddOffsetsToTxn", kerr.UnknownProducerID, 5, false},
		{"EndTxn(commit)", kerr.UnknownProducerID, 5, false},
		{"EndTxn(abort)", kerr.UnknownProducerID, 3, false},
		{"TxnOffsetCommit", kerr.UnknownProducerID, 5, true},
		{"InitProducerId", kerr.UnknownProducerID, 5, true},
		{"AddPartitionsToTxn", kerr.UnknownProducerID, 2, true},
		{"EndTxn(abort)", kerr.UnknownProducerID, -1, true},
		{"AddPartitionsToTxn", kerr.ForCode(49), 5, true},
		{"AddOffsetsToTxn", kerr.ForCode(49), 5, true},
		{"EndTxn(commit)", kerr.ForCode(49), 5, true},
		{"TxnOffsetCommit", kerr.ForCode(49), 5, true},
		{"InitProducerId", kerr.ForCode(49), 5, true},
	} {
		c.initPIDMax.Store(tc.initMax)
		te := c.classify(tc.what, fmt.Errorf("wrapped: %w", tc.err))
		require.NotNil(t, te, "%s %v", tc.what, tc.err)
		require.Equal(t, tc.fatal, IsFatal(te), "%s %v (InitProducerId v%d): %v", tc.what, tc.err, tc.initMax, te)
		require.Equal(t, !tc.fatal, IsAbortable(te), "%s %v", tc.what, tc.err)
		require.Equal(t, !tc.fatal, te.bump, "%s %v: an abortable one bumps the epoch", tc.what, tc.err)
		require.ErrorIs(t, te, tc.err)
	}
}

// TestTxnBumpAfterTransactionalIDExpiredTakesNewProducerID: an epoch bump
// (KIP-360, here after a sequence error) that reaches the coordinator only
// after it expired the transactional id names an id the coordinator no
// longer knows; Kafka then answers a new producer id at epoch 0 (its
// TransactionCoordinator creates the metadata afresh, with no epoch to
// fence against), which the producer adopts: the next transaction commits
// under it.
func TestTxnBumpAfterTransactionalIDExpiredTakesNewProducerID(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "late-bump", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "before")
	_, oldPID, _, _ := c.TransactionState("late-bump")

	var bumps atomic.Int32
	release := c.Intercept(testbroker.Interceptor{Keys: []int16{22}, Stall: true, Match: func(int32, kmsg.Request) bool {
		bumps.Add(1)
		return true
	}})
	defer release()
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 45}) // OUT_OF_ORDER_SEQUENCE_NUMBER

	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted")}).Wait(ctx)
	require.True(t, IsAbortable(err), "%v", err)
	require.NoError(t, p.AbortTransaction(ctx))
	require.Eventually(t, func() bool { return bumps.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "the bump goes after the abort")
	require.Equal(t, 1, c.ExpireTransactionalIDs())
	release()

	commitOne(t, ctx, p, "after")
	_, pid, epoch, _ := c.TransactionState("late-bump")
	require.NotEqual(t, oldPID, pid, "a new producer id")
	require.Equal(t, int16(0), epoch)
	require.Equal(t, []string{"before", "after"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnUnknownProducerIDWhileSendingOffsets: SendOffsetsToTransaction
// made while the transaction's AddPartitionsToTxn is in flight, answered
// UNKNOWN_PRODUCER_ID, returns the abortable error at once: it used to
// wait for the epoch bump, which goes only after the abort that it kept
// AbortTransaction from making (it held the transaction's operations),
// until its ctx ended.
func TestTxnUnknownProducerIDWhileSendingOffsets(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "offsets-unknown-pid", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "before")
	c.Intercept(testbroker.Interceptor{Keys: []int16{24}, Times: 1, Delay: 300 * time.Millisecond, ErrorCode: kerr.UnknownProducerID.Code})

	require.NoError(t, p.BeginTransaction())
	f := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted")})
	time.Sleep(50 * time.Millisecond) // the AddPartitionsToTxn is in flight
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err := p.SendOffsetsToTransaction(octx, map[string]map[int32]TxnOffset{"in": {0: {Offset: 1, LeaderEpoch: -1}}}, GroupMetadata{GroupID: "g"})
	require.Error(t, err)
	require.NoError(t, octx.Err(), "SendOffsetsToTransaction waited until its ctx ended (%v)", time.Since(start))
	require.ErrorIs(t, err, kerr.UnknownProducerID)
	require.True(t, IsAbortable(err), "%v", err)
	require.NoError(t, p.AbortTransaction(ctx))
	_, _ = f.Wait(ctx)
	commitOne(t, ctx, p, "after")
	require.Equal(t, []string{"before", "after"}, committedValues(t, c, "t", 1)[0])
}

// TestTxnAbortAnsweredUnknownProducerIDEnds: an abort whose EndTxn is
// answered UNKNOWN_PRODUCER_ID every time fails once (called again, as in
// Java), and the second ends through the epoch bump, as Java's abort ends
// with its InitProducerId: it used to fail forever. The next transaction
// runs under the bumped epoch.
func TestTxnAbortAnsweredUnknownProducerIDEnds(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1, TransactionVersion: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{TransactionalID: "abort-unknown-pid", Linger: time.Millisecond})
	ctx := testCtx(t)
	commitOne(t, ctx, p, "before")
	_, pid, epoch, _ := c.TransactionState("abort-unknown-pid")
	// After: the coordinator aborts the transaction, and its answer is
	// lost to UNKNOWN_PRODUCER_ID, every time.
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{26}, After: true, ErrorCode: kerr.UnknownProducerID.Code,
		Match: func(_ int32, r kmsg.Request) bool { return !r.(*kmsg.EndTxnRequest).Commit }})

	require.NoError(t, p.BeginTransaction())
	_, err := p.Send(ctx, &Record{Topic: "t", Value: []byte("aborted")}).Wait(ctx)
	require.NoError(t, err)
	err = p.AbortTransaction(ctx)
	require.ErrorIs(t, err, kerr.UnknownProducerID, "the first abort fails, as in Java")
	require.False(t, IsFatal(err), "%v", err)
	require.NoError(t, p.AbortTransaction(ctx), "the second ends through the bump")
	remove()

	commitOne(t, ctx, p, "after")
	_, pid2, epoch2, _ := c.TransactionState("abort-unknown-pid")
	require.Equal(t, pid, pid2)
	require.Greater(t, epoch2, epoch, "the next transaction ran under a bumped epoch")
	require.Equal(t, []string{"before", "after"}, committedValues(t, c, "t", 1)[0])
}
