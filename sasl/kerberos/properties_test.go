package kerberos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

const krb5Module = "com.sun.security.auth.module.Krb5LoginModule"

// TestFromProperties: what Java's and librdkafka's properties configure.
func TestFromProperties(t *testing.T) {
	dir, conf, kt := testFiles(t, "127.0.0.1:88", map[string]string{"app": "pw"})
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(dir, "env-cache"))
	t.Setenv("KRB5_CONFIG", conf)
	cases := []struct {
		name  string
		props map[string]string
		want  Options // compared: Principal, KeytabPath, UseTicketCache, ServiceName, the renewal settings
		cache string  // the ticket cache path, with UseTicketCache
	}{
		{
			name: "JAAS keytab",
			props: map[string]string{"sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka-svc",
				"sasl.jaas.config": krb5Module + ` required useKeyTab=true storeKey=true keyTab="` + kt + `" principal="app@SAMSA.TEST";`},
			want: Options{Principal: "app@SAMSA.TEST", KeytabPath: kt, ServiceName: "kafka-svc"},
		},
		{
			name: "JAAS ticket cache with its path, service name in JAAS",
			props: map[string]string{"sasl.jaas.config": krb5Module + ` required useTicketCache=true ticketCache="/tmp/cc-x" serviceName=kafka2 renewTGT=true doNotPrompt=true;`,
				"sasl.kerberos.service.name": "kafka2"},
			want:  Options{UseTicketCache: true, ServiceName: "kafka2"},
			cache: "/tmp/cc-x",
		},
		{
			name: "JAAS cache then keytab",
			props: map[string]string{"sasl.jaas.config": krb5Module + ` required useTicketCache=true useKeyTab=true keyTab='` + kt + `' principal=app;`,
				KeyKrb5Conf: conf},
			want:  Options{UseTicketCache: true, Principal: "app", KeytabPath: kt, ServiceName: "kafka"},
			cache: filepath.Join(dir, "env-cache"),
		},
		{
			name:  "librdkafka keytab",
			props: map[string]string{"sasl.mechanisms": "gssapi", KeyKeytab: kt, KeyPrincipal: "app@SAMSA.TEST", KeyKinitCmd: ""},
			want:  Options{Principal: "app@SAMSA.TEST", KeytabPath: kt, ServiceName: "kafka"},
		},
		{
			name:  "nothing: the ticket cache of KRB5CCNAME",
			props: map[string]string{},
			want:  Options{UseTicketCache: true, ServiceName: "kafka"},
			cache: filepath.Join(dir, "env-cache"),
		},
		{
			name: "renewal settings",
			props: map[string]string{KeyKeytab: kt, KeyPrincipal: "app", KeyRenewWindowFactor: "0.9", KeyRenewJitter: "0",
				KeyMinTimeBeforeRelogin: "5000"},
			want: Options{Principal: "app", KeytabPath: kt, ServiceName: "kafka", RenewWindowFactor: 0.9, RenewJitter: 0,
				MinTimeBeforeRelogin: 5 * time.Second},
		},
		{
			name:  "no minimum between logins",
			props: map[string]string{KeyKeytab: kt, KeyPrincipal: "app", KeyMinTimeBeforeRelogin: "0"},
			want:  Options{Principal: "app", KeytabPath: kt, ServiceName: "kafka", MinTimeBeforeRelogin: 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mech, err := FromProperties(tc.props)
			require.NoError(t, err)
			m := mech.(*mechanism)
			assert.Equal(t, tc.want.Principal, m.opts.Principal)
			assert.Equal(t, tc.want.KeytabPath, m.opts.KeytabPath)
			assert.Equal(t, tc.want.UseTicketCache, m.opts.UseTicketCache)
			assert.Equal(t, tc.want.ServiceName, m.opts.ServiceName)
			assert.Equal(t, tc.cache, m.cachePath)
			assert.Equal(t, conf, m.krb5Path)
			wantFactor, wantJitter, wantMin := DefaultRenewWindowFactor, DefaultRenewJitter, DefaultMinTimeBeforeRelogin
			if tc.want.RenewWindowFactor != 0 {
				wantFactor = tc.want.RenewWindowFactor
			}
			if _, set := tc.props[KeyRenewJitter]; set {
				wantJitter = tc.want.RenewJitter
			}
			if _, set := tc.props[KeyMinTimeBeforeRelogin]; set {
				wantMin = tc.want.MinTimeBeforeRelogin
			}
			assert.Equal(t, wantFactor, m.opts.RenewWindowFactor)
			assert.Equal(t, wantJitter, m.opts.RenewJitter)
			assert.Equal(t, wantMin, m.opts.MinTimeBeforeRelogin)
		})
	}
}

