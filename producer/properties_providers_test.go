package producer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

const (
	fileProvider = "org.apache.kafka.common.config.provider.FileConfigProvider"
	dirProvider  = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
	envProvider  = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
	theSecret    = "s3cr3t-Pa55"
)

// secretFiles lays out what a Kubernetes secret mount looks like
// (secret/password -> ..data/password -> ..2026_12_07/password) and a
// properties file, and returns the secret directory and the file.
func secretFiles(t *testing.T) (secretDir, propsFile string) {
	t.Helper()
	root := t.TempDir()
	secretDir = filepath.Join(root, "secret")
	ts := filepath.Join(secretDir, "..2026_12_07")
	require.NoError(t, os.MkdirAll(ts, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "password"), []byte(theSecret), 0o600))
	require.NoError(t, os.Symlink("..2026_12_07", filepath.Join(secretDir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "password"), filepath.Join(secretDir, "password")))
	propsFile = filepath.Join(root, "credentials.properties")
	require.NoError(t, os.WriteFile(propsFile, []byte("# secrets\npassword = "+theSecret+"\nuser=alice\na\\:b=colon\n"), 0o600))
	return secretDir, propsFile
}

// plainPassword is the password a PLAIN mechanism sends.
func plainPassword(t *testing.T, cfg producer.Config) string {
	t.Helper()
	require.NotNil(t, cfg.SASL)
	_, msg, err := cfg.SASL.Start(context.Background(), "k")
	require.NoError(t, err)
	parts := strings.Split(string(msg), "\x00")
	require.Len(t, parts, 3)
	return parts[2]
}

func jaas(password string) string {
	return `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + password + `";`
}

// TestConfigProvidersResolvePlaceholders: a password kept in a Kubernetes
// secret, a properties file or the environment reaches sasl.jaas.config
// through Java's three config providers, as it does for a Java client
// (KIP-297, KIP-887). Before, config.providers was an unknown key.
func TestConfigProvidersResolvePlaceholders(t *testing.T) {
	secretDir, propsFile := secretFiles(t)
	t.Setenv("SAMSA_TEST_PASSWORD", theSecret)
	t.Setenv(producer.EnvAutomaticConfigProviders, "")
	os.Unsetenv(producer.EnvAutomaticConfigProviders) // unset: every provider may run

	base := map[string]string{
		"bootstrap.servers": "k:9092",
		"security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanism":    "PLAIN",
	}
	cases := []struct {
		name  string
		props map[string]string
	}{
		{"file", map[string]string{
			"config.providers":            "file",
			"config.providers.file.class": fileProvider,
			"sasl.jaas.config":            jaas("${file:" + propsFile + ":password}"),
		}},
		{"file with allowed.paths", map[string]string{
			"config.providers":                          "file",
			"config.providers.file.class":               fileProvider,
			"config.providers.file.param.allowed.paths": filepath.Dir(propsFile),
			"sasl.jaas.config":                          jaas("${file:" + propsFile + ":password}"),
		}},
		{"directory (a Kubernetes secret)", map[string]string{
			"config.providers":                         "dir",
			"config.providers.dir.class":               dirProvider,
			"config.providers.dir.param.allowed.paths": secretDir,
			"sasl.jaas.config":                         jaas("${dir:" + secretDir + ":password}"),
		}},
		{"env", map[string]string{
			"config.providers":                             "env",
			"config.providers.env.class":                   envProvider,
			"config.providers.env.param.allowlist.pattern": "SAMSA_TEST_.*",
			"sasl.jaas.config":                             jaas("${env:SAMSA_TEST_PASSWORD}"),
		}},
		{"two providers", map[string]string{
			"config.providers":            "file, env",
			"config.providers.file.class": fileProvider,
			"config.providers.env.class":  envProvider,
			"sasl.jaas.config":            jaas("${env:SAMSA_TEST_PASSWORD}"),
			"client.id":                   "${file:" + propsFile + ":user}-${file:" + propsFile + ":a:b}",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range base {
				props[k] = v
			}
			for k, v := range tc.props {
				props[k] = v
			}
			cfg, err := producer.ConfigFromProperties(props)
			require.NoError(t, err)
			assert.Equal(t, theSecret, plainPassword(t, cfg))
			assert.Empty(t, cfg.IgnoredProperties(), "the provider keys are used, not ignored")
			if tc.name == "two providers" {
				// The key takes the rest after the path, colons and
				// all, as in Java's ConfigTransformer.
				assert.Equal(t, "alice-colon", cfg.ClientID)
			}
			for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
				assert.NotContains(t, fmt.Sprintf(verb, cfg), theSecret, verb)
			}
		})
	}
}

