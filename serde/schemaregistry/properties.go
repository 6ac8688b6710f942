package schemaregistry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/sasl"
)

// clientKeys are the keys ConfigFromProperties reads, besides the
// schema.registry.ssl.* keys; true marks secrets.
var clientKeys = map[string]bool{
	"schema.registry.url":                           false,
	"basic.auth.credentials.source":                 false,
	"schema.registry.basic.auth.credentials.source": false,
	"basic.auth.user.info":                          true,
	"schema.registry.basic.auth.user.info":          true,
	"bearer.auth.credentials.source":                false,
	"bearer.auth.token":                             true,
	"bearer.auth.logical.cluster":                   false,
	"bearer.auth.identity.pool.id":                  false,
	"bearer.auth.issuer.endpoint.url":               false,
	"bearer.auth.client.id":                         false,
	"bearer.auth.client.secret":                     true,
	"bearer.auth.scope":                             false,
	"max.retries":                                   false,
	"retries.wait.ms":                               false,
	"retries.max.wait.ms":                           false,
	"http.connect.timeout.ms":                       false,
	"http.read.timeout.ms":                          false,
	"schema.registry.request.timeout.ms":            false,
	"max.schemas.per.subject":                       false,
}

// serializerKeys are the keys SerializerConfigFromProperties reads.
var serializerKeys = map[string]bool{
	"auto.register.schemas":       true,
	"use.latest.version":          true,
	"latest.compatibility.strict": true,
	"key.subject.name.strategy":   true,
	"value.subject.name.strategy": true,
	"normalize.schemas":           true,
	"json.fail.invalid.schema":    true,
}

const sslPrefix = "schema.registry.ssl."

// ownedPrefixes are the prefixes of keys this package owns: a key with
// one that it does not know is reported as unknown (a likely typo), while
// other keys (the producer's) are left alone.
var ownedPrefixes = []string{"schema.registry.", "basic.auth.", "bearer.auth."}

