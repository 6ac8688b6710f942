package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestRunSecure runs the example against a cluster that only takes
// SASL_SSL, with the security flags and with a properties file.
func TestRunSecure(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1")
	require.NoError(t, err)
	c, err := testbroker.New(testbroker.Config{Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users: []testbroker.User{
			{Mechanism: testbroker.MechScramSHA256, Name: "bob", Password: "bob-pw"},
			{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-pw"},
		},
	}})
	require.NoError(t, err)
	defer c.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	props := filepath.Join(dir, "client.properties")
	require.NoError(t, os.WriteFile(props, []byte(`# Confluent Cloud style
bootstrap.servers=`+c.Addrs()[0]+`
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username='alice' password='alice-pw';
ssl.ca.location=`+caFile+`
`), 0o600))
	n := strconv.Itoa(testRecords)
	cases := []struct {
		name string
		args []string
	}{
		{"flags", []string{"-brokers", c.Addrs()[0], "-tls-ca", caFile, "-sasl-mechanism", "SCRAM-SHA-256", "-sasl-user", "bob", "-sasl-password", "bob-pw"}},
		{"properties", []string{"-properties", props}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, stderr, err := runJSON(t, context.Background(), append(tc.args, "-records", n, "-topic", "secure-"+tc.name)...)
			require.NoError(t, err, stderr)
			assert.Equal(t, int64(testRecords), s.Records)
			assert.Zero(t, s.Failed)
		})
	}

	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"-sasl-user", "bob"},
			{"-sasl-mechanism", "GSSAPI", "-sasl-user", "u", "-sasl-password", "p"},
			{"-sasl-mechanism", "PLAIN", "-sasl-user", "u"},
			{"-tls-ca", filepath.Join(dir, "missing.pem")},
			{"-properties", filepath.Join(dir, "missing.properties")},
		} {
			_, _, err := runJSON(t, context.Background(), args...)
			var ue usageError
			assert.ErrorAs(t, err, &ue, "%q", args)
		}
	})
}
