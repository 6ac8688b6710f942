package producer

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/sasl"
)

// Keys of the OIDC client credentials login (KIP-768) that
// securityProps takes; see oauthKeys for which are secrets.
const (
	keyTokenURL     = "sasl.oauthbearer.token.endpoint.url"
	keyClientID     = "sasl.oauthbearer.client.credentials.client.id"
	keyClientSecret = "sasl.oauthbearer.client.credentials.client.secret"
	keyScope        = "sasl.oauthbearer.scope"
	keyURLEncode    = "sasl.oauthbearer.header.urlencode"
	keyLoginHandler = "sasl.login.callback.handler.class"

	// KIP-1139's jwt-bearer grant and KIP-1258's client assertion.
	keyRetriever          = "sasl.oauthbearer.jwt.retriever.class"
	keyAssertionAlg       = "sasl.oauthbearer.assertion.algorithm"
	keyAssertionAud       = "sasl.oauthbearer.assertion.claim.aud"
	keyAssertionExp       = "sasl.oauthbearer.assertion.claim.exp.seconds"
	keyAssertionIss       = "sasl.oauthbearer.assertion.claim.iss"
	keyAssertionJTI       = "sasl.oauthbearer.assertion.claim.jti.include"
	keyAssertionNbf       = "sasl.oauthbearer.assertion.claim.nbf.seconds"
	keyAssertionSub       = "sasl.oauthbearer.assertion.claim.sub"
	keyAssertionFile      = "sasl.oauthbearer.assertion.file"
	keyAssertionKey       = "sasl.oauthbearer.assertion.private.key.file"
	keyAssertionKeyPass   = "sasl.oauthbearer.assertion.private.key.passphrase"
	keyAssertionTemplate  = "sasl.oauthbearer.assertion.template.file"
	retrieverPackage      = "org.apache.kafka.common.security.oauthbearer."
	retrieverDefault      = retrieverPackage + "DefaultJwtRetriever"
	retrieverClientCreds  = retrieverPackage + "ClientCredentialsJwtRetriever"
	retrieverJWTBearer    = retrieverPackage + "JwtBearerJwtRetriever"
	retrieverFile         = retrieverPackage + "FileJwtRetriever"
	retrieverPrefixLegacy = "org.apache.kafka.common.security.oauthbearer.internals.secured."

	// EnvAllowedTokenURLs names the environment variable that lists, comma
	// separated, the values of sasl.oauthbearer.token.endpoint.url that
	// ConfigFromProperties accepts: each is compared with the property's
	// value, both trimmed of spaces, and must match exactly. Unset or
	// empty, no URL is accepted. This mirrors Kafka 4.0+'s JVM system
	// property org.apache.kafka.sasl.oauthbearer.allowed.urls
	// (CVE-2025-27817): properties may come from someone who must not
	// choose where the client's credentials go or which local file is sent
	// to the brokers as a token. Code that calls sasl.ClientCredentials
	// itself is trusted and not checked.
	EnvAllowedTokenURLs = "SAMSA_OAUTHBEARER_ALLOWED_URLS"
	// javaAllowedURLs is Kafka's equivalent, for the error.
	javaAllowedURLs = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
)

// tokenURLAllowed reports whether the token URL is listed in
// EnvAllowedTokenURLs, by Kafka's rule (split on commas, trim, exact).
func tokenURLAllowed(tokenURL string) bool {
	for allowed := range strings.SplitSeq(os.Getenv(EnvAllowedTokenURLs), ",") {
		if a := strings.TrimSpace(allowed); a != "" && a == tokenURL {
			return true
		}
	}
	return false
}

// oauthKeys are the OAUTHBEARER login keys (true: a secret). They are
// parsed only when they configure a login; otherwise they are reported
// as ignored, whatever their values.
var oauthKeys = map[string]bool{
	keyTokenURL:                             false,
	keyClientID:                             false,
	keyClientSecret:                         true,
	keyScope:                                false,
	keyURLEncode:                            false,
	"sasl.login.connect.timeout.ms":         false,
	"sasl.login.read.timeout.ms":            false,
	"sasl.login.retry.backoff.ms":           false,
	"sasl.login.retry.backoff.max.ms":       false,
	"sasl.login.refresh.window.factor":      false,
	"sasl.login.refresh.window.jitter":      false,
	"sasl.login.refresh.min.period.seconds": false,
	"sasl.login.refresh.buffer.seconds":     false,
	keyRetriever:                            false,
	keyAssertionAlg:                         false,
	keyAssertionAud:                         false,
	keyAssertionExp:                         false,
	keyAssertionIss:                         false,
	keyAssertionJTI:                         false,
	keyAssertionNbf:                         false,
	keyAssertionSub:                         false,
	keyAssertionFile:                        false,
	keyAssertionKey:                         false,
	keyAssertionKeyPass:                     true,
	keyAssertionTemplate:                    false,
}

