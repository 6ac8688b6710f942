package kerberos

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-go/samsa/sasl"
)

// The property keys FromProperties reads, besides sasl.mechanism and
// sasl.jaas.config.
const (
	KeyServiceName          = "sasl.kerberos.service.name"
	KeyKeytab               = "sasl.kerberos.keytab"    // librdkafka
	KeyPrincipal            = "sasl.kerberos.principal" // librdkafka
	KeyKinitCmd             = "sasl.kerberos.kinit.cmd"
	KeyMinTimeBeforeRelogin = "sasl.kerberos.min.time.before.relogin"
	KeyRenewWindowFactor    = "sasl.kerberos.ticket.renew.window.factor"
	KeyRenewJitter          = "sasl.kerberos.ticket.renew.jitter"
	// KeyKrb5Conf names krb5.conf, as the JVM's system property of that
	// name does; taken here as a property.
	KeyKrb5Conf = "java.security.krb5.conf"
)

// propertyKeys are the keys registered with the factory: with this
// package imported, producer.ConfigFromProperties accepts them.
var propertyKeys = []string{KeyServiceName, KeyKeytab, KeyPrincipal, KeyKinitCmd,
	KeyMinTimeBeforeRelogin, KeyRenewWindowFactor, KeyRenewJitter, KeyKrb5Conf}

// init registers GSSAPI for producer.ConfigFromProperties: importing this
// package, even as import _ "github.com/samsa-go/samsa/sasl/kerberos", is
// all a program needs for sasl.mechanism=GSSAPI.
func init() {
	sasl.RegisterMechanismFactory(Name, sasl.MechanismFactory{Keys: propertyKeys, New: FromProperties})
}

// FromProperties builds the mechanism from Kafka client properties, as
// producer.ConfigFromProperties passes them once this package is
// imported:
//
//	sasl.mechanism (sasl.mechanisms)          GSSAPI, or unset (Java's default); another is an error
//	sasl.jaas.config                          com.sun.security.auth.module.Krb5LoginModule required
//	                                          with its options: useKeyTab=true keyTab="FILE"
//	                                          principal="NAME@REALM" (a keytab login), or
//	                                          useTicketCache=true [ticketCache="FILE"] (kinit's
//	                                          cache; with a keytab too, the cache comes first);
//	                                          serviceName; storeKey, doNotPrompt, renewTGT,
//	                                          refreshKrb5Config, debug, isInitiator=true and the
//	                                          *Pass options are accepted and change nothing
//	sasl.kerberos.keytab,
//	  sasl.kerberos.principal                 librdkafka's: a keytab login (instead of
//	                                          sasl.jaas.config); without a keytab, the ticket cache
//	sasl.kerberos.service.name                the brokers' service, SERVICE/host@REALM (default
//	                                          kafka; must agree with JAAS serviceName)
//	sasl.kerberos.ticket.renew.window.factor,
//	  sasl.kerberos.ticket.renew.jitter,
//	  sasl.kerberos.min.time.before.relogin   when the ticket is replaced (0.8, 0.05, 60000 ms, as
//	                                          in Java; 0 ms: no minimum)
//	java.security.krb5.conf                   krb5.conf (default KRB5_CONFIG, else /etc/krb5.conf)
//	sasl.kerberos.kinit.cmd                   refused unless empty: no command is run; the
//	                                          keytab logs in again, a ticket cache is read again
//	                                          and renewed
//
// Without sasl.jaas.config and librdkafka's keytab, the ticket cache is
// used (KRB5CCNAME, else /tmp/krb5cc_<uid>), as librdkafka's kinit
// leaves it. Other keys are not read. Errors name the key and never quote
// the JAAS line.
func FromProperties(props map[string]string) (sasl.Mechanism, error) {
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	for _, k := range []string{"sasl.mechanism", "sasl.mechanisms"} {
		if v := get(k); v != "" && !strings.EqualFold(v, Name) {
			return nil, fmt.Errorf("%s is %q, not GSSAPI", k, v)
		}
	}
	if v := get(KeyKinitCmd); v != "" {
		return nil, fmt.Errorf("%s: no kinit command is run: the keytab (sasl.kerberos.keytab, or JAAS useKeyTab=true keyTab=...) logs in again, and a ticket cache (useTicketCache=true) is read again and renewed; remove the key", KeyKinitCmd)
	}
	var opts Options
	opts.Krb5ConfPath = get(KeyKrb5Conf)
	opts.ServiceName = get(KeyServiceName)

	jaasLine := get("sasl.jaas.config")
	switch {
	case jaasLine != "":
		if get(KeyKeytab) != "" || get(KeyPrincipal) != "" {
			return nil, fmt.Errorf("sasl.jaas.config conflicts with %s and %s (both give the credentials)", KeyKeytab, KeyPrincipal)
		}
		if err := jaasOptions(jaasLine, &opts); err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: %w", err)
		}
	case get(KeyKeytab) != "":
		opts.KeytabPath, opts.Principal = get(KeyKeytab), get(KeyPrincipal)
		if opts.Principal == "" {
			return nil, fmt.Errorf("%s needs %s", KeyKeytab, KeyPrincipal)
		}
	default:
		opts.UseTicketCache, opts.Principal = true, get(KeyPrincipal)
	}

	if v := get(KeyMinTimeBeforeRelogin); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > int64(365*24*time.Hour/time.Millisecond) {
			return nil, fmt.Errorf("%s: %q is not a number of milliseconds", KeyMinTimeBeforeRelogin, v)
		}
		opts.MinTimeBeforeRelogin = time.Duration(n) * time.Millisecond
		if n == 0 {
			opts.MinTimeBeforeRelogin = -1 // none
		}
	}
	for _, f := range []struct {
		key    string
		dst    *float64
		lo, hi float64
	}{
		{KeyRenewWindowFactor, &opts.RenewWindowFactor, 0.5, 1},
		{KeyRenewJitter, &opts.RenewJitter, 0, 0.25},
	} {
		v := get(f.key)
		if v == "" {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < f.lo || x > f.hi {
			return nil, fmt.Errorf("%s: %q is not a number in [%v, %v]", f.key, v, f.lo, f.hi)
		}
		*f.dst = x
		if x == 0 {
			*f.dst = -1 // none: Options' zero value is the default
		}
	}
	return New(opts)
}

