package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/samsa-go/samsa/internal/pkcs8"
)

// The algorithms an assertion is signed with (the JWS "alg" names).
const (
	AlgRS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256, an RSA key
	AlgES256 = "ES256" // ECDSA on P-256 with SHA-256, an EC key
)

// parseSigningKey reads the private key of a PEM file (or, as Java takes
// it, the bare base64 of a PKCS#8 key): PKCS#8 ("PRIVATE KEY"), PKCS#1
// ("RSA PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS#8 encrypted with
// PBES2 ("ENCRYPTED PRIVATE KEY", PBKDF2 with HMAC-SHA-1/224/256/384/512
// and AES-128/192/256-CBC: what OpenSSL 1.1+ and Java write). Other
// blocks (a certificate) are skipped. The key must suit alg: RSA (2048
// bits at least) for RS256, P-256 for ES256. No error holds a byte of the
// key or of the passphrase.
func parseSigningKey(data []byte, passphrase, alg string) (crypto.Signer, error) {
	var der []byte
	var kind string
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			if _, legacy := b.Headers["DEK-Info"]; legacy {
				return nil, errors.New("the key is encrypted the legacy OpenSSL way (Proc-Type/DEK-Info), which is not supported: convert it with openssl pkcs8 -topk8 -v2 aes256")
			}
			der, kind = b.Bytes, b.Type
		}
		if der != nil {
			break
		}
	}
	if der == nil {
		// Java strips the PEM lines and decodes the rest as base64.
		raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(data)), ""))
		if err != nil || len(raw) == 0 {
			return nil, errors.New("no PEM private key (PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY) in it")
		}
		der, kind = raw, "PRIVATE KEY"
		if passphrase != "" {
			kind = "ENCRYPTED PRIVATE KEY"
		}
	}
	if kind == "ENCRYPTED PRIVATE KEY" {
		if passphrase == "" {
			return nil, errors.New("the key is encrypted and no passphrase is set (sasl.oauthbearer.assertion.private.key.passphrase)")
		}
		var err error
		if der, err = pkcs8.Decrypt(der, passphrase); err != nil {
			return nil, err
		}
		kind = "PRIVATE KEY"
	} else if passphrase != "" {
		return nil, errors.New("a passphrase is set but the key is not encrypted (an ENCRYPTED PRIVATE KEY is expected, as Java does)")
	}
	var key any
	var err error
	switch kind {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(der)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(der)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("the %s does not parse", strings.ToLower(kind))
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if alg != AlgRS256 {
			return nil, fmt.Errorf("the key is an RSA key, which does not sign %s (use RS256)", alg)
		}
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("the RSA key has %d bits; RS256 needs 2048 at least", k.N.BitLen())
		}
		return k, nil
	case *ecdsa.PrivateKey:
		if alg != AlgES256 {
			return nil, fmt.Errorf("the key is an EC key, which does not sign %s (use ES256)", alg)
		}
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("the EC key is on %s; ES256 needs P-256", k.Curve.Params().Name)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("the key is a %T, which signs neither RS256 nor ES256", key)
	}
}