// loginHandlers are the Java class names of Kafka's client credentials
// login callback handler (the secured package is Kafka 3.1 to 3.3's).
var loginHandlers = map[string]bool{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler":         true,
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler": true,
}

// oauthTuning parses the OAUTHBEARER login's timing keys into cfg,
// reporting bad values through fail. Java's 0 means none (no timeout, no
// wait, no minimum), which ClientCredentialsConfig spells negative.
func (sp *securityProps) oauthTuning(cfg *sasl.ClientCredentialsConfig, fail func(key, format string, args ...any)) {
	// The bounds are Java's ConfigDef's: a range where it has one (the
	// refresh keys), else the type's (INT, LONG). A value Java takes and
	// that cannot be a wait (negative) counts as 0, none.
	dur := func(key string, unit time.Duration, lo, hi int64, ranged bool, dst *time.Duration) {
		v, set := sp.v[key]
		if !set {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < lo || n > hi {
			what := "an integer"
			if ranged {
				what = fmt.Sprintf("an integer in [%d, %d]", lo, hi)
			}
			fail(key, "%q is not %s", v, what)
			return
		}
		n = min(n, math.MaxInt64/int64(unit))
		*dst = time.Duration(n) * unit
		if n <= 0 {
			*dst = -1
		}
	}
	dur("sasl.login.connect.timeout.ms", time.Millisecond, math.MinInt32, math.MaxInt32, false, &cfg.ConnectTimeout)
	dur("sasl.login.read.timeout.ms", time.Millisecond, math.MinInt32, math.MaxInt32, false, &cfg.ReadTimeout)
	dur("sasl.login.retry.backoff.ms", time.Millisecond, math.MinInt64, math.MaxInt64, false, &cfg.RetryBackoff)
	dur("sasl.login.retry.backoff.max.ms", time.Millisecond, math.MinInt64, math.MaxInt64, false, &cfg.RetryBackoffMax)
	dur("sasl.login.refresh.min.period.seconds", time.Second, 0, 900, true, &cfg.RefreshMinPeriod)
	dur("sasl.login.refresh.buffer.seconds", time.Second, 0, 3600, true, &cfg.RefreshBuffer)
	share := func(key string, lo, hi float64, dst *float64) {
		v, set := sp.v[key]
		if !set {
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= lo && f <= hi) {
			fail(key, "%q is not a number in [%v, %v]", v, lo, hi)
			return
		}
		*dst = f
		if f == 0 {
			*dst = -1
		}
	}
	share("sasl.login.refresh.window.factor", 0.5, 1, &cfg.RefreshWindowFactor)
	share("sasl.login.refresh.window.jitter", 0, 0.25, &cfg.RefreshWindowJitter)
	if v, set := sp.v[keyURLEncode]; set {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			cfg.URLEncodeCredentials = true
		case "false":
		default:
			fail(keyURLEncode, "%q is not true or false", v)
		}
	}
}

// oauthIgnored lists the OAUTHBEARER login keys set, for the log of
// ignored properties, when they configure no login.
func (sp *securityProps) oauthIgnored() []string {
	var keys []string
	for k := range oauthKeys {
		if _, set := sp.v[k]; set {
			keys = append(keys, k)
		}
	}
	return keys
}

