package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

func TestSecurityFlags(t *testing.T) {
	parse := func(args ...string) (*testbroker.Security, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		sf := addSecurityFlags(fs)
		require.NoError(t, fs.Parse(args))
		sec, _, err := sf.build("127.0.0.1")
		return sec, err
	}
	sec, err := parse()
	require.NoError(t, err)
	assert.Nil(t, sec)

	dir := t.TempDir()
	sec, err = parse("-secure-protocol", "sasl_ssl", "-secure-port", "19093", "-tls-dir", dir,
		"-sasl-users", "PLAIN:alice:a:b, scram-sha-512:bob:pw", "-sasl-session-lifetime", "1m")
	require.NoError(t, err)
	assert.Equal(t, []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLSSL, BasePort: 19093}}, sec.Listeners)
	assert.Equal(t, []testbroker.User{{Mechanism: "PLAIN", Name: "alice", Password: "a:b"}, {Mechanism: "SCRAM-SHA-512", Name: "bob", Password: "pw"}}, sec.Users)
	assert.NotNil(t, sec.TLS)
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	assert.Contains(t, string(pem), "BEGIN CERTIFICATE")

	_, err = parse("-sasl-users", "PLAIN:a:b")
	assert.Error(t, err, "users need a protocol")
	_, err = parse("-secure-protocol", "SASL_PLAINTEXT", "-sasl-users", "PLAIN")
	assert.Error(t, err)
}
