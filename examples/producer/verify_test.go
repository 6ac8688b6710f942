package main

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// stored is a record to place in a partition for readBack to find.
type stored struct {
	part int32
	seq  int64
	key  string // "" for a null key
	size int    // value size; 0 means 8
}

func TestReadBack(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 1})
	p, err := producer.New(producer.Config{Brokers: c.Addrs(), Partitioner: producer.ManualPartitioner(), Linger: producer.NoWait})
	require.NoError(t, err)
	defer p.Close(t.Context())

	// Three keys; key k = seq mod 3. In the good layout key k lives in
	// partition k mod 2.
	good := []stored{{0, 0, "key-0", 0}, {1, 1, "key-1", 0}, {0, 2, "key-2", 0}, {0, 3, "key-0", 0}, {1, 4, "key-1", 0}, {0, 5, "key-2", 0}}
	cases := []struct {
		name      string
		keys      int
		recs      []stored
		wantOrder bool
		want      string // in problem(); "" for none
	}{
		{"good", 3, good, true, ""},
		{"duplicate", 3, append(good[:6:6], stored{1, 4, "key-1", 0}), true, "1 duplicated"},
		{"missing", 3, good[:5], true, "1 missing (first: record 5)"},
		{"out of order", 3, []stored{{0, 3, "key-0", 0}, {0, 0, "key-0", 0}, {1, 1, "key-1", 0}, {0, 2, "key-2", 0}, {1, 4, "key-1", 0}, {0, 5, "key-2", 0}},
			false, `1 out of order (first: partition 0 offset 1: key "key-0" has record 0 after record 3)`},
		{"wrong partition", 3, []stored{{0, 0, "key-0", 0}, {1, 1, "key-1", 0}, {0, 2, "key-2", 0}, {1, 3, "key-0", 0}, {1, 4, "key-1", 0}, {0, 5, "key-2", 0}},
			false, `1 in the wrong partition (first: key "key-0" in partitions 0 and 1)`},
		{"wrong key", 3, append(good[:5:5], stored{0, 5, "key-1", 0}), true, `record 5 has key "key-1", want "key-2"`},
		{"value size", 3, append(good[:5:5], stored{0, 5, "key-2", 9}), true, "value of 9 bytes, want 8"},
		{"sequence out of range", 3, append(good[:6:6], stored{0, 6, "key-0", 0}), true, "sequence number 6 out of range"},
		{"unkeyed good", 0, []stored{{1, 1, "", 0}, {0, 0, "", 0}}, true, ""},
		{"unkeyed with a key", 0, []stored{{1, 1, "", 0}, {0, 0, "k", 0}}, true, "record 0 has a key, want none"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := fmt.Sprintf("readback-%d", i)
			require.NoError(t, c.CreateTopic(topic, 2))
			n := int64(6)
			if tc.keys == 0 {
				n = 2
			}
			for _, r := range tc.recs {
				v := make([]byte, max(r.size, 8))
				binary.BigEndian.PutUint64(v, uint64(r.seq))
				rec := &producer.Record{Topic: topic, Partition: r.part, Value: v}
				if r.key != "" {
					rec.Key = []byte(r.key)
				}
				_, err := p.Send(t.Context(), rec).Wait(t.Context())
				require.NoError(t, err)
			}
			rb := readBack(t.Context(), c, topic, 2, n, makeKeys(tc.keys), 8)
			assert.Equal(t, int64(len(tc.recs)), rb.records)
			assert.Equal(t, tc.wantOrder, rb.orderOK())
			if tc.want == "" {
				assert.Empty(t, rb.problem())
			} else {
				assert.Contains(t, rb.problem(), tc.want)
			}
		})
	}

	t.Run("unknown topic", func(t *testing.T) {
		rb := readBack(t.Context(), c, "nowhere", 1, 1, nil, 8)
		assert.Contains(t, rb.problem(), "partition 0: samsatest: unknown topic")
	})
}

func TestTrackerObserve(t *testing.T) {
	type ack struct {
		seq    int64
		part   int32
		offset int64
	}
	cases := []struct {
		name  string
		keys  int
		acks  []ack
		want  int64 // disorder count
		first string
	}{
		{"in order", 2, []ack{{0, 0, 0}, {1, 1, 0}, {2, 0, 1}, {3, 1, 1}}, 0, ""},
		{"acks=none offsets", 0, []ack{{0, 0, -1}, {1, 0, -1}, {2, 3, -1}}, 0, ""},
		{"callback out of Send order", 0, []ack{{1, 0, 0}, {0, 0, 1}}, 1, "partition 0: record 0 completed after record 1"},
		{"offset not increasing", 0, []ack{{0, 2, 7}, {1, 2, 7}}, 1, "partition 2: record 1 got offset 7, not above record 0's 7"},
		{"key moved", 2, []ack{{0, 0, 0}, {2, 1, 0}}, 1, "key 0: record 2 went to partition 1, earlier ones to 0"},
		{"no partition", 0, []ack{{0, -1, 0}}, 1, "record 0 completed with partition -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(10, tc.keys)
			for _, a := range tc.acks {
				tr.observe(a.seq, producer.RecordMetadata{Partition: a.part, Offset: a.offset})
			}
			assert.Equal(t, tc.want, tr.disorder)
			assert.Equal(t, tc.first, tr.firstOrder)
		})
	}
}

// A recycled pending slot carries no state from its last record, and the
// callback path does not allocate.
func TestPendingCallbackDoesNotAllocate(t *testing.T) {
	tr := newTracker(1, 1)
	var seq int64
	allocs := testing.AllocsPerRun(1000, func() {
		pd := tr.slot()
		pd.seq, pd.sent = seq, tr.now()
		pd.fn(producer.RecordMetadata{Partition: 0, Offset: seq}, nil)
		seq++
	})
	assert.Zero(t, allocs)
	assert.Zero(t, tr.disorder, tr.firstOrder)
	assert.Equal(t, seq, tr.acked.Load())
}

func TestKeyBytes(t *testing.T) {
	cases := []struct {
		n    int64
		keys int
	}{{0, 3}, {1, 3}, {5, 3}, {25, 12}, {1000, 7}}
	for _, tc := range cases {
		keys := makeKeys(tc.keys)
		var want int64
		for i := range tc.n {
			want += int64(len(keys[i%int64(tc.keys)]))
		}
		assert.Equal(t, want, keyBytes(tc.n, tc.keys), "n=%d keys=%d", tc.n, tc.keys)
	}
}
