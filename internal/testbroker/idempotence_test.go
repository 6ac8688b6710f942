package testbroker

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// produceStep is one idempotent batch sent to a partition log, and what the
// broker must answer.
type produceStep struct {
	pid   int64 // -1: non-idempotent
	epoch int16
	seq   int32
	n     int
	// deleteBefore, when > 0, first moves the log start to that offset.
	deleteBefore int64

	wantCode int16
	wantBase int64 // checked when wantCode is 0
	wantDup  bool
}

func TestIdempotentSequences(t *testing.T) {
	const pid = 1000
	// sixBatches writes batches of 2 records with sequences 0, 2, ..., 10
	// at offsets 0, 2, ..., 10.
	sixBatches := func() []produceStep {
		var s []produceStep
		for i := 0; i < 6; i++ {
			s = append(s, produceStep{pid: pid, seq: int32(2 * i), n: 2, wantBase: int64(2 * i)})
		}
		return s
	}
	cases := []struct {
		name          string
		unknownErrors bool
		steps         []produceStep
		wantHW        int64
	}{
		{
			name: "non-idempotent batches are never checked",
			steps: []produceStep{
				{pid: -1, seq: -1, n: 2, wantBase: 0},
				{pid: -1, seq: -1, n: 2, wantBase: 2},
			},
			wantHW: 4,
		},
		{
			name: "in order",
			steps: []produceStep{
				{pid: pid, seq: 0, n: 3, wantBase: 0},
				{pid: pid, seq: 3, n: 2, wantBase: 3},
				{pid: pid, seq: 5, n: 1, wantBase: 5},
			},
			wantHW: 6,
		},
		{
			name: "retry of the last batch is a duplicate with its original offset",
			steps: []produceStep{
				{pid: pid, seq: 0, n: 3, wantBase: 0},
				{pid: pid, seq: 3, n: 2, wantBase: 3},
				{pid: pid, seq: 3, n: 2, wantBase: 3, wantDup: true},
				{pid: pid, seq: 5, n: 1, wantBase: 5},
			},
			wantHW: 6,
		},
		{
			name: "the oldest of the five cached batches is still a duplicate",
			steps: append(sixBatches(),
				produceStep{pid: pid, seq: 2, n: 2, wantBase: 2, wantDup: true},
				produceStep{pid: pid, seq: 10, n: 2, wantBase: 10, wantDup: true},
			),
			wantHW: 12,
		},
		{
			name: "a batch older than the cache is out of order",
			steps: append(sixBatches(),
				produceStep{pid: pid, seq: 0, n: 2, wantCode: codeOutOfOrderSequence},
			),
			wantHW: 12,
		},
		{
			name: "same first sequence, different range is not a duplicate",
			steps: []produceStep{
				{pid: pid, seq: 0, n: 3, wantBase: 0},
				{pid: pid, seq: 0, n: 2, wantCode: codeOutOfOrderSequence},
			},
			wantHW: 3,
		},
		{
			name: "gap",
			steps: []produceStep{
				{pid: pid, seq: 0, n: 3, wantBase: 0},
				{pid: pid, seq: 4, n: 1, wantCode: codeOutOfOrderSequence},
				{pid: pid, seq: 3, n: 1, wantBase: 3},
			},
			wantHW: 4,
		},
		{
			name: "older epoch is fenced",
			steps: []produceStep{
				{pid: pid, epoch: 1, seq: 0, n: 1, wantBase: 0},
				{pid: pid, epoch: 0, seq: 1, n: 1, wantCode: codeInvalidProducerEpoch},
				{pid: pid, epoch: 0, seq: 0, n: 1, wantCode: codeInvalidProducerEpoch},
			},
			wantHW: 1,
		},
		{
			name: "newer epoch must start at sequence 0",
			steps: []produceStep{
				{pid: pid, epoch: 0, seq: 0, n: 3, wantBase: 0},
				{pid: pid, epoch: 1, seq: 3, n: 1, wantCode: codeOutOfOrderSequence},
				{pid: pid, epoch: 1, seq: 0, n: 2, wantBase: 3},
				{pid: pid, epoch: 1, seq: 2, n: 1, wantBase: 5},
			},
			wantHW: 6,
		},
		{
			// KIP-360: after an epoch bump a retry of an old-epoch batch is
			// fenced, not answered as a duplicate.
			name: "a new epoch forgets the old epoch's batches",
			steps: []produceStep{
				{pid: pid, epoch: 0, seq: 0, n: 2, wantBase: 0},
				{pid: pid, epoch: 1, seq: 0, n: 2, wantBase: 2},
				{pid: pid, epoch: 0, seq: 0, n: 2, wantCode: codeInvalidProducerEpoch},
				{pid: pid, epoch: 1, seq: 0, n: 2, wantBase: 2, wantDup: true},
			},
			wantHW: 4,
		},
		{
			name: "producers are tracked separately",
			steps: []produceStep{
				{pid: 1, seq: 0, n: 2, wantBase: 0},
				{pid: 2, seq: 0, n: 2, wantBase: 2},
				{pid: 1, seq: 2, n: 1, wantBase: 4},
				{pid: 2, seq: 0, n: 2, wantBase: 2, wantDup: true},
			},
			wantHW: 5,
		},
		{
			name: "unknown producer with sequence 0",
			steps: []produceStep{
				{pid: pid, epoch: 3, seq: 0, n: 1, wantBase: 0},
			},
			wantHW: 1,
		},
		{
			// Current Kafka: no state, no epoch to compare, any sequence.
			name: "unknown producer with sequence > 0 is accepted like Kafka 2.5+",
			steps: []produceStep{
				{pid: pid, seq: 42, n: 2, wantBase: 0},
				{pid: pid, seq: 44, n: 1, wantBase: 2},
				{pid: pid, seq: 46, n: 1, wantCode: codeOutOfOrderSequence},
			},
			wantHW: 3,
		},
		{
			name:          "unknown producer with sequence > 0 and UnknownProducerIDErrors",
			unknownErrors: true,
			steps: []produceStep{
				{pid: pid, seq: 42, n: 2, wantCode: codeUnknownProducerID},
				{pid: pid, seq: 0, n: 2, wantBase: 0},
			},
			wantHW: 2,
		},
		{
			name:          "records deleted under the producer make it unknown",
			unknownErrors: true,
			steps: []produceStep{
				{pid: pid, seq: 0, n: 2, wantBase: 0},
				{pid: 7, seq: 0, n: 2, wantBase: 2},
				{pid: pid, seq: 2, n: 2, deleteBefore: 2, wantCode: codeUnknownProducerID},
				{pid: 7, seq: 2, n: 2, wantBase: 4}, // its last write is above the log start
			},
			wantHW: 6,
		},
		{
			name: "records deleted under the producer: Kafka 2.5+ accepts any sequence",
			steps: []produceStep{
				{pid: pid, seq: 0, n: 2, wantBase: 0},
				{pid: pid, seq: 9, n: 2, deleteBefore: 2, wantBase: 2},
			},
			wantHW: 4,
		},
		{
			name: "sequence wraps from MaxInt32 to 0 inside a batch",
			steps: []produceStep{
				{pid: pid, seq: math.MaxInt32 - 1, n: 3, wantBase: 0}, // MaxInt32-1, MaxInt32, 0
				{pid: pid, seq: 1, n: 1, wantBase: 3},
			},
			wantHW: 4,
		},
		{
			name: "sequence wraps between batches",
			steps: []produceStep{
				{pid: pid, seq: math.MaxInt32, n: 1, wantBase: 0},
				{pid: pid, seq: math.MaxInt32, n: 1, wantBase: 0, wantDup: true},
				{pid: pid, seq: 0, n: 2, wantBase: 1},
			},
			wantHW: 3,
		},
	}
	for _, tc := range cases {
		for _, sink := range []bool{false, true} {
			name := tc.name
			if sink {
				name += "/sink"
			}
			t.Run(name, func(t *testing.T) {
				l := newPartitionLog(logConfig{Sink: sink, UnknownProducerIDErrors: tc.unknownErrors})
				for i, st := range tc.steps {
					if st.deleteBefore > 0 {
						l.deleteRecordsBefore(st.deleteBefore)
					}
					tb := testBatch{n: st.n, idem: st.pid >= 0, pid: st.pid, epoch: st.epoch, seq: st.seq}
					res := l.appendBatch(tb.build(t), t0)
					require.Equal(t, st.wantCode, res.ErrorCode, "step %d: %s", i, res.ErrorMessage)
					if st.wantCode != codeNone {
						assert.NotEmpty(t, res.ErrorMessage, "step %d", i)
						assert.Equal(t, int64(-1), res.BaseOffset, "step %d", i)
						continue
					}
					assert.Equal(t, st.wantBase, res.BaseOffset, "step %d", i)
					assert.Equal(t, st.wantDup, res.Duplicate, "step %d", i)
				}
				assert.Equal(t, tc.wantHW, l.highWatermark(), "duplicates and rejected batches must not be appended")
				if !sink {
					recs, err := l.records()
					require.NoError(t, err)
					assert.Len(t, recs, int(tc.wantHW-l.logStartOffset()))
				}
			})
		}
	}
}

