// Package pkcs8 decrypts PKCS#8 private keys encrypted with PBES2 (RFC
// 8018), the ENCRYPTED PRIVATE KEY blocks that OpenSSL and Java write. The
// producer uses it for ssl.key.password, the sasl package for the keys
// that sign OAuth assertions. Its errors never quote the key or the
// passphrase.
package pkcs8
