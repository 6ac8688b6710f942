package conn

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/kerr"
)

// fakeResolver answers from maps; a name it does not know is not found.
type fakeResolver struct {
	hosts map[string][]string // host -> addresses
	names map[string][]string // address -> names
	mu    sync.Mutex
	asked []string
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if n, ok := r.names[addr]; ok {
		return n, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}

// useResolver replaces Resolver for the test.
func useResolver(t *testing.T, r DNSResolver) {
	old := Resolver
	Resolver = r
	t.Cleanup(func() { Resolver = old })
}

// The default Dialer tries every address a host resolves to, in order,
// until one connects (client.dns.lookup=use_all_dns_ips): a host whose
// first address is dead still connects.
func TestDefaultDialerTriesEachAddress(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	_, port, _ := net.SplitHostPort(b.addr())
	useResolver(t, &fakeResolver{hosts: map[string][]string{
		"two.test":  {"127.0.0.2", "127.0.0.1"}, // nothing listens on 127.0.0.2
		"dead.test": {"127.0.0.2", "127.0.0.3"},
		"none.test": {},
	}})
	cases := []struct {
		name    string
		host    string
		wantErr string // "" : connects
	}{
		{"second address connects", "two.test", ""},
		{"IP addresses are dialed as given", "127.0.0.1", ""},
		{"every address dead", "dead.test", "no address of dead.test accepted the connection (2 resolved): "},
		{"no address", "none.test", `no such host "none.test"`},
		{"unknown host", "unknown.test", "no such host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(context.Background(), net.JoinHostPort(tc.host, port), Config{DialTimeout: 20 * time.Second})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				_ = c.Close()
				return
			}
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, kerr.NetworkException) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Dial error %v, want NETWORK_EXCEPTION with %q", err, tc.wantErr)
			}
			if tc.host == "dead.test" && (!strings.Contains(err.Error(), "127.0.0.2:"+port) || !strings.Contains(err.Error(), "127.0.0.3:"+port)) {
				t.Fatalf("Dial error %v does not name each address tried", err)
			}
		})
	}
}

// A Dialer given in Config gets the address as given: nothing is resolved
// before it.
func TestUserDialerGetsTheAddressAsGiven(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	r := &fakeResolver{}
	useResolver(t, r)
	var got string
	c, err := Dial(context.Background(), "broker.test:9092", Config{Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		got = addr
		var d net.Dialer
		return d.DialContext(ctx, network, b.addr())
	}})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	_ = c.Close()
	if got != "broker.test:9092" || len(r.asked) != 0 {
		t.Fatalf("the Dialer got %q, the resolver was asked %q", got, r.asked)
	}
}