// TestStoredRecordsCarrySequences checks what a test of the producer reads
// back: each record's producer id, epoch and sequence.
func TestStoredRecordsCarrySequences(t *testing.T) {
	l := newPartitionLog(logConfig{})
	require.Equal(t, codeNone, l.appendBatch(testBatch{n: 3, idem: true, pid: 9, epoch: 2, seq: math.MaxInt32 - 1}.build(t), t0).ErrorCode)
	recs, err := l.records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, want := range []int32{math.MaxInt32 - 1, math.MaxInt32, 0} {
		assert.Equal(t, int64(9), recs[i].ProducerID)
		assert.Equal(t, int16(2), recs[i].ProducerEpoch)
		assert.Equal(t, want, recs[i].Sequence)
	}
}

func TestLastSequence(t *testing.T) {
	cases := []struct {
		first, lastOffsetDelta, want int32
	}{
		{0, 0, 0},
		{0, 4, 4},
		{10, 5, 15},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
		{-1, 3, -1},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, lastSequence(tc.first, tc.lastOffsetDelta), "lastSequence(%d, %d)", tc.first, tc.lastOffsetDelta)
	}
}

func TestInSequence(t *testing.T) {
	cases := []struct {
		last, next int32
		want       bool
	}{
		{0, 1, true},
		{4, 5, true},
		{4, 4, false},
		{4, 6, false},
		{math.MaxInt32, 0, true},
		{math.MaxInt32 - 1, math.MaxInt32, true},
		{math.MaxInt32, 1, false},
		{-1, 0, true}, // a producer with no sequence yet
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, inSequence(tc.last, tc.next), "inSequence(%d, %d)", tc.last, tc.next)
	}
}

func TestProducerStateRingKeepsFive(t *testing.T) {
	s := newProducerStates(false)
	for i := int32(0); i < 8; i++ {
		s.record(1, 0, batchMeta{firstSeq: i, lastSeq: i, firstOffset: int64(i), lastOffset: int64(i)})
	}
	for i := int32(0); i < 8; i++ {
		res := s.check(1, 0, i, i)
		assert.Equal(t, i >= 3, res.duplicate, "batch %d", i)
	}
	epoch, ok := s.epochOf(1)
	assert.True(t, ok)
	assert.Equal(t, int16(0), epoch)
	s.truncate(8)
	_, ok = s.epochOf(1)
	assert.False(t, ok)
}
