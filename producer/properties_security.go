package producer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/samsa-go/samsa/internal/pkcs8"
	"github.com/samsa-go/samsa/internal/safetext"
	"github.com/samsa-go/samsa/sasl"
)

// securityProps collects the TLS and SASL keys of ConfigFromProperties
// (its doc lists them) and turns them into Config.TLS and Config.SASL.
type securityProps struct {
	v     map[string]string
	caPEM []byte // the CAs to trust, once tlsConfig read them
	login bool   // the OAUTHBEARER keys configured a login
	// props are all the properties, for a registered
	// sasl.MechanismFactory; extra the keys taken only because such a
	// factory reads them; factoryKeys the Keys of the factory that built
	// Config.SASL, if one did.
	props       map[string]string
	extra       []string
	factoryKeys []string
}

// securityKeys are the keys securityProps takes, with oauthKeys
// (properties_oauth.go); true marks secrets.
var securityKeys = map[string]bool{
	"security.protocol":                     false,
	"sasl.mechanism":                        false,
	"sasl.mechanisms":                       false,
	"sasl.username":                         false,
	"sasl.password":                         true,
	"sasl.jaas.config":                      true,
	"ssl.ca.location":                       false,
	"ssl.truststore.location":               false,
	"ssl.truststore.type":                   false,
	"ssl.truststore.certificates":           false,
	"ssl.truststore.password":               true,
	"ssl.certificate.location":              false,
	"ssl.key.location":                      false,
	"ssl.key.password":                      true,
	"ssl.keystore.location":                 false,
	"ssl.keystore.type":                     false,
	"ssl.keystore.password":                 true,
	"ssl.keystore.certificate.chain":        false,
	"ssl.keystore.key":                      true,
	"ssl.endpoint.identification.algorithm": false,
	"enable.ssl.certificate.verification":   false,
	"ssl.protocol":                          false,
	"ssl.enabled.protocols":                 false,
	"session.timeout.ms":                    false,
	"sasl.login.callback.handler.class":     false,
	"sasl.client.callback.handler.class":    false,
}

// take records key if it is one of securityKeys, and reports whether it
// was.
func (sp *securityProps) take(key, v string) bool {
	_, sec := securityKeys[key]
	_, oauth := oauthKeys[key]
	if !sec && !oauth {
		if !sasl.IsFactoryKey(key) {
			return false
		}
		sp.extra = append(sp.extra, key)
	}
	if sp.v == nil {
		sp.v = map[string]string{}
	}
	sp.v[key] = v
	return true
}

// apply sets c.TLS and c.SASL from the recorded keys, reporting problems
// through fail. It returns the keys it took but had no use for (the
// OAUTHBEARER login's, without such a login), for the log of ignored
// properties.
func (sp *securityProps) apply(c *Config, fail func(key, format string, args ...any)) []string {
	get := func(k string) (string, bool) { v, ok := sp.v[k]; return v, ok }
	proto := "PLAINTEXT"
	if v, ok := get("security.protocol"); ok {
		proto = strings.ToUpper(v)
	}
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		fail("security.protocol", "%q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", sp.v["security.protocol"])
		return nil
	}
	if !sp.protocolCovers(proto, useTLS, useSASL, fail) {
		return nil
	}
	if v, ok := get("session.timeout.ms"); ok {
		if _, err := parseNonNegative(v); err != nil {
			fail("session.timeout.ms", "%q is not a number of milliseconds", v)
		}
	}
	if useTLS {
		if t, ok := sp.tlsConfig(fail); ok {
			c.TLS = t
		}
	}
	if useSASL {
		if m, ok := sp.mechanism(fail); ok {
			c.SASL = m
		}
	}
	// Accepted, without a setting: reported as ignored.
	var ignored []string
	for _, k := range []string{"ssl.truststore.password", "ssl.keystore.password", "session.timeout.ms", "sasl.client.callback.handler.class"} {
		if _, set := sp.v[k]; set {
			ignored = append(ignored, k)
		}
	}
	if sp.factoryKeys == nil {
		ignored = append(ignored, sp.extra...) // taken for a factory that did not build Config.SASL
	}
	if sp.login {
		return ignored
	}
	if _, set := sp.v[keyLoginHandler]; set {
		ignored = append(ignored, keyLoginHandler)
	}
	// Not parsed: as in Java, keys of a login that is not built are
	// accepted whatever their values (and reported as ignored).
	return append(ignored, sp.oauthIgnored()...)
}

