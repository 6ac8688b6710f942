package spool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	id := ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	v := EncodeHeader(id, 1<<40+5)
	gotID, seq, err := DecodeHeader(v)
	if err != nil || gotID != id || seq != 1<<40+5 {
		t.Fatalf("DecodeHeader = %v, %d, %v", gotID, seq, err)
	}
	if _, _, err := DecodeHeader(v[:23]); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("a short header: %v, want ErrBadHeader", err)
	}
}

func TestDeduper(t *testing.T) {
	a, b := ID{1}, ID{2}
	type rec struct {
		id   ID
		part int32
		seq  uint64
		dup  bool
	}
	cases := []struct {
		name   string
		window uint64
		recs   []rec
	}{
		{"in order, no copies", 0, []rec{{a, 0, 1, false}, {a, 0, 4, false}, {a, 0, 9, false}}},
		{"a replay re-sends a range", 0, []rec{
			{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 5, false}, // delivered, then the crash
			{a, 0, 3, true}, {a, 0, 5, true}, {a, 0, 7, false}, {a, 0, 9, false}, // replayed from 3
			{a, 0, 12, false}, // new after the replay
		}},
		{"the same sequences of another spool", 0, []rec{{a, 0, 5, false}, {b, 0, 5, false}, {b, 0, 5, true}}},
		{"partitions apart", 0, []rec{{a, 0, 5, false}, {a, 1, 3, false}, {a, 1, 6, false}, {a, 0, 5, true}, {a, 1, 3, true}}},
		{"a replay's copy on another partition", 0, []rec{
			{a, 0, 1, false}, {a, 1, 2, false}, {a, 0, 3, false}, // delivered, then the crash
			{a, 2, 1, true}, {a, 1, 3, true}, {a, 2, 2, true}, {a, 2, 4, false}, // replayed through the partitioner
		}},
		{"another partition's copy far behind the highest", 64, []rec{{a, 0, 1, false}, {a, 1, 500, false}, {a, 2, 1, true}}},
		// A record parked (partition -1) at the crash, never delivered,
		// replayed through the partitioner after 100 000 later records:
		// new, not a copy (the design before the runs dropped it: a record
		// more than 65 536 below its partition's highest was a copy).
		{"a parked record replayed far below the highest is new", 0, []rec{
			{a, 0, 1, false}, {a, 0, 2, false}, {a, 1, 100_000, false}, {a, 0, 100_001, false},
			{a, 0, 3, false}, {a, 0, 3, true}, {a, 1, 2, true},
		}},
		// Window 512: the 2 highest blocks of 512 sequences with a record.
		{"a copy below the window passes as new, never an unseen record dropped", 512, []rec{
			{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 1200, false}, {a, 0, 1600, false}, // blocks 0, 2, 3: 0 forgotten
			{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 1200, true}, {a, 0, 1100, false}, {a, 0, 1100, true},
		}},
		{"runs join", 0, []rec{{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 2, false}, {a, 0, 9, false}, {a, 0, 7, false}, {a, 0, 1, true}, {a, 0, 8, false}, {a, 0, 3, true}}},
		{"a retry behind a later record, inside the window", 0, []rec{{a, 0, 5, false}, {a, 0, 9, false}, {a, 0, 7, false}, {a, 0, 7, true}}},
		// Window 64: sequences 137 to 200 are remembered once 200 is seen.
		{"far below the highest, unseen: new; a block between kept ones", 512, []rec{
			{a, 0, 1, false}, {a, 0, 5000, false}, {a, 0, 4000, false}, {a, 0, 1, false}, {a, 0, 4000, true}, {a, 0, 5000, true}, {a, 0, 1, false},
		}},
		// A crash makes the spool's sequences jump (2^20 reserved ahead):
		// the blocks skip the gap, the records before it are kept.
		{"a jump keeps the records before it", 512, []rec{
			{a, 0, 10, false}, {a, 0, 11, false}, {a, 0, 1 << 30, false}, {a, 0, 11, true}, {a, 0, 12, false},
			{a, 0, 1<<30 - 1, false}, {a, 0, 11, false}, {a, 0, 1 << 30, true}, {a, 0, 1<<30 - 1, true},
		}},
		{"the window rounds up to 512", 10, []rec{{a, 0, 1, false}, {a, 0, 600, false}, {a, 0, 1, true}, {a, 0, 1100, false}, {a, 0, 1, false}, {a, 0, 600, true}}},
		{"another partition's copy below its window passes", 512, []rec{
			{a, 0, 1, false}, {a, 0, 1100, false}, {a, 0, 1600, false}, {a, 1, 1, false}, {a, 1, 1100, true}, {a, 1, 1, true},
		}},
		{"shifts across words", 256, []rec{{a, 0, 0, false}, {a, 0, 2, false}, {a, 0, 70, false}, {a, 0, 130, false}, {a, 0, 2, true}, {a, 0, 1, false}, {a, 0, 0, true}, {a, 0, 69, false}, {a, 0, 70, true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Deduper{Window: tc.window}
			for i, r := range tc.recs {
				dup, err := d.Duplicate("t", r.part, EncodeHeader(r.id, r.seq))
				if err != nil {
					t.Fatal(err)
				}
				if dup != r.dup {
					t.Fatalf("record %d (spool %x, partition %d, sequence %d): duplicate %v, want %v", i, r.id[0], r.part, r.seq, dup, r.dup)
				}
			}
		})
	}
	var d Deduper
	if dup, err := d.Duplicate("t", 0, nil); dup || err != nil {
		t.Fatalf("a record without the header: %v, %v", dup, err)
	}
	if _, err := d.Duplicate("t", 0, []byte("short")); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("a bad header: %v, want ErrBadHeader", err)
	}
}

