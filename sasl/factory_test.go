package sasl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/samsa-go/samsa/sasl"
)

func TestRegisterMechanismFactory(t *testing.T) {
	newPlain := func(props map[string]string) (sasl.Mechanism, error) { return sasl.Plain(props["u"], "p"), nil }
	sasl.RegisterMechanismFactory("x-Factory-Test", sasl.MechanismFactory{Keys: []string{"x.factory.key"}, New: newPlain})

	cases := []struct {
		name    string
		lookup  string
		wantOK  bool
		key     string
		wantKey bool
	}{
		{"any case", "X-FACTORY-TEST", true, "x.factory.key", true},
		{"registered spelling", "x-Factory-Test", true, "x.factory.key", true},
		{"unregistered", "X-NONE", false, "x.other.key", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := sasl.LookupMechanismFactory(tc.lookup)
			assert.Equal(t, tc.wantOK, ok)
			if ok {
				m, err := f.New(map[string]string{"u": "user"})
				assert.NoError(t, err)
				assert.Equal(t, "PLAIN", m.Name())
			}
			assert.Equal(t, tc.wantKey, sasl.IsFactoryKey(tc.key))
		})
	}
	assert.Panics(t, func() { sasl.RegisterMechanismFactory("", sasl.MechanismFactory{New: newPlain}) })
	assert.Panics(t, func() { sasl.RegisterMechanismFactory("X", sasl.MechanismFactory{}) })
}