// protocolCovers reports whether every ssl.* and sasl.* key given has a
// use under security.protocol proto, and fails security.protocol
// otherwise: Java ignores TLS keys without SSL or SASL_SSL, and SASL keys
// without SASL_PLAINTEXT or SASL_SSL, with a warning, and the client then
// connects without TLS or without authenticating, which against a SASL
// listener shows only as a connection closed. Here the file is refused.
func (sp *securityProps) protocolCovers(proto string, useTLS, useSASL bool, fail func(key, format string, args ...any)) bool {
	var ssl, sasl []string
	for k := range sp.props {
		switch {
		case !useTLS && (strings.HasPrefix(k, "ssl.") || k == "enable.ssl.certificate.verification"):
			ssl = append(ssl, k)
		case !useSASL && strings.HasPrefix(k, "sasl."):
			sasl = append(sasl, k)
		}
	}
	given := "is " + proto
	if _, set := sp.v["security.protocol"]; !set {
		given = "is not set (PLAINTEXT)"
	}
	list := func(keys []string) string {
		slices.Sort(keys)
		for i, k := range keys {
			keys[i] = safetext.Bound(k) // escaped: keys are input too
		}
		if len(keys) > 3 {
			return strings.Join(keys[:3], ", ") + fmt.Sprintf(" and %d more", len(keys)-3)
		}
		return strings.Join(keys, ", ")
	}
	switch {
	case len(sasl) > 0 && len(ssl) > 0:
		fail("security.protocol", "%s, so the SASL and TLS keys given (%s; %s) would be ignored and the client would connect without them: set security.protocol=SASL_SSL, or remove those keys", given, list(sasl), list(ssl))
	case len(sasl) > 0:
		want := "SASL_PLAINTEXT or SASL_SSL"
		if useTLS {
			want = "SASL_SSL"
		}
		fail("security.protocol", "%s, so the SASL keys given (%s) would be ignored and the client would connect without authenticating: set security.protocol=%s, or remove those keys", given, list(sasl), want)
	case len(ssl) > 0:
		want := "SSL or SASL_SSL"
		if useSASL {
			want = "SASL_SSL"
		}
		fail("security.protocol", "%s, so the TLS keys given (%s) would be ignored and the client would connect in plaintext: set security.protocol=%s, or remove those keys", given, list(ssl), want)
	default:
		return true
	}
	return false
}

// usedByFactory reports whether key is one the mechanism factory that
// built Config.SASL reads: not ignored, whatever other list has it.
func (sp *securityProps) usedByFactory(key string) bool {
	return slices.Contains(sp.factoryKeys, key)
}

// gssapiHint says how to enable GSSAPI, which needs a module of its own.
const gssapiHint = `import the module github.com/samsa-go/samsa/sasl/kerberos (import _ "github.com/samsa-go/samsa/sasl/kerberos" registers GSSAPI for ConfigFromProperties), or set Config.SASL to its kerberos.New(...)`

// builtinMechanisms are the mechanisms ConfigFromProperties builds
// itself; a registered sasl.MechanismFactory builds the others.
var builtinMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// fromFactory builds Config.SASL with the factory registered for name.
func (sp *securityProps) fromFactory(mkey, name string, f sasl.MechanismFactory, fail func(key, format string, args ...any)) (sasl.Mechanism, bool) {
	props := make(map[string]string, len(sp.props))
	for k, v := range sp.props {
		props[k] = strings.TrimSpace(v)
	}
	m, err := f.New(props)
	if err != nil {
		fail(mkey, "%s: %v", name, err)
		return nil, false
	}
	if m == nil {
		fail(mkey, "%s: the registered factory returned no mechanism", name)
		return nil, false
	}
	sp.factoryKeys = append([]string{}, f.Keys...)
	return m, true
}

