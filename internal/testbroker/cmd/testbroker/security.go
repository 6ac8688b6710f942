package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// securityFlags add a TLS and SASL listener to every broker.
type securityFlags struct {
	protocol string
	port     int
	users    string
	caDir    string
	lifetime time.Duration
}

func addSecurityFlags(fs *flag.FlagSet) *securityFlags {
	sf := &securityFlags{}
	fs.StringVar(&sf.protocol, "secure-protocol", "", "add a second listener to every broker with this protocol: SSL, SASL_PLAINTEXT or SASL_SSL (its addresses go to stderr)")
	fs.IntVar(&sf.port, "secure-port", 0, "port of broker 0's second listener; broker i listens on port+i (0: random ports)")
	fs.StringVar(&sf.users, "sasl-users", "", "comma-separated `MECHANISM:user:password` SASL users (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; OAUTHBEARER:principal:token)")
	fs.StringVar(&sf.caDir, "tls-dir", "", "`directory` to write the generated CA (ca.pem) to, for clients' ssl.ca.location; default: a temporary one")
	fs.DurationVar(&sf.lifetime, "sasl-session-lifetime", 0, "SASL session lifetime (KIP-368 connections.max.reauth.ms; 0: none)")
	return sf
}

// build returns the Security config for the flags (nil without
// -secure-protocol), and a line to print once the cluster runs.
func (sf *securityFlags) build(host string) (*testbroker.Security, func(*testbroker.Cluster), error) {
	if sf.protocol == "" {
		if sf.users != "" || sf.port != 0 {
			return nil, nil, fmt.Errorf("-sasl-users and -secure-port need -secure-protocol")
		}
		return nil, nil, nil
	}
	proto := strings.ToUpper(sf.protocol)
	sec := &testbroker.Security{
		Listeners:       []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: proto, BasePort: sf.port}},
		SessionLifetime: sf.lifetime,
	}
	for _, u := range strings.Split(sf.users, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		parts := strings.SplitN(u, ":", 3)
		if len(parts) != 3 {
			return nil, nil, fmt.Errorf("-sasl-users: %q is not MECHANISM:user:password", parts[0])
		}
		sec.Users = append(sec.Users, testbroker.User{Mechanism: strings.ToUpper(parts[0]), Name: parts[1], Password: parts[2]})
	}
	caPath := ""
	if proto == testbroker.SSL || proto == testbroker.SASLSSL {
		ca, err := testbroker.NewTestCA()
		if err != nil {
			return nil, nil, err
		}
		if sec.TLS, err = ca.ServerConfig(host, "localhost"); err != nil {
			return nil, nil, err
		}
		dir := sf.caDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "testbroker-tls"); err != nil {
				return nil, nil, err
			}
		}
		caPath = filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(caPath, ca.CertPEM, 0o644); err != nil {
			return nil, nil, err
		}
	}
	announce := func(c *testbroker.Cluster) {
		fmt.Fprintf(os.Stderr, "testbroker: %s listeners: %s\n", proto, strings.Join(c.ListenerAddrs(proto), ","))
		if caPath != "" {
			fmt.Fprintf(os.Stderr, "testbroker: CA certificate: %s\n", caPath)
		}
	}
	return sec, announce, nil
}
