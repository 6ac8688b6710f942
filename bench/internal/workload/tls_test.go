package workload

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// tlsFake is a fakeClient that connects over TLS.
type tlsFake struct {
	fakeClient
	caFile string
	cfg    *tls.Config
}

func (f *tlsFake) UseTLS(caFile string, cfg *tls.Config) { f.caFile, f.cfg = caFile, cfg }

func TestRunTLSCA(t *testing.T) {
	ca, err := testbroker.NewTestCA()
	require.NoError(t, err)
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caPath, ca.CertPEM, 0o644))
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o644))
	other, err := testbroker.NewTestCA()
	require.NoError(t, err)

	// leaf returns a certificate for 127.0.0.1 signed by signer.
	leaf := func(signer *testbroker.TestCA) *x509.Certificate {
		certPEM, _, err := signer.Issue("127.0.0.1")
		require.NoError(t, err)
		blk, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(blk.Bytes)
		require.NoError(t, err)
		return c
	}
	base := []string{"-brokers", "127.0.0.1:1", "-workload", "100B", "-records", "100"}

	t.Run("a TLS client gets a config trusting only the CA", func(t *testing.T) {
		fc := &tlsFake{}
		var out bytes.Buffer
		require.NoError(t, run("fake", fc, append(base, "-tls-ca", caPath), &out))
		assert.Equal(t, caPath, fc.caFile)
		require.NotNil(t, fc.cfg)
		assert.Empty(t, fc.cfg.ServerName, "the library sets it from the broker's host")
		assert.False(t, fc.cfg.InsecureSkipVerify)
		opts := x509.VerifyOptions{Roots: fc.cfg.RootCAs, DNSName: "127.0.0.1"}
		_, err := leaf(ca).Verify(opts)
		assert.NoError(t, err, "a certificate from the CA verifies")
		_, err = leaf(other).Verify(opts)
		assert.Error(t, err, "one from another CA does not")
	})
	t.Run("without -tls-ca no TLS", func(t *testing.T) {
		fc := &tlsFake{}
		var out bytes.Buffer
		require.NoError(t, run("fake", fc, base, &out))
		assert.Nil(t, fc.cfg)
	})
	cases := []struct {
		name   string
		client Client
		ca     string
		err    string
	}{
		{"a client without TLS", &fakeClient{}, caPath, "does not connect over TLS"},
		{"no such file", &tlsFake{}, filepath.Join(dir, "missing.pem"), "missing.pem"},
		{"not PEM", &tlsFake{}, junk, "no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run("fake", tc.client, append(base, "-tls-ca", tc.ca), &out)
			require.ErrorContains(t, err, tc.err)
			assert.Empty(t, out.String(), "no result line without a run")
		})
	}
}
