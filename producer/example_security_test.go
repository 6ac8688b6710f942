package producer_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// A Confluent Cloud style client.properties (SASL_SSL with PLAIN) works
// unchanged: LoadProperties reads it and ConfigFromProperties maps it, as
// in README's "Connecting securely".
func ExampleLoadProperties() {
	dir, _ := os.MkdirTemp("", "samsa-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "client.properties")
	_ = os.WriteFile(path, []byte(`# from the Confluent Cloud console
bootstrap.servers=pkc-xxxxx.us-east-1.aws.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='API_KEY' password='API_SECRET';
client.dns.lookup=use_all_dns_ips
acks=all
`), 0o600)

	props, err := producer.LoadProperties(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := producer.ConfigFromProperties(props)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Brokers, "TLS:", cfg.TLS != nil)
	fmt.Println(cfg.SASL) // never the password
	// Output:
	// [pkc-xxxxx.us-east-1.aws.confluent.cloud:9092] TLS: true
	// PLAIN(user="API_KEY", password=[redacted])
}

// The same cluster configured in code (README's "Connecting securely").
// Not run: it needs the cluster.
func Example_connectSecurely() {
	p, err := producer.New(producer.Config{
		Brokers: []string{"pkc-xxxxx.us-east-1.aws.confluent.cloud:9092"},
		TLS:     &tls.Config{},
		SASL:    sasl.Plain(os.Getenv("CC_API_KEY"), os.Getenv("CC_API_SECRET")),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(context.Background())
}