// TestConfigProvidersResolveOnce: a provider's answer is not scanned for
// placeholders again (Java's rule), and text around a placeholder stays.
func TestConfigProvidersResolveOnce(t *testing.T) {
	t.Setenv("SAMSA_TEST_A", "${env:SAMSA_TEST_B}")
	t.Setenv("SAMSA_TEST_B", "b")
	cfg, err := producer.ConfigFromPropertiesWith(map[string]string{
		"config.providers":           "env",
		"config.providers.env.class": envProvider,
		"client.id":                  "x-${env:SAMSA_TEST_A}-y",
	}, producer.PropertiesOptions{AutomaticConfigProviders: []string{envProvider}})
	require.NoError(t, err)
	assert.Equal(t, "x-${env:SAMSA_TEST_B}-y", cfg.ClientID)
}

// TestConfigProviderErrors: what Java leaves unresolved (an unknown
// provider, a missing key, a path outside allowed.paths) is an error here
// naming the property key and the provider; no error holds a resolved
// value.
func TestConfigProviderErrors(t *testing.T) {
	secretDir, propsFile := secretFiles(t)
	t.Setenv("SAMSA_TEST_PASSWORD", theSecret)
	os.Unsetenv(producer.EnvAutomaticConfigProviders)

	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "password"), []byte(theSecret), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "password"), filepath.Join(secretDir, "escape")))
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("x", 1<<20+1)), 0o600))

	file := map[string]string{"config.providers": "file", "config.providers.file.class": fileProvider}
	dir := map[string]string{"config.providers": "dir", "config.providers.dir.class": dirProvider,
		"config.providers.dir.param.allowed.paths": secretDir}
	env := map[string]string{"config.providers": "env", "config.providers.env.class": envProvider,
		"config.providers.env.param.allowlist.pattern": "KAFKA_.*"}
	with := withProps
	cases := []struct {
		name  string
		props map[string]string
		want  []string
	}{
		{"no config.providers", map[string]string{"sasl.jaas.config": jaas("${vault:secret/kafka:password}")},
			[]string{`sasl.jaas.config: names config provider "vault", but config.providers is not set`}},
		{"provider not listed", with(file, "client.id", "${env:HOME}"),
			[]string{`client.id: names config provider "env", which config.providers ("file") does not list`}},
		{"missing key", with(file, "sasl.jaas.config", jaas("${file:"+propsFile+":pasword}")),
			[]string{`sasl.jaas.config: config provider "file": "` + propsFile + `" has no key "pasword"`}},
		{"missing file", with(file, "client.id", "${file:/nonexistent/x.properties:k}"),
			[]string{`client.id: config provider "file": cannot read "/nonexistent/x.properties": no such file or directory`}},
		{"file provider without a path", with(file, "client.id", "${file:k}"),
			[]string{`client.id: config provider "file": FileConfigProvider needs a path`}},
		{"not a regular file", with(file, "client.id", "${file:"+os.DevNull+":k}"),
			[]string{`is not a regular file`}},
		{"file over 1 MiB", with(file, "client.id", "${file:"+big+":k}"),
			[]string{`is larger than 1 MiB`}},
		{"class not set", map[string]string{"config.providers": "file", "client.id": "x"},
			[]string{`config.providers.file.class: not set, for config provider "file"`}},
		{"class Go cannot load", map[string]string{"config.providers": "vault", "config.providers.vault.class": "io.example.VaultConfigProvider"},
			[]string{`config.providers.vault.class: "io.example.VaultConfigProvider" cannot be loaded in Go`}},
		{"a typo in a parameter", with(file, "config.providers.file.param.allowed.path", "/etc"),
			[]string{`config.providers.file.param.allowed.path: is not a parameter of FileConfigProvider (it takes allowed.paths)`}},
		{"a key of a listed provider that is neither class nor param", with(file, "config.providers.file.allowed.paths", "/etc"),
			[]string{`config.providers.file.allowed.paths: is not a key of a config provider`}},
		{"allowed.paths not absolute", with(dir, "config.providers.dir.param.allowed.paths", "secret"),
			[]string{`config.providers.dir.param.allowed.paths: "secret" is not an absolute path`}},
		{"allowed.paths missing", with(dir, "config.providers.dir.param.allowed.paths", "/nonexistent/secret"),
			[]string{`config.providers.dir.param.allowed.paths: "/nonexistent/secret" does not exist`}},
		{"outside allowed.paths", with(dir, "client.id", "${dir:"+outside+":password}"),
			[]string{`client.id: config provider "dir": "` + outside + `" is not under allowed.paths`}},
		{"dot-dot out of allowed.paths", with(dir, "client.id", "${dir:"+secretDir+"/..:credentials.properties}"),
			[]string{`is not under allowed.paths`}},
		{"a prefix is not a parent", with(dir, "client.id", "${dir:"+secretDir+"2:password}"),
			[]string{`is not under allowed.paths`}},
		{"a symbolic link out of allowed.paths", with(dir, "client.id", "${dir:"+secretDir+":escape}"),
			[]string{`"` + secretDir + `/escape" leads out of allowed.paths through a symbolic link`}},
		{"a path as a directory file name", with(dir, "client.id", "${dir:"+secretDir+":../x}"),
			[]string{`config provider "dir": "../x" is not a file name`}},
		{"missing directory file", with(dir, "client.id", "${dir:"+secretDir+":token}"),
			[]string{`config provider "dir": "` + secretDir + `" has no file "token"`}},
		{"env outside the allowlist", with(env, "sasl.jaas.config", jaas("${env:SAMSA_TEST_PASSWORD}")),
			[]string{`sasl.jaas.config: config provider "env": environment variable "SAMSA_TEST_PASSWORD" is not allowed by allowlist.pattern`}},
		{"env not set", with(env, "client.id", "${env:KAFKA_NOT_SET_ANYWHERE}"),
			[]string{`environment variable "KAFKA_NOT_SET_ANYWHERE" is not set`}},
		{"env with a path", with(env, "client.id", "${env:/etc:KAFKA_X}"),
			[]string{`EnvVarConfigProvider takes no path`}},
		{"a bad allowlist pattern", with(env, "config.providers.env.param.allowlist.pattern", "(?<=x)"),
			[]string{`config.providers.env.param.allowlist.pattern: "(?<=x)" is not a regular expression Go reads`}},
		{"a resolved value that does not parse", with(file, "linger.ms", "${file:"+propsFile+":password}"),
			[]string{`linger.ms: "(the value from config provider file)" is not a number of milliseconds`}},
		{"a resolved protocol that does not parse", with(file, "security.protocol", "${file:"+propsFile+":password}"),
			[]string{`security.protocol: "(the value from config provider file)" is not PLAINTEXT`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := producer.ConfigFromProperties(tc.props)
			require.ErrorIs(t, err, producer.ErrInvalidConfig)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			assert.NotContains(t, err.Error(), theSecret, "a resolved value never appears in an error")
		})
	}
}

