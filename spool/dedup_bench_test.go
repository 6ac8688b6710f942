package spool

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkDeduper feeds one spool ID and topic: "in order" one run that
// grows; "interleaved" partitions read one after the other (p0's even
// sequences, then p1's odd ones, 2^17 each), so that every odd record
// fills a gap between two runs (and the lowest fall below the window).
// Before the runs were kept in blocks, the interleaved pattern cost
// O(Window) per record (about 33 µs).
func BenchmarkDeduper(b *testing.B) {
	id := ID{7}
	const half = 1 << 17
	patterns := []struct {
		name string
		seq  func(i uint64) uint64
	}{
		{"in order", func(i uint64) uint64 { return i }},
		{"interleaved", func(i uint64) uint64 {
			base := i / (2 * half) * (2 * half)
			j := i % (2 * half)
			if j < half {
				return base + 2*j
			}
			return base + 2*(j-half) + 1
		}},
	}
	for _, p := range patterns {
		b.Run(p.name, func(b *testing.B) {
			headers := make([][]byte, 4*half)
			for i := range headers {
				headers[i] = EncodeHeader(id, p.seq(uint64(i)))
			}
			var d Deduper
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h := headers[i%len(headers)]
				if i >= len(headers) {
					h = EncodeHeader(id, p.seq(uint64(i)))
				}
				if _, err := d.Duplicate("t", 0, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refRuns is the set of runs as one sorted slice (the Deduper's former
// structure, O(w) per record): the model the blocks are checked against.
type refRuns struct{ runs []seqRun }

func (r *refRuns) see(seq, w uint64) bool {
	i := 0
	for i < len(r.runs) && r.runs[i].hi < seq {
		i++
	}
	if i < len(r.runs) && r.runs[i].lo <= seq {
		return true
	}
	joinsPrev := i > 0 && r.runs[i-1].hi+1 == seq
	joinsNext := i < len(r.runs) && seq+1 == r.runs[i].lo
	switch {
	case joinsPrev && joinsNext:
		r.runs[i-1].hi = r.runs[i].hi
		r.runs = append(r.runs[:i], r.runs[i+1:]...)
	case joinsPrev:
		r.runs[i-1].hi = seq
	case joinsNext:
		r.runs[i].lo = seq
	default:
		r.runs = append(r.runs[:i], append([]seqRun{{seq, seq}}, r.runs[i:]...)...)
		if uint64(len(r.runs)) > w {
			r.runs = r.runs[1:]
		}
	}
	return false
}

// TestDeduperBlocksAgreeWithASortedSlice: random sequences (gap fills,
// joins, runs below the window, trims) give the same answers as the
// plain sorted slice, and the blocks keep their shape: sorted,
// non-adjacent runs, at most blockRuns per block, every block but the
// last at least half full (the memory bound the doc states).
func TestDeduperBlocksAgreeWithASortedSlice(t *testing.T) {
	cases := []struct {
		name   string
		window uint64
		span   uint64 // sequences drawn from [0, span), plus a rising base
		rise   uint64 // the base rises by one every rise records (0: never)
	}{
		{"small window", 5, 40, 0},
		{"one block", blockRuns, 600, 0},
		{"many blocks", 3000, 12_000, 0},
		{"many blocks, rising", 2000, 9000, 3},
		{"window full, far below", 700, 100_000, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, tc.window))
			var got seqRuns
			var want refRuns
			for i := range 80_000 {
				seq := rng.Uint64N(tc.span)
				if tc.rise > 0 {
					seq += uint64(i) / tc.rise
				}
				if g, w := got.see(seq, tc.window), want.see(seq, tc.window); g != w {
					t.Fatalf("record %d, sequence %d: duplicate %v, the sorted slice says %v", i, seq, g, w)
				}
				if i%997 == 0 {
					checkBlocks(t, &got, want.runs)
				}
			}
			checkBlocks(t, &got, want.runs)
		})
	}
}

func checkBlocks(t *testing.T, rs *seqRuns, want []seqRun) {
	t.Helper()
	var all []seqRun
	for j, blk := range rs.blocks {
		if len(blk) == 0 || len(blk) > blockRuns || cap(blk) != blockRuns+1 || j < len(rs.blocks)-1 && len(blk) < blockRuns/2 {
			t.Fatalf("block %d of %d holds %d runs (capacity %d)", j, len(rs.blocks), len(blk), cap(blk))
		}
		all = append(all, blk...)
	}
	if len(all) != rs.n {
		t.Fatalf("%d runs counted, %d in the blocks", rs.n, len(all))
	}
	if !slices.Equal(all, want) {
		t.Fatalf("the blocks hold %d runs, the sorted slice %d: they differ", len(all), len(want))
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
