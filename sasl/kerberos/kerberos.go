package kerberos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/samsa-go/samsa/sasl"
)

// Name is the mechanism's name in SaslHandshake.
const Name = "GSSAPI"

// Defaults, as Kafka's Java client has them (sasl.kerberos.*), but for the
// service name, which Java requires and librdkafka defaults to "kafka".
const (
	DefaultServiceName          = "kafka"
	DefaultRenewWindowFactor    = 0.8
	DefaultRenewJitter          = 0.05
	DefaultMinTimeBeforeRelogin = time.Minute
)

// Options configure the mechanism. Nothing in them is secret: a keytab is
// named by its path and read at every login.
type Options struct {
	// Principal is the client's principal: "name@REALM", or "name" for
	// krb5.conf's default_realm ("app@EXAMPLE.COM",
	// "app/host.example.com@EXAMPLE.COM"). Required with KeytabPath; with
	// a ticket cache alone, the cache's principal is used, and Principal,
	// if set, must be that one.
	Principal string

	// KeytabPath is the keytab to log in with (Java's useKeyTab=true
	// keyTab="..."). It is read again at every login, so a rotated keytab
	// is picked up.
	KeytabPath string

	// UseTicketCache takes the ticket-granting ticket from a ticket cache,
	// as kinit leaves it (Java's useTicketCache=true). With KeytabPath
	// too, the cache comes first and the keytab is the fallback once the
	// cache's ticket has expired and cannot be renewed, as in Java.
	UseTicketCache bool

	// TicketCachePath is the ticket cache file. Default: KRB5CCNAME (a
	// FILE: cache or a path), else /tmp/krb5cc_<uid>.
	TicketCachePath string

	// Krb5ConfPath is the krb5.conf naming the realms' KDCs (Java's
	// java.security.krb5.conf). Default: KRB5_CONFIG (colon-separated
	// files, read together), else /etc/krb5.conf.
	Krb5ConfPath string

	// ServiceName is the first part of the brokers' principal,
	// SERVICE/host@REALM (sasl.kerberos.service.name). Default
	// DefaultServiceName.
	ServiceName string

	// RenewWindowFactor and RenewJitter say when a ticket-granting ticket
	// is replaced: after RenewWindowFactor plus up to RenewJitter of its
	// lifetime (sasl.kerberos.ticket.renew.window.factor and
	// sasl.kerberos.ticket.renew.jitter). Defaults DefaultRenewWindowFactor
	// (0.5 to 1 allowed) and DefaultRenewJitter (up to 0.25; negative:
	// none).
	RenewWindowFactor float64
	RenewJitter       float64

	// MinTimeBeforeRelogin is the least time between two logins while the
	// ticket is still good (sasl.kerberos.min.time.before.relogin): a
	// ticket about to expire is replaced whatever it says. Default
	// DefaultMinTimeBeforeRelogin; negative: none.
	MinTimeBeforeRelogin time.Duration

	// Logger gets a Warn when replacing a ticket fails while the old one
	// is still good (the exchange goes on with it), and Debug lines for
	// logins. Default slog.Default().
	Logger *slog.Logger
}

