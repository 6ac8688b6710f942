package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestKcatSASLSSL produces and consumes with kcat (librdkafka) through the
// test broker's SASL_SSL listener with each SASL mechanism both support
// (librdkafka's OAUTHBEARER without an identity provider sends unsecured
// JWTs, which the test broker does not validate), verifying the broker's
// certificate against the test's CA file as a real deployment would. This
// shows that the test broker's TLS and SASL match a client we did not
// write, so samsa's tests against it mean something.
func TestKcatSASLSSL(t *testing.T) {
	kcatPath(t)
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	srv, err := ca.ServerConfig("127.0.0.1", "localhost")
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	c := startCluster(t, testbroker.Config{Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLSSL}},
		TLS:       srv,
		Users: []testbroker.User{
			{Mechanism: testbroker.MechPlain, Name: "alice", Password: "alice-pw"},
			{Mechanism: testbroker.MechScramSHA256, Name: "bob", Password: "bob-pw"},
			{Mechanism: testbroker.MechScramSHA512, Name: "carol", Password: "carol-pw"},
		},
	}})
	brokers := strings.Join(c.ListenerAddrs(testbroker.SASLSSL), ",")
	tests := []struct{ mech, user, pass string }{
		{"PLAIN", "alice", "alice-pw"},
		{"SCRAM-SHA-256", "bob", "bob-pw"},
		{"SCRAM-SHA-512", "carol", "carol-pw"},
	}
	for _, tt := range tests {
		ok := t.Run(tt.mech, func(t *testing.T) {
			topic := "kcat-sasl-" + strings.ToLower(tt.mech)
			require.NoError(t, c.CreateTopic(topic, 3))
			security := []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + tt.mech,
				"-X", "sasl.username=" + tt.user, "-X", "sasl.password=" + tt.pass, "-X", "ssl.ca.location=" + caFile}
			before := c.SecurityStats().Authentications
			const n = 100
			var in strings.Builder
			want := make([]string, 0, n)
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "k%d:v%d\n", i%7, i)
				want = append(want, fmt.Sprintf("k%d v%d", i%7, i))
			}
			runKcat(t, in.String(), append([]string{"-P", "-b", brokers, "-t", topic, "-K:"}, security...)...)
			out := runKcat(t, "", append([]string{"-C", "-b", brokers, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k %s\\n"}, security...)...)
			got := strings.Split(strings.TrimSpace(out), "\n")
			sort.Strings(got)
			sort.Strings(want)
			assert.Equal(t, want, got)
			assert.Greater(t, c.SecurityStats().Authentications, before, "kcat authenticated")
			assert.Zero(t, c.SecurityStats().Failures)
		})
		if !ok {
			return
		}
	}
}
