package producer

import (
	"crypto/tls"
	"crypto/x509"
	"math"
	"net/url"
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
)

// oauthKeys are the OAUTHBEARER login keys (true: a secret). They are
// parsed whenever set, and reported as ignored unless they configure a
// login.
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
	dur := func(key string, unit time.Duration, hi int64, dst *time.Duration) {
		v, set := sp.v[key]
		if !set {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > hi {
			fail(key, "%q is not an integer in [0, %d]", v, hi)
			return
		}
		*dst = time.Duration(n) * unit
		if n == 0 {
			*dst = -1
		}
	}
	dur("sasl.login.connect.timeout.ms", time.Millisecond, math.MaxInt32, &cfg.ConnectTimeout)
	dur("sasl.login.read.timeout.ms", time.Millisecond, math.MaxInt32, &cfg.ReadTimeout)
	dur("sasl.login.retry.backoff.ms", time.Millisecond, math.MaxInt64/int64(time.Millisecond), &cfg.RetryBackoff)
	dur("sasl.login.retry.backoff.max.ms", time.Millisecond, math.MaxInt64/int64(time.Millisecond), &cfg.RetryBackoffMax)
	dur("sasl.login.refresh.min.period.seconds", time.Second, 900, &cfg.RefreshMinPeriod)
	dur("sasl.login.refresh.buffer.seconds", time.Second, 3600, &cfg.RefreshBuffer)
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
	// Kafka 4.1's keys first, then the JAAS options (Java's precedence).
	pick := func(key, option string) string {
		if v, set := sp.v[key]; set {
			return strings.TrimSpace(v)
		}
		return jaas.options[option]
	}
	cfg := sasl.ClientCredentialsConfig{
		TokenURL:     strings.TrimSpace(sp.v[keyTokenURL]),
		ClientID:     pick(keyClientID, "clientId"),
		ClientSecret: pick(keyClientSecret, "clientSecret"),
		Scope:        pick(keyScope, "scope"),
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
	switch {
	case scheme == "file":
	case scheme != "https" && scheme != "http":
		bad(keyTokenURL, "is not an https://, http:// or file: URL")
	case u.Host == "":
		bad(keyTokenURL, "has no host")
	case cfg.ClientID == "" || cfg.ClientSecret == "":
		bad(mkey, "OAUTHBEARER with %s needs a client id and secret: clientId and clientSecret in sasl.jaas.config, or %s and %s", keyTokenURL, keyClientID, keyClientSecret)
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
	src, err := sasl.ClientCredentials(cfg)
	if err != nil {
		key := mkey
		if strings.Contains(err.Error(), "extension") {
			key = "sasl.jaas.config"
		}
		fail(key, "%v", err)
		return nil, false
	}
	return sasl.OAuthBearer(src), true
}
