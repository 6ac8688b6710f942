package metadata

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
)

// mapResolver answers from maps; a name it does not know is not found.
type mapResolver struct {
	hosts, names map[string][]string
}

func (r mapResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r mapResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if n, ok := r.names[addr]; ok {
		return n, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}

// client.dns.lookup: by default a bootstrap name goes to the Dialer as
// given, and the default Dialer tries each address it resolves to (a dead
// first one included); with ResolveCanonicalBootstrap the Dialer gets the
// canonical names of its addresses, and a name that does not resolve is
// reported.
func TestBootstrapDNSLookup(t *testing.T) {
	cl := newCluster(t, 1)
	_, port, _ := net.SplitHostPort(cl.Addrs()[0])
	old := conn.Resolver
	conn.Resolver = mapResolver{
		hosts: map[string][]string{"kafka.test": {"127.0.0.2", "127.0.0.1"},
			"broker-1.canonical.test": {"127.0.0.1"}, "dead.canonical.test": {"127.0.0.2"}},
		names: map[string][]string{"127.0.0.1": {"broker-1.canonical.test."}, "127.0.0.2": {"dead.canonical.test."}},
	}
	t.Cleanup(func() { conn.Resolver = old })

	cases := []struct {
		name      string
		bootstrap string
		canonical bool
		userDial  bool
		wantDials []string // the Dialer's addresses, in order (port added)
		wantErr   string
	}{
		{"as given to the Dialer", "kafka.test", false, true, []string{"kafka.test"}, ""},
		{"each address by the default Dialer", "kafka.test", false, false, nil, ""},
		{"canonical names", "kafka.test", true, true, []string{"dead.canonical.test", "broker-1.canonical.test"}, ""},
		{"canonical names, default Dialer", "kafka.test", true, false, nil, ""},
		{"canonical, not resolvable", "gone.test", true, true, nil, "resolving bootstrap gone.test:" + port},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var dials []string
			cfg := Config{Bootstrap: []string{net.JoinHostPort(tc.bootstrap, port)}, ResolveCanonicalBootstrap: tc.canonical}
			if tc.userDial {
				cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
					mu.Lock()
					dials = append(dials, addr)
					mu.Unlock()
					host, _, _ := net.SplitHostPort(addr)
					if host == "dead.canonical.test" {
						return nil, errors.New("refused")
					}
					var d net.Dialer
					return d.DialContext(ctx, network, cl.Addrs()[0])
				}
			}
			c := newClient(t, cfg)
			_, err := c.Do(context.Background(), kmsg.NewPtrMetadataRequest())
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNoBroker) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Do: %v, want ErrNoBroker with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			var want []string
			for _, h := range tc.wantDials {
				want = append(want, net.JoinHostPort(h, port))
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(dials, ",") != strings.Join(want, ",") {
				t.Fatalf("the Dialer got %q, want %q", dials, want)
			}
		})
	}
}