// ConfigFromProperties builds a Config from the Java serializers' property
// names (io.confluent.kafka.serializers.AbstractKafkaSchemaSerDeConfig), so
// that the properties file of a Java producer works unchanged (load it
// with producer.LoadProperties). Keys of other clients (the producer's)
// are ignored; an unknown key under schema.registry., basic.auth. or
// bearer.auth. is an error, as are bad values. No error quotes a secret.
//
//	schema.registry.url                     URLs, comma-separated (required)
//	basic.auth.credentials.source           USER_INFO (default): basic.auth.user.info;
//	                                        URL: the user:password@ of the URLs;
//	                                        SASL_INHERIT: sasl.username and sasl.password, or
//	                                        the username and password of sasl.jaas.config
//	basic.auth.user.info                    "user:password" (alias schema.registry.basic.auth.user.info)
//	bearer.auth.credentials.source          STATIC_TOKEN: bearer.auth.token; OAUTHBEARER: an OIDC
//	                                        client credentials login (sasl.ClientCredentials) from
//	                                        bearer.auth.issuer.endpoint.url, bearer.auth.client.id,
//	                                        bearer.auth.client.secret and bearer.auth.scope
//	bearer.auth.logical.cluster,
//	  bearer.auth.identity.pool.id          Confluent Cloud's headers, with a bearer token
//	schema.registry.ssl.*                   TLS, read as the producer reads its ssl.* keys: PEM only
//	                                        (truststore.location, truststore.type=PEM,
//	                                        truststore.certificates, keystore.location,
//	                                        keystore.type=PEM, keystore.certificate.chain,
//	                                        keystore.key, key.password, ca.location,
//	                                        certificate.location, key.location,
//	                                        endpoint.identification.algorithm, protocol,
//	                                        enabled.protocols)
//	max.retries                             MaxRetries (0: none)
//	retries.wait.ms, retries.max.wait.ms    RetryBackoff, RetryBackoffMax
//	http.connect.timeout.ms,
//	  http.read.timeout.ms                  RequestTimeout, their sum
//	schema.registry.request.timeout.ms      RequestTimeout (confluent-kafka-go's key)
//	max.schemas.per.subject                 CacheSize
func ConfigFromProperties(props map[string]string) (Config, error) {
	var (
		c   Config
		bad []string
	)
	fail := func(key, format string, args ...any) {
		bad = append(bad, key+": "+fmt.Sprintf(format, args...))
	}
	get := func(k string) (string, bool) {
		v, ok := props[k]
		return strings.TrimSpace(v), ok
	}
	var unknown []string
	ssl := map[string]string{}
	for k, v := range props {
		if strings.HasPrefix(k, sslPrefix) {
			ssl["ssl."+strings.TrimPrefix(k, sslPrefix)] = v
			continue
		}
		if _, ok := clientKeys[k]; ok || serializerKeys[k] {
			continue
		}
		for _, p := range ownedPrefixes {
			if strings.HasPrefix(k, p) {
				unknown = append(unknown, k)
				break
			}
		}
	}
	if v, ok := get("schema.registry.url"); ok {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.URLs = append(c.URLs, u)
			}
		}
	}
	if len(c.URLs) == 0 {
		fail("schema.registry.url", "not set")
	}

	// Basic credentials.
	source, ok := get("basic.auth.credentials.source")
	if alt, altOK := get("schema.registry.basic.auth.credentials.source"); altOK {
		if ok && !strings.EqualFold(alt, source) {
			fail("schema.registry.basic.auth.credentials.source", "conflicts with basic.auth.credentials.source")
		}
		source = alt
	}
	info, infoKey := "", ""
	for _, k := range []string{"basic.auth.user.info", "schema.registry.basic.auth.user.info"} {
		if v, ok := props[k]; ok && v != "" {
			if infoKey != "" && v != info {
				fail(k, "conflicts with %s", infoKey)
			}
			info, infoKey = v, k
		}
	}
	switch strings.ToUpper(source) {
	case "", "USER_INFO":
		if infoKey != "" {
			user, pass, found := strings.Cut(info, ":")
			if !found || user == "" {
				fail(infoKey, "not of the form user:password")
			}
			c.Username, c.Password = user, pass
		}
	case "URL":
		// NewClient takes the credentials from the URLs.
	case "SASL_INHERIT":
		user, pass, err := saslCredentials(props)
		if err != nil {
			fail("basic.auth.credentials.source", "SASL_INHERIT: %v", err)
		}
		c.Username, c.Password = user, pass
	default:
		fail("basic.auth.credentials.source", "%q is not USER_INFO, URL or SASL_INHERIT", source)
	}

	// Bearer credentials.
	bsource, _ := get("bearer.auth.credentials.source")
	switch strings.ToUpper(bsource) {
	case "":
		if _, ok := props["bearer.auth.token"]; ok {
			fail("bearer.auth.token", "set without bearer.auth.credentials.source=STATIC_TOKEN")
		}
	case "STATIC_TOKEN":
		tok, _ := get("bearer.auth.token")
		if tok == "" {
			fail("bearer.auth.token", "not set, with bearer.auth.credentials.source=STATIC_TOKEN")
		}
		c.BearerToken = tok
	case "OAUTHBEARER":
		src, err := oauthSource(props)
		if err != nil {
			fail("bearer.auth.credentials.source", "OAUTHBEARER: %v", err)
		}
		c.BearerTokenSource = src
	default:
		fail("bearer.auth.credentials.source", "%q is not STATIC_TOKEN or OAUTHBEARER", bsource)
	}
	if bsource != "" && (c.Username != "" || strings.EqualFold(source, "URL")) {
		fail("bearer.auth.credentials.source", "conflicts with Basic credentials (basic.auth.*)")
	}
	c.LogicalCluster, _ = get("bearer.auth.logical.cluster")
	c.IdentityPoolID, _ = get("bearer.auth.identity.pool.id")

	// TLS.
	if len(ssl) > 0 {
		t, err := tlsFromProperties(ssl)
		if err != nil {
			fail(sslPrefix+"*", "%v", err)
		}
		c.TLS = t
	}

	// Retries, timeouts, caches.
	millis := func(key string, zeroMeans time.Duration) (time.Duration, bool) {
		v, ok := get(key)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			fail(key, "%q is not a number of milliseconds (0..2147483647)", v)
			return 0, false
		}
		if n == 0 {
			return zeroMeans, true
		}
		return time.Duration(n) * time.Millisecond, true
	}
	if v, ok := get("max.retries"); ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || n > 1000:
			fail("max.retries", "%q is not a number 0..1000", v)
		case n == 0:
			c.MaxRetries = NoRetries
		default:
			c.MaxRetries = n
		}
	}
	if d, ok := millis("retries.wait.ms", time.Nanosecond); ok {
		c.RetryBackoff = d
	}
	if d, ok := millis("retries.max.wait.ms", time.Nanosecond); ok {
		c.RetryBackoffMax = d
	}
	connect, okc := millis("http.connect.timeout.ms", 0)
	read, okr := millis("http.read.timeout.ms", 0)
	if okc || okr {
		if !okc {
			connect = 60 * time.Second // Java's default
		}
		if !okr {
			read = 60 * time.Second
		}
		c.RequestTimeout = connect + read
	}
	if d, ok := millis("schema.registry.request.timeout.ms", 0); ok {
		if okc || okr {
			fail("schema.registry.request.timeout.ms", "conflicts with http.connect.timeout.ms and http.read.timeout.ms")
		}
		c.RequestTimeout = d
	}
	if v, ok := get("max.schemas.per.subject"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail("max.schemas.per.subject", "%q is not a positive number", v)
		}
		c.CacheSize = n
	}

	sort.Strings(bad)
	if len(unknown) > 0 {
		sort.Strings(unknown)
		bad = append([]string{"unknown properties: " + strings.Join(unknown, ", ")}, bad...)
	}
	if len(bad) > 0 {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}
	return c, nil
}

