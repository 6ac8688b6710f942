package spool

import (
	"testing"
	"unsafe"
)

// BenchmarkDeduper feeds one spool ID and topic: "in order" every record
// on partition 0, in sequence order; "interleaved" sequence s on
// partition s mod 4, the partitions read one after the other, 2^17
// records each (the real-Kafka crash run's shape: each record's
// neighbours in sequence are on other partitions), so that every record
// also tests the rings of the partitions read before. It reports the
// memory per partition (bytes/partition).
func BenchmarkDeduper(b *testing.B) {
	id := ID{7}
	const parts, perPart = 4, 1 << 17
	patterns := []struct {
		name  string
		parts uint64
	}{
		{"in order", 1},
		{"interleaved", parts},
	}
	for _, p := range patterns {
		b.Run(p.name, func(b *testing.B) {
			// Record i: its partition and sequence, the pattern repeated
			// with sequences rising past each round.
			round := uint64(parts * perPart)
			at := func(i uint64) (int32, uint64) {
				base := i / round * round
				j := i % round
				if p.parts == 1 {
					return 0, base + j
				}
				part := j / perPart
				return int32(part), base + (j%perPart)*parts + part
			}
			headers := make([][]byte, round)
			partOf := make([]int32, round)
			for i := range headers {
				part, seq := at(uint64(i))
				headers[i], partOf[i] = EncodeHeader(id, seq), part
			}
			var d Deduper
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h, part := headers[uint64(i)%round], partOf[uint64(i)%round]
				if uint64(i) >= round {
					var seq uint64
					part, seq = at(uint64(i))
					h = EncodeHeader(id, seq)
				}
				if _, err := d.Duplicate("t", part, h); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var bytes, n int
			for _, tr := range d.topics {
				for _, r := range tr.parts {
					bytes += int(unsafe.Sizeof(seqBlock{})) * len(r.ring)
					n++
				}
			}
			b.ReportMetric(float64(bytes)/float64(n), "bytes/partition")
		})
	}
}

// TestDeduperForget: Forget drops one spool ID's memory on every topic
// (a copy of its record is then new) and keeps the others'.
func TestDeduperForget(t *testing.T) {
	a, b := ID{1}, ID{2}
	var d Deduper
	for _, id := range []ID{a, b} {
		for _, topic := range []string{"t", "u"} {
			if dup, _ := d.Duplicate(topic, 0, EncodeHeader(id, 7)); dup {
				t.Fatalf("the first record of %x on %s is a duplicate", id[0], topic)
			}
		}
	}
	d.Forget(a)
	cases := []struct {
		id    ID
		topic string
		dup   bool
	}{{a, "t", false}, {a, "u", false}, {b, "t", true}, {b, "u", true}}
	for _, tc := range cases {
		if dup, _ := d.Duplicate(tc.topic, 0, EncodeHeader(tc.id, 7)); dup != tc.dup {
			t.Fatalf("after Forget(%x): a copy from %x on %s: duplicate %v, want %v", a[0], tc.id[0], tc.topic, dup, tc.dup)
		}
	}
	if n := len(d.topics); n != 4 {
		t.Fatalf("%d spool IDs and topics remembered, want 4", n)
	}
}
