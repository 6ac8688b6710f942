// Package kerberos is the GSSAPI SASL mechanism (Kerberos V5), for
// producer.Config.SASL or from properties. It lives in a Go module of its
// own (github.com/samsa-go/samsa/sasl/kerberos), over
// github.com/jcmturner/gokrb5, so that the samsa module never downloads a
// Kerberos library.
//
// # From properties
//
// Importing the package registers GSSAPI with
// sasl.RegisterMechanismFactory, so that producer.ConfigFromProperties
// builds it (with FromProperties) from the properties a Java client uses:
//
//	import _ "github.com/samsa-go/samsa/sasl/kerberos"
//
//	security.protocol=SASL_PLAINTEXT
//	sasl.mechanism=GSSAPI
//	sasl.kerberos.service.name=kafka
//	sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \
//	    useKeyTab=true keyTab="/etc/security/app.keytab" principal="app@EXAMPLE.COM";
//
// useTicketCache=true (with ticketCache="FILE", else KRB5CCNAME, else
// /tmp/krb5cc_<uid>) reads the ticket cache kinit writes instead, and
// librdkafka's sasl.kerberos.keytab and sasl.kerberos.principal work
// too. krb5.conf comes from java.security.krb5.conf (a property here),
// else KRB5_CONFIG, else /etc/krb5.conf. sasl.kerberos.kinit.cmd is
// refused: no command is run. FromProperties lists every key.
//
// # In code
//
//	mech, err := kerberos.New(kerberos.Options{
//		Principal:  "app@EXAMPLE.COM",
//		KeytabPath: "/etc/security/app.keytab",
//	})
//	if err != nil { ... }
//	p, err := producer.New(producer.Config{
//		Brokers: []string{"broker1.example.com:9092"},
//		SASL:    mech,
//	})
//
// # The exchange
//
// For every connection and every re-authentication (KIP-368: the broker's
// connections.max.reauth.ms), the mechanism asks the KDC for a fresh
// service ticket for SERVICE/host@REALM, host as the broker's address
// names it (Java and librdkafka do the same: dial the brokers by the
// names their principals have, not by IP address), and runs RFC 4752's
// exchange as Java's client does: an AP-REQ asking for mutual
// authentication, the broker's AP-REP checked, then the broker's offer of
// security layers, a wrap token checked with the session key, answered
// with a wrap token choosing no security layer (0x01, max size 0) and no
// authorization id. Session keys must be AES (RFC 4121's tokens); the
// broker must allow the "auth" quality of protection (Kafka's default).
//
// A refused login (an unknown principal, a key the KDC does not accept,
// a principal missing from the keytab, an expired ticket cache), a KDC
// that cannot be reached, or a broker refusing the ticket fails the
// exchange: the producer reports producer.ErrAuthentication.
//
// # Tickets
//
// The ticket-granting ticket is got on the first exchange and replaced
// when an exchange finds it past 80% to 85% of its lifetime (Java's
// sasl.kerberos.ticket.renew.window.factor and jitter), or close to its
// end: from the keytab by a new login, from a ticket cache by reading the
// cache again (a later kinit is picked up) and renewing a renewable ticket
// with the KDC. No goroutine runs in the background: a producer that
// closes leaves nothing running.
//
// Nothing here prints a key: %v of the mechanism names the principal, the
// files and the service; errors name files and principals.
package kerberos