// krb5Options are Krb5LoginModule's options (Java's documentation), with
// whether samsa reads them.
var krb5Options = map[string]bool{
	"useKeyTab": true, "keyTab": true, "principal": true, "useTicketCache": true, "ticketCache": true,
	"serviceName": true, "isInitiator": true,
	"storeKey": false, "doNotPrompt": false, "renewTGT": false, "refreshKrb5Config": false, "debug": false,
	"useFirstPass": false, "tryFirstPass": false, "storePass": false, "clearPass": false,
}

// jaasOptions reads a Krb5LoginModule line into opts. Its errors never
// quote the line.
func jaasOptions(line string, opts *Options) error {
	module, options, err := parseJAAS(line)
	if err != nil {
		return err
	}
	if module != "Krb5LoginModule" && !strings.HasSuffix(module, ".Krb5LoginModule") {
		short := module[strings.LastIndexByte(module, '.')+1:]
		return fmt.Errorf("%s does not go with GSSAPI (use com.sun.security.auth.module.Krb5LoginModule)", short)
	}
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := krb5Options[k]; !ok {
			for known := range krb5Options {
				if strings.EqualFold(k, known) {
					return fmt.Errorf("option %s is not Krb5LoginModule's (did you mean %s?)", k, known)
				}
			}
			return fmt.Errorf("option %s is not Krb5LoginModule's", k)
		}
	}
	flag := func(k string) (bool, error) {
		switch v := options[k]; strings.ToLower(v) {
		case "", "false":
			return false, nil
		case "true":
			return true, nil
		default:
			return false, fmt.Errorf("option %s=%q is not true or false", k, v)
		}
	}
	useKeyTab, err := flag("useKeyTab")
	if err != nil {
		return err
	}
	if opts.UseTicketCache, err = flag("useTicketCache"); err != nil {
		return err
	}
	if v, set := options["isInitiator"]; set && !strings.EqualFold(v, "true") {
		return errors.New("option isInitiator must be true for a client")
	}
	opts.Principal = options["principal"]
	if opts.Principal == "*" {
		return errors.New(`principal="*" is for brokers (acceptors): give the client's principal`)
	}
	opts.TicketCachePath = options["ticketCache"]
	switch keyTab := options["keyTab"]; {
	case useKeyTab && keyTab == "":
		return errors.New(`useKeyTab=true needs keyTab="/path/to/file.keytab"`)
	case useKeyTab:
		opts.KeytabPath = keyTab
	case keyTab != "":
		return errors.New("keyTab is set without useKeyTab=true")
	}
	if !useKeyTab && !opts.UseTicketCache {
		return errors.New("neither useKeyTab=true nor useTicketCache=true: samsa cannot prompt for a password")
	}
	if sn := options["serviceName"]; sn != "" {
		if opts.ServiceName != "" && opts.ServiceName != sn {
			return fmt.Errorf("option serviceName %q conflicts with %s %q", sn, KeyServiceName, opts.ServiceName)
		}
		opts.ServiceName = sn
	}
	return nil
}

