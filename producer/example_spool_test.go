package producer_test

import (
	"context"
	"fmt"
	"os"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/spool"
)

// With Config.Spool every record is written to a log on disk before it is
// sent: Persisted says it is there (it survives a crash), Wait that the
// broker has it. Each record carries the samsa-spool header (the spool's
// ID and the record's sequence) for spool.Deduper, and once delivered it
// is acknowledged: nothing is left to send again.
func ExampleFuture_Persisted() {
	cluster := startCluster("orders", 1)
	defer cluster.Close()
	dir, err := os.MkdirTemp("", "spool")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	p, err := producer.New(producer.Config{Brokers: cluster.Addrs(), Spool: &producer.SpoolConfig{Dir: dir}})
	if err != nil {
		panic(err)
	}
	f := p.Send(ctx, &producer.Record{Topic: "orders", Value: []byte("order 1")})
	<-f.Persisted()
	fmt.Println("persisted")
	md, err := f.Wait(ctx)
	if err != nil {
		fmt.Println("not delivered:", err)
		return
	}
	fmt.Printf("delivered: %s[%d] offset %d\n", md.Topic, md.Partition, md.Offset)
	if err := p.Close(ctx); err != nil {
		panic(err)
	}

	recs, err := cluster.Records("orders")
	if err != nil {
		panic(err)
	}
	for _, h := range recs[0].Headers {
		if h.Key == spool.HeaderKey {
			_, seq, _ := spool.DecodeHeader(h.Value)
			fmt.Println("spool sequence in the header:", seq)
		}
	}
	sp, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer sp.Close()
	fmt.Println("left to send again:", sp.Recovery().Unacked)
	// Output:
	// persisted
	// delivered: orders[0] offset 0
	// spool sequence in the header: 0
	// left to send again: 0
}