// tlsFromProperties builds the TLS configuration of the schema.registry.ssl.*
// keys (given here as ssl.*) with the producer's own parser, so that both
// accept the same PEM files, stores and options.
func tlsFromProperties(ssl map[string]string) (*tls.Config, error) {
	props := map[string]string{"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SSL"}
	for k, v := range ssl {
		props[k] = v
	}
	pc, err := producer.ConfigFromProperties(props)
	if err != nil {
		// Name the keys as the user wrote them; the producer's errors
		// never quote a secret.
		msg := strings.TrimPrefix(err.Error(), producer.ErrInvalidConfig.Error()+": ")
		keys := make([]string, 0, len(ssl))
		for k := range ssl {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
		for _, k := range keys {
			msg = strings.ReplaceAll(msg, k, "\x00"+strings.TrimPrefix(k, "ssl."))
		}
		return nil, errors.New(strings.ReplaceAll(msg, "\x00", sslPrefix))
	}
	return pc.TLS, nil
}

// saslCredentials returns the user and password of the producer's SASL
// settings, for basic.auth.credentials.source=SASL_INHERIT: sasl.username
// and sasl.password, or sasl.jaas.config's username and password options.
func saslCredentials(props map[string]string) (string, string, error) {
	if u, ok := props["sasl.username"]; ok {
		return u, props["sasl.password"], nil
	}
	jaas, ok := props["sasl.jaas.config"]
	if !ok {
		return "", "", errors.New("neither sasl.username nor sasl.jaas.config is set")
	}
	opts := jaasOptions(jaas)
	if opts["username"] == "" || opts["password"] == "" {
		return "", "", errors.New("sasl.jaas.config has no username and password options")
	}
	return opts["username"], opts["password"], nil
}

// jaasOptions reads the key=value options of a JAAS line ("Module
// required key="value" ...;"), with values bare or quoted ("..." or '...',
// backslash escapes). It never fails: a malformed line gives fewer
// options.
func jaasOptions(line string) map[string]string {
	opts := map[string]string{}
	s := line
	for {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return opts
		}
		key := strings.TrimSpace(s[:eq])
		if i := strings.LastIndexAny(key, " \t\r\n"); i >= 0 {
			key = key[i+1:]
		}
		s = strings.TrimLeft(s[eq+1:], " \t\r\n")
		var val strings.Builder
		if s != "" && (s[0] == '"' || s[0] == '\'') {
			q := s[0]
			i := 1
			for ; i < len(s) && s[i] != q; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[min(i+1, len(s)):]
		} else {
			end := strings.IndexAny(s, " \t\r\n;")
			if end < 0 {
				end = len(s)
			}
			val.WriteString(s[:end])
			s = s[end:]
		}
		opts[key] = val.String()
	}
}

