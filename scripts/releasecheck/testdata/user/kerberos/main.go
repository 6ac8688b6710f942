// A user's program of the sasl/kerberos module, built by
// scripts/release-check.sh from the published modules: GSSAPI from Java's
// properties alone, the package imported for its registration, and the
// same mechanism in code.
package main

import (
	"context"
	"log"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl/kerberos"
)

func main() {
	ctx := context.Background()
	cfg, err := producer.ConfigFromProperties(map[string]string{
		"bootstrap.servers":          "broker1.example.com:9092",
		"security.protocol":          "SASL_PLAINTEXT",
		"sasl.mechanism":             "GSSAPI",
		"sasl.kerberos.service.name": "kafka",
		"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required ` +
			`useKeyTab=true keyTab="/etc/security/app.keytab" principal="app@EXAMPLE.COM";`,
	})
	if err != nil {
		log.Fatal(err)
	}
	if cfg.SASL, err = kerberos.New(kerberos.Options{
		Principal:  "app@EXAMPLE.COM",
		KeytabPath: "/etc/security/app.keytab",
	}); err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
}