// parseJAAS reads one JAAS login module entry, "Class Flag key=value ...;",
// the values bare words or quoted ("..." or '...', a backslash escaping
// the next character), as Kafka's JaasConfig tokenizes it.
func parseJAAS(line string) (module string, options map[string]string, err error) {
	sc := jaasScanner{s: line}
	module, _ = sc.word()
	if module == "" {
		return "", nil, errors.New("no login module class")
	}
	switch flag, _ := sc.word(); strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, errors.New("the login module class must be followed by required, requisite, sufficient or optional")
	}
	options = map[string]string{}
	for {
		sc.space()
		if sc.done() {
			return module, options, nil // Java requires the ';': be lenient
		}
		if sc.peek() == ';' {
			sc.i++
			if sc.space(); !sc.done() {
				return "", nil, errors.New("more than one login module (only one is supported)")
			}
			return module, options, nil
		}
		key, _ := sc.word()
		if key == "" {
			return "", nil, errors.New("an option without a name")
		}
		if sc.space(); sc.done() || sc.peek() != '=' {
			return "", nil, fmt.Errorf("option %s has no value", key)
		}
		sc.i++
		val, err := sc.value()
		if err != nil {
			return "", nil, fmt.Errorf("option %s: %w", key, err)
		}
		options[key] = val
	}
}

// jaasScanner walks a JAAS line.
type jaasScanner struct {
	s string
	i int
}

func (sc *jaasScanner) done() bool { return sc.i >= len(sc.s) }
func (sc *jaasScanner) peek() byte { return sc.s[sc.i] }

func (sc *jaasScanner) space() {
	for !sc.done() && strings.IndexByte(" \t\r\n", sc.peek()) >= 0 {
		sc.i++
	}
}

// word reads a bare word: up to a space, '=' or ';'.
func (sc *jaasScanner) word() (string, bool) {
	sc.space()
	from := sc.i
	for !sc.done() && strings.IndexByte(" \t\r\n=;", sc.peek()) < 0 {
		sc.i++
	}
	return sc.s[from:sc.i], sc.i > from
}

// value reads a bare word or a quoted string.
func (sc *jaasScanner) value() (string, error) {
	sc.space()
	if sc.done() {
		return "", errors.New("no value")
	}
	q := sc.peek()
	if q != '"' && q != '\'' {
		w, _ := sc.word()
		return w, nil
	}
	var b strings.Builder
	for sc.i++; !sc.done(); sc.i++ {
		switch c := sc.peek(); {
		case c == q:
			sc.i++
			return b.String(), nil
		case c == '\\' && sc.i+1 < len(sc.s):
			sc.i++
			b.WriteByte(sc.peek())
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("an unterminated quoted value")
}
