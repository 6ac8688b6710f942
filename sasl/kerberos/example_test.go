package kerberos_test

import (
	"context"
	"log"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl/kerberos"
)

// A producer configured by a Java client's Kerberos properties alone: the
// import of this package registers GSSAPI for ConfigFromProperties. Not
// run: it needs a KDC and a cluster.
func Example_properties() {
	cfg, err := producer.ConfigFromProperties(map[string]string{
		"bootstrap.servers":          "broker1.example.com:9092",
		"security.protocol":          "SASL_PLAINTEXT",
		"sasl.mechanism":             "GSSAPI",
		"sasl.kerberos.service.name": "kafka",
		"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required ` +
			`useKeyTab=true storeKey=true keyTab="/etc/security/app.keytab" principal="app@EXAMPLE.COM";`,
		"java.security.krb5.conf": "/etc/krb5.conf",
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
}

// The same in code, with the ticket cache kinit writes (KRB5CCNAME, else
// /tmp/krb5cc_<uid>) before the keytab.
func ExampleNew() {
	mech, err := kerberos.New(kerberos.Options{
		Principal:      "app@EXAMPLE.COM",
		UseTicketCache: true,
		KeytabPath:     "/etc/security/app.keytab",
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.Config{
		Brokers: []string{"broker1.example.com:9092"},
		SASL:    mech,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
}