// oauthSource builds the OIDC client credentials token source of
// bearer.auth.credentials.source=OAUTHBEARER.
func oauthSource(props map[string]string) (func(context.Context) (sasl.Token, error), error) {
	cfg := sasl.ClientCredentialsConfig{
		TokenURL:     strings.TrimSpace(props["bearer.auth.issuer.endpoint.url"]),
		ClientID:     props["bearer.auth.client.id"],
		ClientSecret: props["bearer.auth.client.secret"],
		Scope:        props["bearer.auth.scope"],
	}
	if cfg.TokenURL == "" || cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("needs bearer.auth.issuer.endpoint.url, bearer.auth.client.id and bearer.auth.client.secret")
	}
	return sasl.ClientCredentials(cfg)
}

// SerializerConfigFromProperties builds a SerializerConfig from the Java
// serializers' property names, for a key serializer when isKey. Other
// keys are ignored (ConfigFromProperties reads the registry's).
//
//	auto.register.schemas          DisableAutoRegister, inverted (default true)
//	use.latest.version             UseLatestVersion (default false)
//	key.subject.name.strategy,
//	  value.subject.name.strategy  SubjectNameStrategy (by isKey): TopicNameStrategy,
//	                               RecordNameStrategy, TopicRecordNameStrategy, with or
//	                               without the package io.confluent.kafka.serializers.subject.
//	normalize.schemas              Normalize (default false)
//	json.fail.invalid.schema       Validate, for JSON Schema (default false)
//	latest.compatibility.strict    accepted and ignored
func SerializerConfigFromProperties(props map[string]string, isKey bool) (SerializerConfig, error) {
	c := SerializerConfig{IsKey: isKey}
	var bad []string
	boolean := func(key string) (bool, bool) {
		v, ok := props[key]
		if !ok {
			return false, false
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		bad = append(bad, fmt.Sprintf("%s: %q is not true or false", key, v))
		return false, false
	}
	if b, ok := boolean("auto.register.schemas"); ok {
		c.DisableAutoRegister = !b
	}
	if b, ok := boolean("use.latest.version"); ok {
		c.UseLatestVersion = b
	}
	if b, ok := boolean("normalize.schemas"); ok {
		c.Normalize = b
	}
	if b, ok := boolean("json.fail.invalid.schema"); ok {
		c.Validate = b
	}
	boolean("latest.compatibility.strict")
	key := "value.subject.name.strategy"
	if isKey {
		key = "key.subject.name.strategy"
	}
	if v, ok := props[key]; ok {
		s, err := ParseSubjectNameStrategy(v)
		if err != nil {
			bad = append(bad, key+": "+strings.TrimPrefix(err.Error(), "schemaregistry: "))
		}
		c.SubjectNameStrategy = s
	}
	if len(bad) > 0 {
		return SerializerConfig{}, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}
	return c, nil
}
