package spool

import (
	"errors"
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
		// new, not a copy (it was dropped when the window was 65 536
		// sequences below each partition's highest).
		{"a parked record replayed far below the highest is new", 0, []rec{
			{a, 0, 1, false}, {a, 0, 2, false}, {a, 1, 100_000, false}, {a, 0, 100_001, false},
			{a, 0, 3, false}, {a, 0, 3, true}, {a, 1, 2, true},
		}},
		{"past Window runs the oldest is forgotten: its copy passes, never an unseen record dropped", 2, []rec{
			{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 5, false}, {a, 0, 1, false}, {a, 0, 5, true}, {a, 0, 4, false}, {a, 0, 4, true},
		}},
		{"runs join", 3, []rec{{a, 0, 1, false}, {a, 0, 3, false}, {a, 0, 2, false}, {a, 0, 9, false}, {a, 0, 7, false}, {a, 0, 1, true}, {a, 0, 8, false}, {a, 0, 3, true}}},
		{"a retry behind a later record, inside the window", 0, []rec{{a, 0, 5, false}, {a, 0, 9, false}, {a, 0, 7, false}, {a, 0, 7, true}}},
		{"far below the highest, unseen: new", 64, []rec{{a, 0, 1, false}, {a, 0, 200, false}, {a, 0, 150, false}, {a, 0, 100, false}, {a, 0, 137, false}, {a, 0, 136, false}, {a, 0, 100, true}}},
		{"a jump far ahead forgets nothing", 64, []rec{{a, 0, 10, false}, {a, 0, 11, false}, {a, 0, 500, false}, {a, 0, 11, true}, {a, 0, 499, false}}},
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
