// A user's program of the sasl/awsmskiam module, built by
// scripts/release-check.sh from the published modules.
package main

import (
	"context"
	"crypto/tls"
	"log"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl/awsmskiam"
)

func main() {
	ctx := context.Background()
	mech, err := awsmskiam.FromDefaultChain(ctx, "us-east-1")
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.Config{
		Brokers: []string{"b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9098"},
		TLS:     &tls.Config{},
		SASL:    mech,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
}