func parseNonNegative(v string) (int64, error) {
	var n int64
	if v == "" {
		return 0, errors.New("empty")
	}
	for _, ch := range v {
		if ch < '0' || ch > '9' || n > 1<<50 {
			return 0, errors.New("not a number")
		}
		n = n*10 + int64(ch-'0')
	}
	return n, nil
}

// mechanism builds Config.SASL.
func (sp *securityProps) mechanism(fail func(key, format string, args ...any)) (sasl.Mechanism, bool) {
	mkey := "sasl.mechanism"
	name, ok := sp.v[mkey]
	if alt, altOK := sp.v["sasl.mechanisms"]; altOK {
		if ok {
			fail("sasl.mechanisms", "conflicts with sasl.mechanism")
			return nil, false
		}
		mkey, name, ok = "sasl.mechanisms", alt, true
	}
	if !ok || name == "" {
		if _, reg := sasl.LookupMechanismFactory("GSSAPI"); !reg {
			fail("sasl.mechanism", "not set, with a SASL security.protocol (the Java default, GSSAPI, needs Kerberos: %s)", gssapiHint)
			return nil, false
		}
		name = "GSSAPI" // Java's default, now that a factory builds it
	}
	name = strings.ToUpper(name)
	user, pass, haveUser := "", "", false
	if u, ok := sp.v["sasl.username"]; ok {
		user, haveUser = u, true
		pass = sp.v["sasl.password"]
	} else if _, ok := sp.v["sasl.password"]; ok {
		fail("sasl.password", "set without sasl.username")
		return nil, false
	}
	jaas, haveJAAS := sp.v["sasl.jaas.config"]
	var module string
	var parsed *jaasConfig
	if haveJAAS {
		j, err := parseJAAS(jaas)
		if err != nil {
			fail("sasl.jaas.config", "%v", err)
			return nil, false
		}
		parsed = &j
		module = j.module
		if i := strings.LastIndexByte(module, '.'); i >= 0 {
			module = module[i+1:]
		}
		if haveUser {
			fail("sasl.jaas.config", "conflicts with sasl.username and sasl.password (both give the credentials)")
			return nil, false
		}
		user, pass = j.options["username"], j.options["password"]
	}
	if f, reg := sasl.LookupMechanismFactory(name); reg && !slices.Contains(builtinMechanisms, name) {
		return sp.fromFactory(mkey, name, f, fail)
	}
	switch name {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		want := "PlainLoginModule"
		if name != "PLAIN" {
			want = "ScramLoginModule"
		}
		if haveJAAS && module != want {
			fail("sasl.jaas.config", "%s does not go with sasl.mechanism %s (use %s)", module, name, want)
			return nil, false
		}
		if user == "" || pass == "" {
			fail(mkey, "%s needs a user name and a password: sasl.jaas.config with username and password, or sasl.username and sasl.password", name)
			return nil, false
		}
		switch name {
		case "PLAIN":
			return sasl.Plain(user, pass), true
		case "SCRAM-SHA-256":
			return sasl.ScramSHA256(user, pass), true
		default:
			return sasl.ScramSHA512(user, pass), true
		}
	case "OAUTHBEARER":
		if strings.TrimSpace(sp.v[keyTokenURL]) == "" {
			return needCode{name: name, hint: "set " + keyTokenURL + " for an OIDC client credentials login, or set Config.SASL to sasl.OAuthBearer(yourTokenSource) after ConfigFromProperties"}, true
		}
		sp.login = true
		return sp.clientCredentials(mkey, parsed, sp.caPEM, fail)
	case "AWS_MSK_IAM":
		return needCode{name: name, hint: "set Config.SASL to the mechanism of module github.com/samsa-go/samsa/sasl/awsmskiam after ConfigFromProperties"}, true
	case "GSSAPI":
		fail(mkey, "GSSAPI (Kerberos) needs a module of its own: %s", gssapiHint)
	default:
		fail(mkey, "%q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", name)
	}
	return nil, false
}