// TestConfigProvidersNotListedAreIgnored: the keys of a provider that
// config.providers does not list configure nothing (Java ignores them):
// they are reported, not an error.
func TestConfigProvidersNotListedAreIgnored(t *testing.T) {
	cfg, err := producer.ConfigFromProperties(map[string]string{
		"bootstrap.servers":           "k:9092",
		"config.providers":            "",
		"config.providers.file.class": fileProvider,
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"config.providers.file.class"}, cfg.IgnoredProperties())
}

// TestAutomaticConfigProviders: Java 3.8+'s system property
// org.apache.kafka.automatic.config.providers, read here from
// SAMSA_AUTOMATIC_CONFIG_PROVIDERS or PropertiesOptions: unset, every
// provider may run; set, only the classes listed; "none" lets none run.
func TestAutomaticConfigProviders(t *testing.T) {
	t.Setenv("SAMSA_TEST_PASSWORD", theSecret)
	props := map[string]string{
		"config.providers":           "env",
		"config.providers.env.class": envProvider,
		"client.id":                  "${env:SAMSA_TEST_PASSWORD}",
	}
	cases := []struct {
		name    string
		env     *string
		opt     []string
		allowed bool
	}{
		{"unset: every provider", nil, nil, true},
		{"none", ptr("none"), nil, false},
		{"empty", ptr(""), nil, false},
		{"another class", ptr(fileProvider), nil, false},
		{"listed", ptr(fileProvider + " , " + envProvider), nil, true},
		{"the option wins over the variable", ptr("none"), []string{envProvider}, true},
		{"an empty option lets none run", nil, []string{}, false},
		{"the option's none", nil, []string{"none"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(producer.EnvAutomaticConfigProviders, "")
			if tc.env == nil {
				os.Unsetenv(producer.EnvAutomaticConfigProviders)
			} else {
				t.Setenv(producer.EnvAutomaticConfigProviders, *tc.env)
			}
			cfg, err := producer.ConfigFromPropertiesWith(props, producer.PropertiesOptions{AutomaticConfigProviders: tc.opt})
			if tc.allowed {
				require.NoError(t, err)
				assert.Equal(t, theSecret, cfg.ClientID)
				return
			}
			require.ErrorIs(t, err, producer.ErrInvalidConfig)
			assert.ErrorContains(t, err, `config.providers.env.class: "`+envProvider+`" is not allowed`)
			assert.ErrorContains(t, err, "org.apache.kafka.automatic.config.providers")
			if tc.opt == nil {
				assert.ErrorContains(t, err, "SAMSA_AUTOMATIC_CONFIG_PROVIDERS")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestConfigProvidersBounded: a provider's answers are untrusted too: a
// value filled past 1 MiB, and more than 16 MiB read in all (one file
// named through many paths), are errors, not memory.
func TestConfigProvidersBounded(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "p.properties")
	require.NoError(t, os.WriteFile(f, []byte("k="+strings.Repeat("x", 600<<10)+"\n"), 0o600))
	base := map[string]string{"config.providers": "file", "config.providers.file.class": fileProvider}

	props := withProps(base, "client.id", "${file:"+f+":k}${file:"+f+":k}")
	_, err := producer.ConfigFromProperties(props)
	require.ErrorIs(t, err, producer.ErrInvalidConfig)
	assert.ErrorContains(t, err, `client.id: is longer than 1 MiB once config provider "file" filled it in`)

	props = withProps(base)
	for i := range 40 {
		// The same file through 40 spellings: each is read.
		props[fmt.Sprintf("metrics.context.k%d", i)] = "${file:" + dir + strings.Repeat("/.", i) + "/p.properties:k}"
	}
	_, err = producer.ConfigFromProperties(props)
	require.ErrorIs(t, err, producer.ErrInvalidConfig)
	assert.ErrorContains(t, err, "the config providers read more than 16 MiB in all")
	assert.Less(t, len(err.Error()), 64<<10, "the error stays short")
}

func withProps(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
