package sasl

import (
	"strings"
	"sync"
)

// MechanismFactory builds a mechanism from configuration properties, for
// producer.ConfigFromProperties: a mechanism that lives in a module of its
// own (GSSAPI in github.com/samsa-go/samsa/sasl/kerberos) registers one
// with RegisterMechanismFactory, so that a program importing that module
// is configured by properties alone.
type MechanismFactory struct {
	// Keys are the property keys New reads that producer's properties
	// loader does not know by itself (a key that it knows, such as
	// sasl.jaas.config or sasl.kerberos.service.name, may be listed too).
	// While the factory is registered, ConfigFromProperties accepts them
	// instead of reporting them unknown, and logs them as ignored when
	// sasl.mechanism names another mechanism.
	Keys []string

	// New builds the mechanism from every property given to
	// ConfigFromProperties, values trimmed of surrounding spaces. Its
	// error is reported under the key sasl.mechanism and must not quote a
	// secret (a password, a JAAS line, a key's bytes). Required.
	New func(props map[string]string) (Mechanism, error)
}

var factories struct {
	mu sync.RWMutex
	m  map[string]MechanismFactory
}

// RegisterMechanismFactory makes producer.ConfigFromProperties build
// mechanism name (as sasl.mechanism spells it, in any case) with f. It is
// meant for a package's init: importing the package, even as
// import _ "...", enables the mechanism in properties. A later
// registration of the same name replaces the earlier one. The mechanisms
// of this package (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) are
// built in and cannot be replaced. It panics if name is empty or f.New is
// nil.
func RegisterMechanismFactory(name string, f MechanismFactory) {
	if name == "" || f.New == nil {
		panic("sasl: RegisterMechanismFactory needs a name and a New function")
	}
	f.Keys = append([]string(nil), f.Keys...)
	factories.mu.Lock()
	defer factories.mu.Unlock()
	if factories.m == nil {
		factories.m = map[string]MechanismFactory{}
	}
	factories.m[strings.ToUpper(name)] = f
}

// LookupMechanismFactory returns the factory registered for mechanism
// name (in any case), if any.
func LookupMechanismFactory(name string) (MechanismFactory, bool) {
	factories.mu.RLock()
	defer factories.mu.RUnlock()
	f, ok := factories.m[strings.ToUpper(name)]
	return f, ok
}

// IsFactoryKey reports whether key is one of the Keys of a registered
// factory.
func IsFactoryKey(key string) bool {
	factories.mu.RLock()
	defer factories.mu.RUnlock()
	for _, f := range factories.m {
		for _, k := range f.Keys {
			if k == key {
				return true
			}
		}
	}
	return false
}