// needCode stands for a mechanism that properties cannot express; every
// exchange fails with hint.
type needCode struct{ name, hint string }

func (m needCode) Name() string { return m.name }

func (m needCode) Start(context.Context, string) (sasl.Session, []byte, error) {
	return nil, nil, fmt.Errorf("sasl.mechanism %s from properties: %s", m.name, m.hint)
}

func (m needCode) String() string { return m.name + "(not configured: " + m.hint + ")" }

// jaasConfig is a parsed sasl.jaas.config line.
type jaasConfig struct {
	module  string
	options map[string]string
}

// parseJAAS parses "ModuleClass flag key=value ... ;" as Java's JaasConfig
// does: values bare or quoted ("..." or '...', with backslash escapes). Its
// errors never quote the line, which holds a password.
func parseJAAS(line string) (jaasConfig, error) {
	j := jaasConfig{options: map[string]string{}}
	s := strings.TrimSpace(line)
	next := func() (string, bool, error) { // token, quoted
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return "", false, nil
		}
		if q := s[0]; q == '"' || q == '\'' {
			var b strings.Builder
			for i := 1; i < len(s); i++ {
				switch ch := s[i]; {
				case ch == '\\' && i+1 < len(s):
					i++
					b.WriteByte(s[i])
				case ch == q:
					s = s[i+1:]
					return b.String(), true, nil
				default:
					b.WriteByte(ch)
				}
			}
			return "", false, errors.New("an unterminated quoted value")
		}
		if s[0] == '=' || s[0] == ';' {
			t := s[:1]
			s = s[1:]
			return t, false, nil
		}
		i := strings.IndexAny(s, " \t\r\n=;")
		if i < 0 {
			i = len(s)
		}
		t := s[:i]
		s = s[i:]
		return t, false, nil
	}
	mod, _, err := next()
	if err != nil {
		return j, err
	}
	if mod == "" || mod == ";" || mod == "=" {
		return j, errors.New("no login module class")
	}
	j.module = mod
	flag, _, err := next()
	if err != nil {
		return j, err
	}
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return j, errors.New("the login module class must be followed by required, requisite, sufficient or optional")
	}
	for {
		k, quoted, err := next()
		if err != nil {
			return j, err
		}
		if k == "" && !quoted {
			return j, nil // Java requires the ';', but be lenient
		}
		if k == ";" && !quoted {
			if rest, _, _ := next(); rest != "" {
				return j, errors.New("more than one login module (only one is supported)")
			}
			return j, nil
		}
		if eq, _, _ := next(); eq != "=" {
			return j, fmt.Errorf("option %s has no value", safetext.Quote(k))
		}
		v, _, err := next()
		if err != nil {
			return j, err
		}
		j.options[k] = v
	}
}