// client.dns.lookup=resolve_canonical_bootstrap_servers_only: a bootstrap
// address becomes one address per resolved IP, named by its reverse
// lookup (the IP when it has no name).
func TestCanonicalAddrs(t *testing.T) {
	useResolver(t, &fakeResolver{
		hosts: map[string][]string{
			"kafka.test": {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"},
			"empty.test": {},
		},
		names: map[string][]string{
			"10.0.0.1":  {"b1.example.com."},
			"10.0.0.2":  {"b2.example.com.", "alias.example.com."},
			"10.0.0.4":  {"b1.example.com."}, // a second address of b1
			"127.0.0.1": {"localhost"},
		},
	})
	cases := []struct {
		addr    string
		want    []string
		wantErr string
	}{
		{"kafka.test:9092", []string{"b1.example.com:9092", "b2.example.com:9092", "10.0.0.3:9092"}, ""},
		{"127.0.0.1:9093", []string{"localhost:9093"}, ""},
		{"10.9.9.9:9092", []string{"10.9.9.9:9092"}, ""},
		{"gone.test:9092", nil, "no such host"},
		{"empty.test:9092", nil, "no addresses"},
		{"no-port", nil, "missing port"},
	}
	for _, tc := range cases {
		got, err := CanonicalAddrs(context.Background(), tc.addr)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("CanonicalAddrs(%q) = %q, %v; want an error with %q", tc.addr, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("CanonicalAddrs(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
}

// socket.connection.setup.timeout.max.ms: each consecutive failed setup to
// an address doubles the next one's timeout, with ±20% jitter, up to the
// maximum; a success starts again from DialTimeout; other addresses keep
// their own count. The timeout is read from the deadline the Dialer gets.
func TestSetupTimeoutGrowsPerFailedAttempt(t *testing.T) {
	const base, limit = 10 * time.Second, 100 * time.Second
	var (
		fail    = errors.New("refused")
		ok      bool
		lastDur time.Duration
	)
	b := newFakeBroker(t, metadataEcho)
	setups := &SetupTimeouts{}
	cfg := Config{DialTimeout: base, DialTimeoutMax: limit, Setups: setups,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dl, _ := ctx.Deadline()
			lastDur = time.Until(dl)
			if !ok {
				return nil, fail
			}
			var d net.Dialer
			return d.DialContext(ctx, network, b.addr())
		}}
	// want bounds the timeout of each attempt: [lo, hi].
	cases := []struct {
		succeed bool
		lo, hi  time.Duration
	}{
		{false, base - time.Second, base},                       // first attempt: DialTimeout
		{false, 16*time.Second - time.Second, 24 * time.Second}, // ×2 ±20%
		{false, 32*time.Second - time.Second, 48 * time.Second}, // ×4
		{false, 64*time.Second - time.Second, limit},            // ×8, capped
		{false, limit - 21*time.Second, limit},                  // ×16: the cap, jittered below it
		{true, limit - 21*time.Second, limit},
		{false, base - time.Second, base}, // after a success: DialTimeout again
	}
	for i, tc := range cases {
		ok = tc.succeed
		c, err := Dial(context.Background(), "a:1", cfg)
		if (err == nil) != tc.succeed {
			t.Fatalf("attempt %d: Dial error %v", i, err)
		}
		if c != nil {
			_ = c.Close()
		}
		if lastDur < tc.lo || lastDur > tc.hi {
			t.Fatalf("attempt %d: setup timeout %v, want in [%v, %v]", i, lastDur, tc.lo, tc.hi)
		}
	}
	// Another address has its own count; a nil tracker keeps DialTimeout.
	ok = false
	for _, s := range []*SetupTimeouts{setups, nil} {
		cfg.Setups = s
		if _, err := Dial(context.Background(), "b:1", cfg); err == nil {
			t.Fatal("Dial succeeded")
		}
		if lastDur > base {
			t.Fatalf("setup timeout %v for a first attempt, want at most %v", lastDur, base)
		}
	}
	if got := setups.timeout("b:1", base, base); got != base {
		t.Fatalf("with DialTimeoutMax = DialTimeout the timeout grew to %v", got)
	}
}

// A host name that resolves to addresses none of which accepts fails as
// an IP address does: the cause stays in the error's chain
// (errors.Is(err, syscall.ECONNREFUSED)), and with one address the text
// says "connection refused", not a list of one.
func TestDefaultDialerKeepsTheCause(t *testing.T) {
	refused := testutil.RefusedAddr(t)
	_, port, _ := net.SplitHostPort(refused)
	useResolver(t, &fakeResolver{hosts: map[string][]string{
		"one.test": {"127.0.0.1"},
		"two.test": {"127.0.0.1", "127.0.0.1"},
	}})
	cases := []struct {
		host string
		text string // the error's text after "cannot connect to broker <addr>: "
	}{
		{"127.0.0.1", "connection refused (nothing is listening there)"},
		{"one.test", "connection refused (nothing is listening there)"},
		{"two.test", "no address of two.test accepted the connection (2 resolved): "},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			addr := net.JoinHostPort(tc.host, port)
			c, err := Dial(context.Background(), addr, Config{DialTimeout: 5 * time.Second})
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, kerr.NetworkException) {
				t.Fatalf("Dial error %v does not wrap ECONNREFUSED and NETWORK_EXCEPTION", err)
			}
			if !strings.HasPrefix(err.Error(), "cannot connect to broker "+addr+": "+tc.text) {
				t.Fatalf("Dial error %q, want it to start with %q", err, "cannot connect to broker "+addr+": "+tc.text)
			}
		})
	}
}

// A timeout's text names the timeout the dial had: after failed attempts
// that is the grown one (Config.Setups), not DialTimeout.
func TestTimeoutTextNamesTheGrownTimeout(t *testing.T) {
	const base = 20 * time.Millisecond
	setups := &SetupTimeouts{}
	setups.done("a:1", false)
	setups.done("a:1", false) // the next timeout: 4 × base, ±20%
	blocking := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_, err := Dial(context.Background(), "a:1", Config{DialTimeout: base, DialTimeoutMax: time.Minute, Setups: setups, Dialer: blocking})
	if err == nil {
		t.Fatal("Dial succeeded")
	}
	text, ok := strings.CutPrefix(err.Error(), "cannot connect to broker a:1: timed out after ")
	if !ok {
		t.Fatalf("Dial error %q", err)
	}
	d, perr := time.ParseDuration(text)
	if perr != nil || d < 64*time.Millisecond || d > 96*time.Millisecond {
		t.Fatalf("Dial error %q names %v, want the grown timeout, in [64ms, 96ms]", err, d)
	}
}