// TestDeduperPartitionAfterPartition is the real-Kafka crash run's shape
// (issue 34): 4 partitions, sequence s on partition s mod 4, a crash
// after which the last 1 000 records of each partition are sent again
// behind them, and the consumer reading one partition to its end, then
// the next. The runs design kept only the last 65 536 records (each one
// a run of its own): the copies of the partitions read later passed.
func TestDeduperPartitionAfterPartition(t *testing.T) {
	const parts, perPart, copies = 4, 200_000, 1_000
	cases := []struct {
		name   string
		window uint64
		crash  uint64 // the first sequence after the crash (all: at the end)
	}{
		{"a crash in the middle, default window", 0, parts * perPart / 2},
		{"a crash at the end, default window", 0, parts * perPart},
		{"a crash in the middle, window 65 536", 1 << 16, parts * perPart / 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Deduper{Window: tc.window}
			id := ID{9}
			originals, dropped := 0, 0
			for p := range uint64(parts) {
				// Partition p's log: its records before the crash, copies
				// of the last 1 000 of them, its records after the crash.
				var before, after []uint64
				for s := p; s < parts*perPart; s += parts {
					if s < tc.crash {
						before = append(before, s)
					} else {
						after = append(after, s)
					}
				}
				log := slices.Concat(before, before[len(before)-copies:], after)
				for i, s := range log {
					isCopy := i >= len(before) && i < len(before)+copies
					dup, err := d.Duplicate("t", int32(p), EncodeHeader(id, s))
					if err != nil {
						t.Fatal(err)
					}
					if !isCopy {
						originals++
						if dup {
							t.Fatalf("partition %d: original sequence %d dropped", p, s)
						}
					} else if dup {
						dropped++
					}
				}
			}
			if originals != parts*perPart || dropped != parts*copies {
				t.Fatalf("%d originals kept (want %d), %d copies dropped of %d", originals, parts*perPart, dropped, parts*copies)
			}
		})
	}
}

// TestDeduperParkedRecordFarBelow: a record parked at the crash (its
// partition unknown) and replayed to a partition more than Window/2
// below that partition's highest is new; a copy of it on the partition
// it first went to (a second replay) or on the same one is dropped.
func TestDeduperParkedRecordFarBelow(t *testing.T) {
	for _, window := range []uint64{0, 1 << 16} {
		w := window
		if w == 0 {
			w = DefaultDedupWindow
		}
		t.Run(fmt.Sprintf("window %d", w), func(t *testing.T) {
			d := &Deduper{Window: window}
			id := ID{3}
			const parked = 10
			see := func(part int32, seq uint64) bool {
				dup, err := d.Duplicate("t", part, EncodeHeader(id, seq))
				if err != nil {
					t.Fatal(err)
				}
				return dup
			}
			// Everything but the parked record, on partitions 0 and 1.
			high := parked + w/2 + 1000
			for s := uint64(0); s <= high; s++ {
				if s != parked && see(int32(s%2), s) {
					t.Fatalf("original %d dropped", s)
				}
			}
			if see(0, parked) {
				t.Fatalf("the parked record, %d below its new partition's highest (window %d), dropped", high-parked, w)
			}
			if !see(1, parked) {
				t.Fatal("its copy on another partition kept")
			}
			if !see(0, parked) {
				t.Fatal("its copy on the same partition kept")
			}
		})
	}
}

