package pkcs8

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// MaxIterations bounds the PBKDF2 iteration count a key may ask for, so
// that a hostile file cannot hold the caller for minutes (OpenSSL's
// default is 2048, Java's keytool 10000).
const MaxIterations = 10_000_000

// ErrWrongPassphrase is the error of a passphrase that does not decrypt
// the key.
var ErrWrongPassphrase = errors.New("the private key does not decrypt: wrong passphrase?")

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

// Decrypt decrypts an EncryptedPrivateKeyInfo (RFC 5958) protected by
// PBES2 (RFC 8018: PBKDF2 with HMAC-SHA-1/224/256/384/512, then
// AES-128/192/256-CBC, what openssl pkcs8 -topk8 -v2 and Java write) into
// the DER of its PKCS#8 key. A passphrase that does not decrypt it gives
// ErrWrongPassphrase; no error quotes the key or the passphrase.
func Decrypt(der []byte, passphrase string) ([]byte, error) {
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
	if kdf.Iterations < 1 || kdf.Iterations > MaxIterations {
		return nil, fmt.Errorf("the key's PBKDF2 iteration count %d is not in [1, %d]", kdf.Iterations, MaxIterations)
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
	n := int(plain[len(plain)-1])
	if n == 0 || n > aes.BlockSize || !bytes.Equal(plain[len(plain)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, ErrWrongPassphrase
	}
	plain = plain[:len(plain)-n]
	if _, err := x509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, ErrWrongPassphrase
	}
	return plain, nil
}