// TestFromPropertiesErrors: every refusal names the key and the fix, and
// never quotes the JAAS line.
func TestFromPropertiesErrors(t *testing.T) {
	dir, conf, kt := testFiles(t, "127.0.0.1:88", map[string]string{"app": "pw"})
	t.Setenv("KRB5_CONFIG", conf)
	noRealm := filepath.Join(dir, "norealm.conf")
	require.NoError(t, os.WriteFile(noRealm, []byte("[libdefaults]\n  dns_lookup_kdc = false\n"), 0o600))
	garbage := filepath.Join(dir, "garbage.keytab")
	require.NoError(t, os.WriteFile(garbage, []byte("not a keytab at all"), 0o600))
	jaas := func(opts string) map[string]string {
		return map[string]string{"sasl.jaas.config": krb5Module + " required " + opts + ";"}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	keytabJAAS := `useKeyTab=true keyTab="` + kt + `" principal="app"`
	cases := []struct {
		name  string
		props map[string]string
		want  []string
	}{
		{"kinit command", map[string]string{KeyKinitCmd: "kinit -R"}, []string{KeyKinitCmd, "no kinit command is run"}},
		{"another mechanism", map[string]string{"sasl.mechanism": "PLAIN"}, []string{`sasl.mechanism is "PLAIN", not GSSAPI`}},
		{"another login module", map[string]string{"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-SECRET";`},
			[]string{"PlainLoginModule does not go with GSSAPI"}},
		{"unknown option", jaas(keytabJAAS + ` password="pw-SECRET"`), []string{"option password is not Krb5LoginModule's"}},
		{"option in the wrong case", jaas(`usekeytab=true keyTab="` + kt + `"`), []string{"did you mean useKeyTab?"}},
		{"useKeyTab without keyTab", jaas(`useKeyTab=true principal=app`), []string{`useKeyTab=true needs keyTab=`}},
		{"keyTab without useKeyTab", jaas(`keyTab="` + kt + `" principal=app useTicketCache=true`), []string{"keyTab is set without useKeyTab=true"}},
		{"no credentials", jaas(`principal=app`), []string{"neither useKeyTab=true nor useTicketCache=true"}},
		{"not a boolean", jaas(`useKeyTab=yes keyTab="` + kt + `" principal=app`), []string{`useKeyTab="yes" is not true or false`}},
		{"acceptor", jaas(keytabJAAS + ` isInitiator=false`), []string{"isInitiator must be true"}},
		{"any principal", jaas(`useKeyTab=true keyTab="` + kt + `" principal="*"`), []string{`principal="*" is for brokers`}},
		{"keytab without principal", jaas(`useKeyTab=true keyTab="` + kt + `"`), []string{"a keytab needs its principal"}},
		{"unterminated quote", jaas(`useKeyTab=true keyTab="` + kt + ` principal=app`), []string{"an unterminated quoted value"}},
		{"no flag", map[string]string{"sasl.jaas.config": krb5Module + ` useKeyTab=true;`}, []string{"required, requisite"}},
		{"two modules", map[string]string{"sasl.jaas.config": krb5Module + ` required useTicketCache=true; ` + krb5Module + ` required useTicketCache=true;`},
			[]string{"more than one login module"}},
		{"JAAS and librdkafka keys", with(jaas(keytabJAAS), KeyKeytab, kt), []string{"conflicts with sasl.kerberos.keytab"}},
		{"service names disagree", with(jaas(keytabJAAS+` serviceName=a`), KeyServiceName, "b"), []string{`serviceName "a" conflicts with sasl.kerberos.service.name "b"`}},
		{"service name with host", map[string]string{KeyServiceName: "kafka/broker1"}, []string{"give only the service"}},
		{"librdkafka keytab without principal", map[string]string{KeyKeytab: kt}, []string{"sasl.kerberos.keytab needs sasl.kerberos.principal"}},
		{"missing keytab", map[string]string{KeyKeytab: filepath.Join(dir, "none.keytab"), KeyPrincipal: "app"}, []string{"the keytab", "no such file"}},
		{"garbage keytab", map[string]string{KeyKeytab: garbage, KeyPrincipal: "app"}, []string{"garbage.keytab does not parse"}},
		{"missing krb5.conf", map[string]string{KeyKrb5Conf: filepath.Join(dir, "none.conf")}, []string{"krb5.conf", "no such file"}},
		{"no realm", map[string]string{KeyKrb5Conf: noRealm, KeyKeytab: kt, KeyPrincipal: "app"}, []string{`"app" has no realm`}},
		{"keyring cache", jaas(`useTicketCache=true ticketCache="KEYRING:persistent:1000"`), []string{"of type KEYRING: only FILE caches"}},
		{"bad relogin time", map[string]string{KeyMinTimeBeforeRelogin: "soon"}, []string{KeyMinTimeBeforeRelogin, `"soon"`}},
		{"window factor out of range", map[string]string{KeyRenewWindowFactor: "0.2"}, []string{KeyRenewWindowFactor, "[0.5, 1]"}},
		{"jitter out of range", map[string]string{KeyRenewJitter: "0.5"}, []string{KeyRenewJitter, "[0, 0.25]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromProperties(tc.props)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "SECRET")
			if line := tc.props["sasl.jaas.config"]; line != "" {
				assert.NotContains(t, err.Error(), line)
			}
		})
	}
}

// TestConfigFromPropertiesWithGSSAPI: with this package imported, a
// producer is configured for GSSAPI by properties alone, Java's default
// mechanism included; its keys are accepted and not logged as ignored.
func TestConfigFromPropertiesWithGSSAPI(t *testing.T) {
	_, conf, kt := testFiles(t, "127.0.0.1:88", map[string]string{"app": "pw"})
	base := func(kv ...string) map[string]string {
		m := map[string]string{"bootstrap.servers": "localhost:9092", "security.protocol": "SASL_PLAINTEXT",
			KeyKrb5Conf: conf, "sasl.kerberos.service.name": "kafka"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name    string
		props   map[string]string
		wantErr []string
	}{
		{"JAAS keytab", base("sasl.mechanism", "GSSAPI", "sasl.jaas.config", krb5Module+` required useKeyTab=true keyTab="`+kt+`" principal="app";`), nil},
		{"Java's default mechanism", base("sasl.jaas.config", krb5Module+` required useKeyTab=true keyTab="`+kt+`" principal="app";`), nil},
		{"librdkafka's keys", base("sasl.mechanisms", "GSSAPI", KeyKeytab, kt, KeyPrincipal, "app@SAMSA.TEST", KeyMinTimeBeforeRelogin, "60000"), nil},
		{"error under sasl.mechanism", base("sasl.mechanism", "GSSAPI", KeyKinitCmd, "kinit"),
			[]string{"sasl.mechanism: GSSAPI: sasl.kerberos.kinit.cmd: no kinit command is run"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := producer.ConfigFromProperties(tc.props)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, producer.ErrInvalidConfig)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, cfg.SASL)
			assert.Equal(t, Name, cfg.SASL.Name())
			assert.Contains(t, fmt.Sprintf("%v", cfg.SASL), `principal="app`)

			// The producer logs no kerberos key as ignored.
			var logs strings.Builder
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg.Brokers = []string{"127.0.0.1:1"}
			p, err := producer.New(cfg)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, p.Close(ctx))
			assert.NotContains(t, logs.String(), "are ignored")
		})
	}
}