// New returns the GSSAPI mechanism. It reads krb5.conf and checks that the
// keytab, if any, parses; it logs in only when the first connection
// starts its exchange, so a refused login (a wrong principal, a wrong key,
// an expired ticket cache) fails that exchange: the producer reports it as
// producer.ErrAuthentication. New fails on options that cannot work: no
// keytab and no ticket cache, a keytab without Principal, a realm neither
// in Principal nor in krb5.conf, values out of range.
func New(opts Options) (sasl.Mechanism, error) {
	if opts.KeytabPath == "" && !opts.UseTicketCache {
		return nil, errors.New("kerberos: no credentials: set KeytabPath (useKeyTab=true keyTab=...) or UseTicketCache (useTicketCache=true)")
	}
	if opts.ServiceName == "" {
		opts.ServiceName = DefaultServiceName
	}
	if strings.ContainsAny(opts.ServiceName, "/@ ") {
		return nil, fmt.Errorf("kerberos: the service name %q has a '/', '@' or space: give only the service (kafka)", opts.ServiceName)
	}
	switch {
	case opts.RenewWindowFactor == 0:
		opts.RenewWindowFactor = DefaultRenewWindowFactor
	case opts.RenewWindowFactor < 0.5 || opts.RenewWindowFactor > 1:
		return nil, fmt.Errorf("kerberos: the renew window factor %v is not in [0.5, 1]", opts.RenewWindowFactor)
	}
	switch {
	case opts.RenewJitter == 0:
		opts.RenewJitter = DefaultRenewJitter
	case opts.RenewJitter < 0:
		opts.RenewJitter = 0
	case opts.RenewJitter > 0.25:
		return nil, fmt.Errorf("kerberos: the renew jitter %v is more than 0.25", opts.RenewJitter)
	}
	switch {
	case opts.MinTimeBeforeRelogin == 0:
		opts.MinTimeBeforeRelogin = DefaultMinTimeBeforeRelogin
	case opts.MinTimeBeforeRelogin < 0:
		opts.MinTimeBeforeRelogin = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &mechanism{opts: opts, now: time.Now, jitter: rand.Float64}

	var err error
	if m.krb5Path, m.krb5, err = loadKrb5Conf(opts.Krb5ConfPath); err != nil {
		return nil, err
	}
	if opts.Principal != "" {
		if m.user, m.realm, err = splitPrincipal(opts.Principal, m.krb5.LibDefaults.DefaultRealm); err != nil {
			return nil, err
		}
	}
	if opts.KeytabPath != "" {
		if opts.Principal == "" {
			return nil, errors.New("kerberos: a keytab needs its principal (principal=\"name@REALM\")")
		}
		if _, err := readKeytab(opts.KeytabPath); err != nil {
			return nil, err
		}
	}
	if opts.UseTicketCache {
		if m.cachePath, err = ticketCachePath(opts.TicketCachePath); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// mechanism is the GSSAPI mechanism. Its ticket-granting ticket is shared
// by every connection and replaced by whichever exchange finds it due
// (login.go); each exchange asks the KDC for a fresh service ticket.
type mechanism struct {
	opts      Options
	krb5      *config.Config
	krb5Path  string
	user      string // the principal's name part, "" until known (ticket cache alone)
	realm     string
	cachePath string

	now    func() time.Time
	jitter func() float64

	mu         sync.Mutex
	tgt        *tgt                     // nil before the first login
	refreshing *loginFlight             // the login under way, if any
	lastLogin  time.Time                // the last login attempt's start
	tickets    map[string]serviceTicket // the last service ticket per principal, for KDC outages
}

func (*mechanism) Name() string { return Name }

// String names the principal, the credentials' files and the service:
// never a key.
func (m *mechanism) String() string {
	var b strings.Builder
	b.WriteString(Name + "(")
	if m.opts.Principal != "" {
		fmt.Fprintf(&b, "principal=%q, ", m.opts.Principal)
	}
	if m.opts.UseTicketCache {
		fmt.Fprintf(&b, "ticketCache=%q, ", m.cachePath)
	}
	if m.opts.KeytabPath != "" {
		fmt.Fprintf(&b, "keyTab=%q, ", m.opts.KeytabPath)
	}
	fmt.Fprintf(&b, "service=%q)", m.opts.ServiceName)
	return b.String()
}

func (m *mechanism) GoString() string { return m.String() }

// Format prints String for every verb: the mechanism holds tickets and
// session keys, which no verb may print.
func (m *mechanism) Format(f fmt.State, _ rune) { fmt.Fprint(f, m.String()) }

// Start gets a ticket-granting ticket if none is held or the one held is
// due (login.go), then a service ticket for SERVICE/host, host as addr
// names it (Java and librdkafka do not canonicalize it either: dial the
// name the broker's principal has), and returns the AP-REQ. The KDC's
// requests are bounded by gokrb5's timeouts (5 s per KDC address and
// protocol) and krb5.conf, not by ctx: a cancelled ctx is noticed between
// them, and by an exchange waiting for another's login.
func (m *mechanism) Start(ctx context.Context, addr string) (sasl.Session, []byte, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return nil, nil, fmt.Errorf("kerberos: no host in the broker address %q", addr)
	}
	t, err := m.currentTGT(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	st, err := m.serviceTicket(t, host)
	if err != nil {
		return nil, nil, err
	}
	s, msg, err := newSession(t.realm, t.cname, st.ticket, st.key)
	if err != nil {
		return nil, nil, err
	}
	return s, msg, nil
}

// splitPrincipal splits "name@REALM"; a name without a realm takes def.
func splitPrincipal(p, def string) (name, realm string, err error) {
	name, realm = p, def
	if i := strings.LastIndexByte(p, '@'); i >= 0 {
		name, realm = p[:i], p[i+1:]
	}
	switch {
	case name == "":
		return "", "", fmt.Errorf("kerberos: the principal %q has no name", p)
	case realm == "":
		return "", "", fmt.Errorf("kerberos: the principal %q has no realm, and krb5.conf has no default_realm", p)
	}
	return name, realm, nil
}

// loadKrb5Conf reads krb5.conf: path, else KRB5_CONFIG's files (the
// missing ones skipped, as MIT Kerberos does), else /etc/krb5.conf.
func loadKrb5Conf(path string) (string, *config.Config, error) {
	var paths []string
	switch env := os.Getenv("KRB5_CONFIG"); {
	case path != "":
		paths = []string{path}
	case env != "":
		paths = strings.Split(env, ":")
	default:
		paths = []string{"/etc/krb5.conf"}
	}
	var text strings.Builder
	var read []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if len(paths) > 1 && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", nil, fmt.Errorf("kerberos: krb5.conf: %w", err)
		}
		read = append(read, p)
		text.Write(b)
		text.WriteByte('\n')
	}
	name := strings.Join(read, ":")
	if len(read) == 0 {
		return "", nil, fmt.Errorf("kerberos: krb5.conf: none of KRB5_CONFIG's files (%s) exists", strings.Join(paths, ":"))
	}
	cfg, err := config.NewFromString(text.String())
	var unsupported config.UnsupportedDirective
	if err != nil && !(errors.As(err, &unsupported) && cfg != nil) {
		return "", nil, fmt.Errorf("kerberos: krb5.conf %s: %v", name, err)
	}
	return name, cfg, nil
}

// readKeytab reads a keytab file; its errors name the file, never a key.
func readKeytab(path string) (kt *keytab.Keytab, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kerberos: the keytab: %w", err)
	}
	defer func() {
		if recover() != nil {
			kt, err = nil, fmt.Errorf("kerberos: the keytab %s does not parse", path)
		}
	}()
	kt = keytab.New()
	if err := kt.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("kerberos: the keytab %s does not parse", path)
	}
	return kt, nil
}

// ticketCachePath resolves the ticket cache: path, else KRB5CCNAME, else
// /tmp/krb5cc_<uid>. Only FILE caches can be read.
func ticketCachePath(path string) (string, error) {
	if path == "" {
		path = os.Getenv("KRB5CCNAME")
	}
	if path == "" {
		return "/tmp/krb5cc_" + strconv.Itoa(os.Getuid()), nil
	}
	if rest, ok := strings.CutPrefix(path, "FILE:"); ok {
		return rest, nil
	}
	if i := strings.IndexByte(path, ':'); i > 0 && !strings.ContainsAny(path[:i], "/\\") {
		return "", fmt.Errorf("kerberos: the ticket cache %q is of type %s: only FILE caches can be read (kinit -c FILE:/path)", path, path[:i])
	}
	return path, nil
}