// TestDeduperAgreesWithAMap: random sequences over 3 partitions and 2
// spool IDs, with a rising base and jumps ahead, give the answers of a
// model that keeps every sequence seen per partition in a map: a
// duplicate exactly when some partition of the topic saw the sequence and
// its block of 512 is among the Window/512+1 highest blocks that
// partition had a record in.
func TestDeduperAgreesWithAMap(t *testing.T) {
	cases := []struct {
		name         string
		window       uint64
		span, rise   uint64 // sequences from [base, base+span); the base rises by one every rise records
		jump         uint64 // now and then a record jumps this far above the base
		records, ids int
	}{
		{"window 512, narrow", 512, 1500, 1, 3000, 1_000, 1},
		{"window 512, wide", 512, 2500, 2, 1 << 20, 20_000, 2},
		{"window 5000, jumps", 5000, 30_000, 1, 1 << 22, 50_000, 2},
		{"default window", 0, 200_000, 1, 1 << 21, 50_000, 2},
	}
	type key struct {
		id   ID
		part int32
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocks := dedupBlocks(tc.window)
			rng := rand.New(rand.NewPCG(7, tc.window))
			d := &Deduper{Window: tc.window}
			seen := map[key]map[uint64]bool{}
			touched := map[key][]uint64{} // sorted blocks with a record
			dups := 0
			for i := range tc.records {
				id := ID{byte(rng.IntN(tc.ids))}
				part := int32(rng.IntN(3))
				seq := uint64(i)/tc.rise + rng.Uint64N(tc.span)
				if rng.IntN(50) == 0 {
					seq += tc.jump
				}
				want := false
				for p := range int32(3) {
					k := key{id, p}
					bs := touched[k]
					j, _ := slices.BinarySearch(bs, seq/512)
					if seen[k][seq] && len(bs)-j <= blocks {
						want = true
					}
				}
				got, err := d.Duplicate("t", part, EncodeHeader(id, seq))
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("record %d (spool %d, partition %d, sequence %d): duplicate %v, the map says %v", i, id[0], part, seq, got, want)
				}
				if got {
					dups++
				}
				k := key{id, part}
				if seen[k] == nil {
					seen[k] = map[uint64]bool{}
				}
				seen[k][seq] = true
				if j, found := slices.BinarySearch(touched[k], seq/512); !found {
					touched[k] = slices.Insert(touched[k], j, seq/512)
				}
			}
			if dups == 0 || dups == tc.records {
				t.Fatalf("%d duplicates of %d records: the case tests nothing", dups, tc.records)
			}
		})
	}
}

// TestDeduperCopiesAfterCrashJumps is the offline crash run's shape: the
// spool's sequences jump 2^20 (its reservation) at each restart, and a
// record of round 0 can be replayed after round 2's first records (round
// 1 crashed before its replay ended). 4 partitions, sequence s of a round
// on partition s mod 4, read partition after partition. A window of 2^20
// sequences below the highest let the copies pass; the blocks skip the
// gaps.
func TestDeduperCopiesAfterCrashJumps(t *testing.T) {
	const parts, perRound, copies, jump = 4, 40_000, 500, 1 << 20
	var d Deduper
	id := ID{4}
	dropped := 0
	for p := range uint64(parts) {
		var log []uint64
		var round0 []uint64
		for r := range uint64(3) {
			base := r * (perRound + jump)
			for s := base + p; s < base+perRound; s += parts {
				log = append(log, s)
				if r == 0 {
					round0 = append(round0, s)
				}
			}
		}
		cp := round0[len(round0)-copies:]
		log = slices.Concat(log, cp)
		for i, s := range log {
			dup, err := d.Duplicate("t", int32(p), EncodeHeader(id, s))
			if err != nil {
				t.Fatal(err)
			}
			isCopy := i >= len(log)-copies
			if dup && !isCopy {
				t.Fatalf("partition %d: original %d dropped", p, s)
			}
			if dup {
				dropped++
			}
		}
	}
	if dropped != parts*copies {
		t.Fatalf("%d copies dropped of %d", dropped, parts*copies)
	}
}
