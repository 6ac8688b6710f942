package spool_test

import (
	"context"
	"fmt"
	"os"

	"github.com/samsa-go/samsa/spool"
)

// A spool keeps what was appended until it is acknowledged, across a
// restart.
func Example() {
	dir, _ := os.MkdirTemp("", "spool-example")
	defer os.RemoveAll(dir)

	s, err := spool.Open(spool.Options{Dir: dir, Sync: spool.SyncAlways})
	if err != nil {
		panic(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if _, err := s.Append(context.Background(), &spool.Record{Topic: "events", Partition: 0, Value: []byte(v)}); err != nil {
			panic(err)
		}
	}
	s.Ack(1) // "b" was delivered; acks may come in any order
	s.Close()

	s, err = spool.Open(spool.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for e, err := range s.Unacked() {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Seq, e.Topic, e.Partition, string(e.Value))
	}
	// Output:
	// 0 events 0 a
	// 2 events 0 c
}

// A consumer drops the copies that a replay after a crash sent again.
func ExampleDeduper() {
	id := spool.ID{0x5a}
	var d spool.Deduper
	// What the consumer reads from partition 0: sequences 4 and 9 were
	// delivered, the producer crashed before it knew, and replayed them.
	for _, seq := range []uint64{4, 9, 4, 9, 12} {
		dup, err := d.Duplicate("events", 0, spool.EncodeHeader(id, seq))
		if err != nil {
			panic(err)
		}
		fmt.Println(seq, dup)
	}
	// Output:
	// 4 false
	// 9 false
	// 4 true
	// 9 true
	// 12 false
}
