// A user's program of the observe/samsaotel module, built by
// scripts/release-check.sh from the published modules.
package main

import (
	"context"
	"log"

	"github.com/samsa-go/samsa/observe/samsaotel"
	"github.com/samsa-go/samsa/producer"
)

func main() {
	ctx := context.Background()
	meter, err := samsaotel.NewMeterHook()
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Hooks:   []producer.Hook{samsaotel.NewTracer(), meter},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := samsaotel.RegisterMetrics(p); err != nil {
		log.Print(err)
		return
	}
	p.Send(ctx, &producer.Record{Topic: "events", Value: []byte("hello")})
}
