package sasl

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// The algorithms an assertion is signed with (the JWS "alg" names).
const (
	AlgRS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256, an RSA key
	AlgES256 = "ES256" // ECDSA on P-256 with SHA-256, an EC key
)

// maxPBKDF2Iterations bounds the work an encrypted key file may ask for
// (OpenSSL's default is 2048, Java's keytool 10000).
const maxPBKDF2Iterations = 10_000_000

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
		if der, err = decryptPKCS8(der, passphrase); err != nil {
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

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// encryptedPrivateKeyInfo is PKCS#8's (RFC 5958 section 3).
type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

// pbes2Params is RFC 8018's PBES2-params.
type pbes2Params struct {
	KDF, Cipher pkix.AlgorithmIdentifier
}

// pbkdf2Params is RFC 8018's PBKDF2-params (the salt as an OCTET STRING,
// the only choice in use).
type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo protected by PBES2
// (RFC 8018) into the DER of its PKCS#8 key.
func decryptPKCS8(der []byte, passphrase string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return nil, errors.New("the encrypted private key does not parse")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("the key is encrypted with %v, not PBES2 (supported: PBES2 with PBKDF2 and AES-CBC, as openssl pkcs8 -topk8 -v2 aes256 writes)", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("the key's PBES2 parameters do not parse")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("the key's PBES2 key derivation is %v, not PBKDF2", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("the key's PBKDF2 parameters do not parse")
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxPBKDF2Iterations {
		return nil, fmt.Errorf("the key's PBKDF2 iteration count %d is not in [1, %d]", kdf.Iterations, maxPBKDF2Iterations)
	}
	var prf func() hash.Hash
	switch p := kdf.PRF.Algorithm; {
	case len(p) == 0 || p.Equal(oidHMACSHA1):
		prf = sha1.New
	case p.Equal(oidHMACSHA224):
		prf = sha256.New224
	case p.Equal(oidHMACSHA256):
		prf = sha256.New
	case p.Equal(oidHMACSHA384):
		prf = sha512.New384
	case p.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("the key's PBKDF2 function %v is not supported", p)
	}
	var keyLen int
	switch c := params.Cipher.Algorithm; {
	case c.Equal(oidAES128CBC):
		keyLen = 16
	case c.Equal(oidAES192CBC):
		keyLen = 24
	case c.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("the key's cipher %v is not supported (AES-128/192/256-CBC are)", c)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, errors.New("the key's PBKDF2 key length does not match its cipher")
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Cipher.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("the key's AES-CBC IV does not parse")
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("the encrypted key is not a whole number of AES blocks")
	}
	k, err := pbkdf2.Key(prf, passphrase, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, errors.New("the key's PBKDF2 derivation failed")
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, errors.New("the key's AES key is not valid")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	errWrong := errors.New("the private key does not decrypt: wrong passphrase?")
	n := int(plain[len(plain)-1])
	if n == 0 || n > aes.BlockSize || !bytes.Equal(plain[len(plain)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, errWrong
	}
	plain = plain[:len(plain)-n]
	if _, err := x509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, errWrong
	}
	return plain, nil
}
