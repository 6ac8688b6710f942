package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// securityFlags are the flags for a secured cluster.
type securityFlags struct {
	tls                  bool
	tlsCA                string
	mechanism, user, pwd string
	properties           string
}

// passwordEnv is read when -sasl-password is not given, so that the
// password need not appear in the process list.
const passwordEnv = "SAMSA_SASL_PASSWORD"

func addSecurityFlags(fs *flag.FlagSet) *securityFlags {
	sf := &securityFlags{}
	fs.BoolVar(&sf.tls, "tls", false, "connect with TLS, trusting the system's CAs (implied by -tls-ca)")
	fs.StringVar(&sf.tlsCA, "tls-ca", "", "PEM `file` of the CAs to trust, for TLS")
	fs.StringVar(&sf.mechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&sf.user, "sasl-user", "", "SASL user name")
	fs.StringVar(&sf.pwd, "sasl-password", "", "SASL password (default: $"+passwordEnv+")")
	fs.StringVar(&sf.properties, "properties", "", "a Java or librdkafka .properties `file` (client.properties): its bootstrap.servers (unless -brokers is given), security.protocol, sasl.* and ssl.* settings are used")
	return sf
}

// apply sets o's brokers, TLS and SASL from the flags, and returns what is
// wrong with them.
func (sf *securityFlags) apply(o *options) []string {
	var bad []string
	if sf.properties != "" {
		props, err := producer.LoadProperties(sf.properties)
		if err != nil {
			return append(bad, "-properties: "+err.Error())
		}
		cfg, err := producer.ConfigFromProperties(props)
		if err != nil {
			return append(bad, "-properties: "+err.Error())
		}
		if len(o.brokers) == 0 {
			o.brokers = cfg.Brokers
		}
		o.tls, o.sasl = cfg.TLS, cfg.SASL
	}
	if sf.tls || sf.tlsCA != "" {
		if o.tls == nil {
			o.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if sf.tlsCA != "" {
			pem, err := os.ReadFile(sf.tlsCA)
			if err != nil {
				bad = append(bad, "-tls-ca: "+err.Error())
			} else {
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					bad = append(bad, fmt.Sprintf("-tls-ca: %s holds no PEM certificate", sf.tlsCA))
				}
				o.tls.RootCAs = pool
			}
		}
	}
	if sf.mechanism == "" {
		if sf.user != "" || sf.pwd != "" {
			bad = append(bad, "-sasl-user and -sasl-password need -sasl-mechanism")
		}
		return bad
	}
	pwd := sf.pwd
	if pwd == "" {
		pwd = os.Getenv(passwordEnv)
	}
	if sf.user == "" || pwd == "" {
		return append(bad, "-sasl-mechanism needs -sasl-user and -sasl-password (or $"+passwordEnv+")")
	}
	switch strings.ToUpper(sf.mechanism) {
	case "PLAIN":
		o.sasl = sasl.Plain(sf.user, pwd)
	case "SCRAM-SHA-256":
		o.sasl = sasl.ScramSHA256(sf.user, pwd)
	case "SCRAM-SHA-512":
		o.sasl = sasl.ScramSHA512(sf.user, pwd)
	default:
		bad = append(bad, fmt.Sprintf("-sasl-mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", sf.mechanism))
	}
	return bad
}
