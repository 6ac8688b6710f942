package producer

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/sasl"
)

// testFactoryName is registered by this file only; GSSAPI stays
// unregistered in this package's tests, so its hint is tested as a user
// without the kerberos module sees it.
const testFactoryName = "SAMSA-TEST-FACTORY"

type factoryMech struct{ props map[string]string }

func (factoryMech) Name() string { return testFactoryName }
func (factoryMech) Start(context.Context, string) (sasl.Session, []byte, error) {
	return nil, nil, errors.New("not for use")
}

func init() {
	sasl.RegisterMechanismFactory(testFactoryName, sasl.MechanismFactory{
		Keys: []string{"sasl.test.factory.file", "sasl.kerberos.service.name"},
		New: func(props map[string]string) (sasl.Mechanism, error) {
			if props["sasl.test.factory.file"] == "bad" {
				return nil, errors.New("the file is bad")
			}
			return factoryMech{props: props}, nil
		},
	})
}

// TestMechanismFactoryBuildsFromProperties: a registered factory builds
// Config.SASL from every property; the keys it reads are accepted, and are
// not logged as ignored while it uses them.
func TestMechanismFactoryBuildsFromProperties(t *testing.T) {
	cases := []struct {
		name        string
		props       map[string]string
		wantErr     []string
		wantIgnored []string
	}{
		{
			name: "factory builds the mechanism",
			props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "samsa-test-factory",
				"sasl.test.factory.file": " /a/file ", "sasl.kerberos.service.name": "kafka", "reconnect.backoff.ms": "1"},
			wantIgnored: []string{"reconnect.backoff.ms"},
		},
		{
			name: "factory error under sasl.mechanism",
			props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": testFactoryName,
				"sasl.test.factory.file": "bad"},
			wantErr: []string{"sasl.mechanism: SAMSA-TEST-FACTORY: the file is bad"},
		},
		{
			name: "factory keys ignored with another mechanism",
			props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
				"sasl.username": "u", "sasl.password": "p", "sasl.test.factory.file": "/a/file", "sasl.kerberos.service.name": "kafka"},
			wantIgnored: []string{"sasl.test.factory.file", "sasl.kerberos.service.name"},
		},
		{
			name: "GSSAPI without its module says how to enable it",
			props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
				"sasl.kerberos.service.name": "kafka"},
			wantErr: []string{"sasl.mechanism: GSSAPI (Kerberos) needs a module of its own", `import _ "github.com/samsa-go/samsa/sasl/kerberos"`},
		},
		{
			name:    "no mechanism without the GSSAPI module",
			props:   map[string]string{"security.protocol": "SASL_SSL"},
			wantErr: []string{"sasl.mechanism: not set", "the Java default, GSSAPI", "github.com/samsa-go/samsa/sasl/kerberos"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ConfigFromProperties(tc.props)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrInvalidConfig)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.wantIgnored, cfg.ignoredProps)
			if m, ok := cfg.SASL.(factoryMech); ok {
				assert.Equal(t, "/a/file", m.props["sasl.test.factory.file"], "values trimmed")
				assert.Equal(t, "1", m.props["reconnect.backoff.ms"], "every property")
			}
		})
	}
}

// TestMechanismFactoryCannotReplaceBuiltins: PLAIN stays the package's own
// even when a factory is registered under its name.
func TestMechanismFactoryCannotReplaceBuiltins(t *testing.T) {
	sasl.RegisterMechanismFactory("plain", sasl.MechanismFactory{New: func(map[string]string) (sasl.Mechanism, error) {
		return factoryMech{}, nil
	}})
	cfg, err := ConfigFromProperties(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
		"sasl.username": "u", "sasl.password": "p"})
	require.NoError(t, err)
	assert.Equal(t, "PLAIN", cfg.SASL.Name())
}
