package awsmskiam_test

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl/awsmskiam"
)

// An MSK cluster with IAM access control, with credentials from the AWS
// SDK's default chain (README's "Connecting securely"). Not run: it needs
// the cluster.
func Example() {
	ctx := context.Background()
	mech, err := awsmskiam.FromDefaultChain(ctx, "us-east-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := producer.New(producer.Config{
		Brokers: []string{"b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9098"},
		TLS:     &tls.Config{},
		SASL:    mech,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
}