// tlsConfig builds Config.TLS.
func (sp *securityProps) tlsConfig(fail func(key, format string, args ...any)) (*tls.Config, bool) {
	ok := true
	bad := func(key, format string, args ...any) { fail(key, format, args...); ok = false }
	tc := &tls.Config{MinVersion: tls.VersionTLS12}

	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if v, set := sp.v[k]; set && !strings.EqualFold(v, "PEM") {
			bad(k, "%q stores are not supported: convert to PEM (keytool -importkeystore -deststoretype PKCS12, then openssl pkcs12 -nodes) and set %s=PEM", v, k)
		}
	}
	// Trusted CAs.
	var caPEM []byte
	caKey := ""
	for _, k := range []string{"ssl.ca.location", "ssl.truststore.location"} {
		if path, set := sp.v[k]; set {
			if caKey != "" {
				bad(k, "conflicts with %s", caKey)
				continue
			}
			caKey = k
			b, err := readPEMFile(path, k)
			if err != nil {
				bad(k, "%v", err)
				continue
			}
			caPEM = b
		}
	}
	if v, set := sp.v["ssl.truststore.certificates"]; set {
		if caKey != "" {
			bad("ssl.truststore.certificates", "conflicts with %s", caKey)
		} else {
			caKey, caPEM = "ssl.truststore.certificates", []byte(v)
		}
	}
	if caKey != "" && caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			bad(caKey, "holds no PEM certificate")
		}
		tc.RootCAs = pool
		sp.caPEM = caPEM
	}

	// Client certificate.
	if cert, set, err := sp.clientCert(); err != nil {
		bad(err.key, "%s", err.msg)
	} else if set {
		tc.Certificates = []tls.Certificate{cert}
	}

	// Verification.
	verify := true
	if v, set := sp.v["enable.ssl.certificate.verification"]; set {
		switch strings.ToLower(v) {
		case "true":
		case "false":
			verify = false
		default:
			bad("enable.ssl.certificate.verification", "%q is not true or false", v)
		}
	}
	checkHost := true
	if v, set := sp.v["ssl.endpoint.identification.algorithm"]; set {
		switch strings.ToLower(v) {
		case "https":
		case "", "none":
			checkHost = false
		default:
			bad("ssl.endpoint.identification.algorithm", "%q is not https or empty", v)
		}
	}
	switch {
	case !verify:
		tc.InsecureSkipVerify = true
	case !checkHost:
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = verifyChainOnly(tc.RootCAs)
	}

	for _, k := range []string{"ssl.protocol", "ssl.enabled.protocols"} {
		v, set := sp.v[k]
		if !set {
			continue
		}
		lowest := uint16(0)
		for _, p := range strings.Split(v, ",") {
			var ver uint16
			switch strings.ToUpper(strings.TrimSpace(p)) {
			case "TLSV1.2", "TLS":
				ver = tls.VersionTLS12
			case "TLSV1.3":
				ver = tls.VersionTLS13
			default:
				bad(k, "%q is not TLSv1.2 or TLSv1.3", strings.TrimSpace(p))
				continue
			}
			if lowest == 0 || ver < lowest {
				lowest = ver
			}
		}
		if lowest > tc.MinVersion {
			tc.MinVersion = lowest
		}
	}
	return tc, ok
}

// verifyChainOnly verifies the peer's chain against roots (nil: the
// system's) without checking the host name, as Java does with an empty
// ssl.endpoint.identification.algorithm.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the broker sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
}

type keyErr struct{ key, msg string }

// clientCert loads the client certificate and key, if any key asks for
// one.
func (sp *securityProps) clientCert() (tls.Certificate, bool, *keyErr) {
	var certPEM, keyPEM []byte
	certKey, keyKey := "", ""
	// Later sources win: inline PEM over the keystore file, librdkafka's
	// separate files over both.
	sources := []struct {
		key        string
		file       bool
		cert, priv bool
	}{
		{"ssl.keystore.location", true, true, true},
		{"ssl.keystore.certificate.chain", false, true, false},
		{"ssl.keystore.key", false, false, true},
		{"ssl.certificate.location", true, true, false},
		{"ssl.key.location", true, false, true},
	}
	for _, src := range sources {
		v, set := sp.v[src.key]
		if !set {
			continue
		}
		b := []byte(v)
		if src.file {
			var err error
			if b, err = readPEMFile(v, src.key); err != nil {
				return tls.Certificate{}, false, &keyErr{src.key, err.Error()}
			}
		}
		if src.cert {
			certPEM, certKey = b, src.key
		}
		if src.priv {
			keyPEM, keyKey = b, src.key
		}
	}
	if certKey == "" && keyKey == "" {
		return tls.Certificate{}, false, nil
	}
	if certKey == "" || keyKey == "" {
		missing := "ssl.certificate.location"
		if keyKey == "" {
			missing = "ssl.key.location"
		}
		return tls.Certificate{}, false, &keyErr{certKey + keyKey, "a client certificate needs both a certificate and a key: " + missing + " is missing"}
	}
	var cert tls.Certificate
	for rest := certPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			cert.Certificate = append(cert.Certificate, blk.Bytes)
		}
	}
	if len(cert.Certificate) == 0 {
		return cert, false, &keyErr{certKey, "holds no PEM certificate"}
	}
	key, err := parsePEMKey(keyPEM, sp.v["ssl.key.password"])
	if err != nil {
		return cert, false, &keyErr{keyKey, err.Error()}
	}
	cert.PrivateKey = key
	// Check that the key matches the certificate.
	if _, err := tls.X509KeyPair(pemEncodeCerts(cert.Certificate), pemEncodeKey(key)); err != nil {
		return cert, false, &keyErr{keyKey, "the key does not match the certificate"}
	}
	return cert, true, nil
}

