package pkcs8

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encrypted writes a P-256 key encrypted by openssl with the given
// cipher and PRF, and returns its DER and the plain PKCS#8 DER.
func encrypted(t *testing.T, cipher, prf, pass string) (enc, plain []byte) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	plain, err = x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pem"), filepath.Join(dir, "out.pem")
	require.NoError(t, os.WriteFile(in, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: plain}), 0o600))
	cmd := exec.Command("openssl", "pkcs8", "-topk8", "-v2", cipher, "-v2prf", prf, "-in", in, "-out", out, "-passout", "pass:"+pass)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	pb, err := os.ReadFile(out)
	require.NoError(t, err)
	blk, _ := pem.Decode(pb)
	require.NotNil(t, blk)
	require.Equal(t, "ENCRYPTED PRIVATE KEY", blk.Type)
	return blk.Bytes, plain
}

func TestDecrypt(t *testing.T) {
	const pass = "pass-phrase-3"
	for _, tc := range []struct{ cipher, prf string }{
		{"aes-256-cbc", "hmacWithSHA256"},
		{"aes-128-cbc", "hmacWithSHA1"},
		{"aes-192-cbc", "hmacWithSHA512"},
		{"aes-256-cbc", "hmacWithSHA384"},
		{"aes-128-cbc", "hmacWithSHA224"},
	} {
		t.Run(tc.cipher+"/"+tc.prf, func(t *testing.T) {
			enc, plain := encrypted(t, tc.cipher, tc.prf, pass)
			got, err := Decrypt(enc, pass)
			require.NoError(t, err)
			assert.Equal(t, plain, got)

			_, err = Decrypt(enc, "wrong-"+pass)
			require.ErrorIs(t, err, ErrWrongPassphrase)
			assert.NotContains(t, err.Error(), pass)
		})
	}
	t.Run("not PBES2", func(t *testing.T) {
		_, err := Decrypt([]byte{0x30, 0x00}, pass)
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrWrongPassphrase))
	})
}

// FuzzDecrypt: no input panics or loops; an error never quotes the
// passphrase.
func FuzzDecrypt(f *testing.F) {
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00}, "p")
	f.Fuzz(func(t *testing.T, der []byte, pass string) {
		_, err := Decrypt(der, pass)
		if err != nil && len(pass) > 8 && strings.Contains(err.Error(), pass) {
			t.Fatalf("the error quotes the passphrase: %v", err)
		}
	})
}
