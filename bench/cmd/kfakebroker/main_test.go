package main

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batch returns a v2 record batch header of total length n (n >= 61) that
// declares records records; the body is zeros.
func batch(n, records int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b[8:12], uint32(n-12))
	binary.BigEndian.PutUint32(b[57:61], uint32(records))
	return b
}

func TestCountBatches(t *testing.T) {
	two := append(batch(100, 3), batch(61, 1)...)
	cases := []struct {
		name                     string
		recs                     []byte
		batches, records, nbytes int64
	}{
		{"none", nil, 0, 0, 0},
		{"one", batch(200, 7), 1, 7, 200},
		{"two", two, 2, 4, 161},
		{"a truncated tail is not counted", append(batch(80, 2), batch(90, 5)[:70]...), 1, 2, 80},
		{"a length below the header", batch(61, 1)[:40], 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, r, n := countBatches(tc.recs)
			assert.Equal(t, [3]int64{tc.batches, tc.records, tc.nbytes}, [3]int64{b, r, n})
		})
	}
}

func TestCountersLine(t *testing.T) {
	var c counters
	req := kmsg.NewPtrProduceRequest()
	tp := kmsg.NewProduceRequestTopic()
	for _, recs := range [][]byte{batch(100, 3), append(batch(70, 1), batch(61, 1)...)} {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = recs
		tp.Partitions = append(tp.Partitions, p)
	}
	req.Topics = append(req.Topics, tp)
	c.add(req)
	c.add(req)
	assert.Equal(t, "kfakebroker stats: produce=2 batches=6 records=10 bytes=462\n", c.line())
}