func pemEncodeCerts(ders [][]byte) []byte {
	var b bytes.Buffer
	for _, d := range ders {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: d})
	}
	return b.Bytes()
}

func pemEncodeKey(key any) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// readPEMFile reads a PEM file, with a clear error for JKS and PKCS12
// stores.
func readPEMFile(path, key string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(b, []byte("-----BEGIN ")) {
		what := "not PEM"
		switch {
		case bytes.HasPrefix(b, []byte{0xfe, 0xed, 0xfe, 0xed}):
			what = "a JKS store"
		case len(b) > 0 && b[0] == 0x30:
			what = "DER or PKCS12"
		}
		return nil, fmt.Errorf("%s is %s: only PEM files are supported; convert it (keytool -importkeystore -srckeystore %s -destkeystore store.p12 -deststoretype PKCS12, then openssl pkcs12 -in store.p12 -nodes)", path, what, path)
	}
	return b, nil
}

// parsePEMKey finds the private key in b: PKCS#8, PKCS#1 or SEC 1,
// encrypted PKCS#8 (PBES2 with PBKDF2 and AES-CBC, as openssl and Java
// write them) or legacy encrypted PEM, decrypted with password.
func parsePEMKey(b []byte, password string) (any, error) {
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, errors.New("holds no PEM private key")
		}
		der := blk.Bytes
		switch blk.Type {
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, errors.New("the key is encrypted: set ssl.key.password")
			}
			var err error
			if der, err = pkcs8.Decrypt(der, password); err != nil {
				if errors.Is(err, pkcs8.ErrWrongPassphrase) {
					return nil, errors.New("ssl.key.password does not decrypt the key")
				}
				return nil, fmt.Errorf("encrypted private key: %w", err)
			}
			key, err := x509.ParsePKCS8PrivateKey(der)
			if err != nil {
				return nil, errors.New("ssl.key.password does not decrypt the key")
			}
			return key, nil
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			// Legacy encrypted PEM (deprecated, but some tools still write it).
			encrypted := x509.IsEncryptedPEMBlock(blk)
			if encrypted {
				if password == "" {
					return nil, errors.New("the key is encrypted: set ssl.key.password")
				}
				d, err := x509.DecryptPEMBlock(blk, []byte(password))
				if err != nil {
					return nil, errors.New("ssl.key.password does not decrypt the key")
				}
				der = d
			}
			if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
				return k, nil
			}
			if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
				return k, nil
			}
			if k, err := x509.ParseECPrivateKey(der); err == nil {
				return k, nil
			}
			if encrypted {
				// A wrong password passes legacy PEM's only check, the
				// CBC padding, about once in 256 tries: the garbage
				// then parses as no key.
				return nil, errors.New("ssl.key.password does not decrypt the key")
			}
			return nil, errors.New("the private key is neither PKCS#8, PKCS#1 nor SEC 1")
		}
	}
}