// clientCredentials builds the OAUTHBEARER mechanism of an OIDC client
// credentials login (KIP-768) from sasl.oauthbearer.token.endpoint.url,
// the JAAS options (clientId, clientSecret, scope, extension_NAME) or
// their Kafka 4.1 keys, which take precedence as in Java, and the tuning
// keys. The token endpoint is verified against the system's roots plus
// the CAs of ssl.ca.location / ssl.truststore.* when TLS to the brokers
// is configured (caPEM); the brokers' verification switches do not apply
// to it.
func (sp *securityProps) clientCredentials(mkey string, jaas *jaasConfig, caPEM []byte, fail func(key, format string, args ...any)) (sasl.Mechanism, bool) {
	ok := true
	bad := func(key, format string, args ...any) { fail(key, format, args...); ok = false }
	if jaas != nil {
		if m := jaas.module[strings.LastIndexByte(jaas.module, '.')+1:]; m != "OAuthBearerLoginModule" {
			bad("sasl.jaas.config", "%s does not go with sasl.mechanism OAUTHBEARER (use OAuthBearerLoginModule)", m)
		}
	} else {
		jaas = &jaasConfig{options: map[string]string{}}
	}
	if h, set := sp.v[keyLoginHandler]; set && h != "" && !loginHandlers[h] {
		bad(keyLoginHandler, "%q cannot be loaded in Go: with %s samsa logs in as Kafka's OAuthBearerLoginCallbackHandler does; for another login set Config.SASL in code", h, keyTokenURL)
	}
	// Kafka 4.1's keys first, then the JAAS options (Java's precedence:
	// a key that is set wins even when empty, and an empty client id or
	// secret then fails, as in Java, rather than fall back to JAAS).
	var empty []string
	pick := func(key, option string) string {
		if v, set := sp.v[key]; set {
			if strings.TrimSpace(v) == "" {
				empty = append(empty, key)
			}
			return strings.TrimSpace(v)
		}
		return jaas.options[option]
	}
	cfg := sasl.ClientCredentialsConfig{
		TokenURL:     strings.TrimSpace(sp.v[keyTokenURL]),
		ClientID:     pick(keyClientID, "clientId"),
		ClientSecret: pick(keyClientSecret, "clientSecret"),
		Scope:        pick(keyScope, "scope"),
		// Logger stays nil (slog.Default): Config.Logger is set after
		// ConfigFromProperties returns, so no logger is known here.
	}
	for k, v := range jaas.options {
		if name, isExt := strings.CutPrefix(k, "extension_"); isExt {
			if cfg.Extensions == nil {
				cfg.Extensions = map[string]string{}
			}
			cfg.Extensions[name] = v
		}
	}
	sp.oauthTuning(&cfg, bad)

	u, err := url.Parse(cfg.TokenURL)
	scheme := ""
	if err == nil {
		scheme = strings.ToLower(u.Scheme)
	}
	retriever := sp.retriever(bad)
	bearer := retriever == retrieverJWTBearer
	// KIP-1258: with an assertion file or an iss claim, the client
	// credentials grant authenticates with a client assertion instead
	// of the secret (Java's ClientCredentialsRequestFormatterFactory).
	// Blank counts as unset, as Java's validateString(key, false).
	hasFile := strings.TrimSpace(sp.v[keyAssertionFile]) != ""
	hasIss := strings.TrimSpace(sp.v[keyAssertionIss]) != ""
	if bearer || (hasFile || hasIss) && scheme != "file" && retriever != retrieverFile {
		cfg.Assertion = sp.assertion(bad)
		cfg.ClientSecret = ""
		if bearer {
			cfg.ClientID, cfg.URLEncodeCredentials = "", false
		}
	}
	switch {
	case retriever == retrieverFile && scheme != "file":
		bad(keyRetriever, "%s reads a token from a file: set %s to a file: URL", retrieverFile, keyTokenURL)
	case (retriever == retrieverJWTBearer || retriever == retrieverClientCreds) && scheme == "file":
		bad(keyRetriever, "%s posts to a token endpoint: set %s to an https:// or http:// URL", retriever, keyTokenURL)
	case scheme == "file":
	case scheme != "https" && scheme != "http":
		bad(keyTokenURL, "is not an https://, http:// or file: URL")
	case u.Host == "":
		bad(keyTokenURL, "has no host")
	case cfg.Assertion != nil:
	case cfg.ClientID == "" || cfg.ClientSecret == "":
		why := ""
		if len(empty) > 0 {
			why = fmt.Sprintf(" (%s set but empty, which overrides the JAAS option as in Java: remove it or give a value)", strings.Join(empty, " and "))
		}
		bad(mkey, "OAUTHBEARER with %s needs a client id and secret: clientId and clientSecret in sasl.jaas.config, or %s and %s%s; or a client assertion instead of the secret (KIP-1258: %s with %s, or %s)",
			keyTokenURL, keyClientID, keyClientSecret, why, keyAssertionIss, keyAssertionKey, keyAssertionFile)
	}
	if ok && !tokenURLAllowed(cfg.TokenURL) {
		bad(keyTokenURL, "is not allowed: list it in the environment variable %s (comma-separated, exact match; Kafka 4.0+'s equivalent is the JVM system property %s)", EnvAllowedTokenURLs, javaAllowedURLs)
	}
	if !ok {
		return nil, false
	}
	if caPEM != nil {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(caPEM)
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	build := sasl.ClientCredentials
	if bearer {
		build = sasl.JWTBearer
	}
	src, err := build(cfg)
	if err != nil {
		key := mkey
		switch msg := err.Error(); {
		case strings.Contains(msg, "extension"):
			key = "sasl.jaas.config"
		case strings.Contains(msg, "assertion file"):
			key = keyAssertionFile
		case strings.Contains(msg, "assertion private key file") || strings.Contains(msg, "assertion algorithm"):
			key = keyAssertionKey
		case strings.Contains(msg, "assertion template file"):
			key = keyAssertionTemplate
		}
		fail(key, "%v", err)
		return nil, false
	}
	return sasl.OAuthBearer(src), true
}

// retriever returns the Java class of sasl.oauthbearer.jwt.retriever.class
// (Kafka 4.1+, KIP-1139), DefaultJwtRetriever when unset. Only Kafka's
// own retrievers can be followed in Go.
func (sp *securityProps) retriever(bad func(key, format string, args ...any)) string {
	v := strings.TrimSpace(sp.v[keyRetriever])
	switch v {
	case "", retrieverDefault, retrieverPrefixLegacy + "DefaultJwtRetriever":
		return retrieverDefault
	case retrieverClientCreds, retrieverJWTBearer, retrieverFile:
		return v
	}
	bad(keyRetriever, "%q cannot be loaded in Go: samsa follows %s, %s, %s and %s; for another retriever set Config.SASL in code", v, retrieverDefault, retrieverClientCreds, retrieverJWTBearer, retrieverFile)
	return retrieverDefault
}

// assertion builds the JWT assertion of a jwt-bearer grant (KIP-1139) or
// of a client assertion (KIP-1258) from the sasl.oauthbearer.assertion.*
// keys, with Java's rules: sasl.oauthbearer.assertion.file wins over
// everything else; otherwise the private key file is required. The files
// named must be listed in EnvAllowedFiles when it is set.
func (sp *securityProps) assertion(bad func(key, format string, args ...any)) *sasl.AssertionConfig {
	str := func(key string) string { return strings.TrimSpace(sp.v[key]) }
	a := &sasl.AssertionConfig{}
	if a.File = str(keyAssertionFile); a.File != "" {
		sp.fileAllowed(keyAssertionFile, a.File, bad)
		return a
	}
	a.PrivateKeyFile = str(keyAssertionKey)
	if a.PrivateKeyFile == "" {
		bad(keyAssertionKey, "is required: the private key that signs the assertion (or set %s to a file holding one)", keyAssertionFile)
	}
	sp.fileAllowed(keyAssertionKey, a.PrivateKeyFile, bad)
	if p, set := sp.v[keyAssertionKeyPass]; set {
		// Java trims a password; an empty one is an error there.
		if a.PrivateKeyPassphrase = strings.TrimSpace(p); a.PrivateKeyPassphrase == "" {
			bad(keyAssertionKeyPass, "is empty")
		}
	}
	a.Algorithm = "RS256"
	if v, set := sp.v[keyAssertionAlg]; set {
		switch alg := strings.ToUpper(strings.TrimSpace(v)); alg {
		case sasl.AlgRS256, sasl.AlgES256:
			a.Algorithm = alg
		default:
			bad(keyAssertionAlg, "%q is not RS256 or ES256", v)
		}
	}
	a.Audience, a.Issuer, a.Subject = str(keyAssertionAud), str(keyAssertionIss), str(keyAssertionSub)
	// Java's ranges: exp.seconds [0, 86400], nbf.seconds [0, 3600].
	seconds := func(key string, maxSeconds int64, dst *time.Duration) {
		v, set := sp.v[key]
		if !set {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 || n > maxSeconds {
			bad(key, "%q is not an integer in [0, %d]", v, maxSeconds)
			return
		}
		*dst = time.Duration(n) * time.Second
		if n == 0 {
			*dst = -1 // none: the sasl package's spelling of 0
		}
	}
	seconds(keyAssertionExp, 86400, &a.Expiry)
	seconds(keyAssertionNbf, 3600, &a.NotBefore)
	if v, set := sp.v[keyAssertionJTI]; set {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			a.IncludeJTI = true
		case "false":
		default:
			bad(keyAssertionJTI, "%q is not true or false", v)
		}
	}
	if a.TemplateFile = str(keyAssertionTemplate); a.TemplateFile != "" {
		sp.fileAllowed(keyAssertionTemplate, a.TemplateFile, bad)
	}
	return a
}

// EnvAllowedFiles names the environment variable that lists (comma
// separated, absolute paths, exact match) the files that the
// sasl.oauthbearer.assertion.file, .private.key.file and .template.file
// keys may name, as Kafka's JVM system property
// org.apache.kafka.sasl.oauthbearer.allowed.files does. Unset or empty,
// no file is allowed, as in Kafka: properties may come from someone who
// must not choose which local file (a workload's service-account token, a
// key of another tenant) is presented to the identity provider. Code that
// builds a sasl.AssertionConfig itself is trusted and not checked.
const EnvAllowedFiles = "SAMSA_OAUTHBEARER_ALLOWED_FILES"

// fileAllowed checks path against EnvAllowedFiles.
func (sp *securityProps) fileAllowed(key, path string, bad func(key, format string, args ...any)) {
	if path == "" {
		return
	}
	list := strings.TrimSpace(os.Getenv(EnvAllowedFiles))
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	for allowed := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(allowed) == abs {
			return
		}
	}
	bad(key, "names a file (%s) that the environment variable %s does not list (Kafka's equivalent is the JVM system property org.apache.kafka.sasl.oauthbearer.allowed.files)", abs, EnvAllowedFiles)
}
