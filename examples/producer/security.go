package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

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
	fs.StringVar(&sf.properties, "properties", "", "a Java or librdkafka producer .properties `file` (client.properties): every producer key in it is used (bootstrap.servers, security.protocol, sasl.*, ssl.*, compression.type, linger.ms, buffer.memory...); a flag given on the command line wins over the file, and the summary says where each setting came from and which keys samsa ignores")
	return sf
}

// apply sets o's TLS and SASL from the -properties file, then from the
// flags, reports where they came from, and returns what is wrong with the
// flags.
func (sf *securityFlags) apply(o *options, src sources, report func(name, flagName string, from int, value any)) []string {
	var bad []string
	tlsFrom, saslFrom := fromDefault, fromDefault
	if o.file != nil {
		o.tls, o.sasl = o.file.cfg.TLS, o.file.cfg.SASL
		if o.tls != nil {
			tlsFrom = fromFile
		}
		if o.sasl != nil {
			saslFrom = fromFile
		}
	}
	defer func() {
		tlsFlag := "tls"
		if src.set["tls-ca"] {
			tlsFlag = "tls-ca"
		}
		report("tls", tlsFlag, tlsFrom, map[bool]string{true: "enabled", false: "disabled"}[o.tls != nil])
		mech := ""
		if o.sasl != nil {
			mech = o.sasl.Name()
		}
		report("sasl", "sasl-mechanism", saslFrom, mech)
	}()
	if sf.tls || sf.tlsCA != "" {
		tlsFrom = fromFlag
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
	saslFrom = fromFlag
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
