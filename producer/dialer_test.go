package producer

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/testbroker"
)

// trackingDialer dials through a net.Dialer, after mapping a host name it
// knows to a real address, and counts the connections it opened that are
// still open.
type trackingDialer struct {
	route map[string]string // addr -> real addr; others dialed as given
	mu    sync.Mutex
	addrs []string // every addr asked for, in order
	conns []net.Conn
	open  atomic.Int64
}

type trackedConn struct {
	net.Conn
	d    *trackingDialer
	once sync.Once
}

// NetConn returns the connection under c, as a *tls.Conn's does: samsa
// sizes its socket buffers through it.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.d.open.Add(-1) })
	return c.Conn.Close()
}

func (d *trackingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	real := addr
	if r, ok := d.route[addr]; ok {
		real = r
	}
	d.mu.Unlock()
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, real)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	d.mu.Lock()
	d.conns = append(d.conns, nc)
	d.mu.Unlock()
	return &trackedConn{Conn: nc, d: d}, nil
}

func (d *trackingDialer) asked() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// Config.Dialer opens every connection the producer makes: metadata,
// CreateTopics, Produce and the transaction coordinator's. The cluster
// counts the connections open to it; all of them are the Dialer's.
func TestDialerOpensEveryConnection(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	d := &trackingDialer{}
	p := newProducer(t, c, Config{Dialer: d.dial, TransactionalID: "dialer-tx", AutoCreateTopics: true, AutoCreatePartitions: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	fs := make([]*Future, 0, 40)
	for i := range 40 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "dialed", Key: []byte{byte(i)}, Value: []byte("v")}))
	}
	require.NoError(t, p.CommitTransaction(ctx))
	waitAll(t, fs)

	st := c.Stats()
	for _, key := range []int16{3, 19, 10, 22, 24, 0, 26} { // Metadata, CreateTopics, FindCoordinator, InitProducerId, AddPartitionsToTxn, Produce, EndTxn
		assert.Positive(t, st.Requests[key], "API key %d was not used", key)
	}
	// A connection the producer closed may still count at the broker for a
	// moment; one that bypassed the Dialer would count for good.
	require.Eventually(t, func() bool { return int64(c.Stats().Connections) == d.open.Load() }, 10*time.Second, 5*time.Millisecond,
		"the cluster has %d connections open, the Dialer %d", c.Stats().Connections, d.open.Load())
	assert.GreaterOrEqual(t, d.open.Load(), int64(4), "metadata, CreateTopics, Produce and coordinator connections")
}

// ClientDNSLookup: with DNSUseAllIPs (the default) a Dialer gets the
// bootstrap address as given, and the default dialing tries each address a
// name resolves to; with DNSResolveCanonicalBootstrapServersOnly the
// Dialer gets the canonical names of the bootstrap host's addresses. The
// producer delivers in every case.
func TestClientDNSLookup(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	real := c.Addrs()[0]
	_, port, _ := net.SplitHostPort(real)
	old := conn.Resolver
	conn.Resolver = staticResolver{
		hosts: map[string][]string{"kafka.test": {"127.0.0.2", "127.0.0.1"}, "kafka-1.canonical.test": {"127.0.0.1"}},
		names: map[string][]string{"127.0.0.1": {"kafka-1.canonical.test."}, "127.0.0.2": {"gone.canonical.test."}},
	}
	t.Cleanup(func() { conn.Resolver = old })
	boot := net.JoinHostPort("kafka.test", port)
	canonical := net.JoinHostPort("kafka-1.canonical.test", port)
	gone := net.JoinHostPort("gone.canonical.test", port) // its Dialer fails

	cases := []struct {
		name      string
		lookup    DNSLookup
		dialer    bool
		wantFirst []string // the Dialer's first addresses
	}{
		{"default, a Dialer", "", true, []string{boot}},
		{"use_all_dns_ips, a Dialer", DNSUseAllIPs, true, []string{boot}},
		{"use_all_dns_ips, every address tried", DNSUseAllIPs, false, nil},
		{"canonical bootstrap, a Dialer", DNSResolveCanonicalBootstrapServersOnly, true, []string{gone, canonical}},
		{"canonical bootstrap", DNSResolveCanonicalBootstrapServersOnly, false, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &trackingDialer{route: map[string]string{boot: real, canonical: real, gone: "127.0.0.2:" + port}}
			cfg := Config{Brokers: []string{boot}, ClientDNSLookup: tc.lookup, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond}
			if tc.dialer {
				cfg.Dialer = d.dial
			}
			p, err := New(cfg)
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = p.Close(ctx)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topic := "dns-" + string(rune('a'+i))
			require.NoError(t, c.CreateTopic(topic, 1))
			_, err = p.Send(ctx, &Record{Topic: topic, Value: []byte("v")}).Wait(ctx)
			require.NoError(t, err)
			if tc.dialer {
				asked := d.asked()
				require.GreaterOrEqual(t, len(asked), len(tc.wantFirst))
				assert.Equal(t, tc.wantFirst, asked[:len(tc.wantFirst)], "the Dialer's addresses: %q", asked)
				for _, a := range asked {
					assert.False(t, strings.HasPrefix(a, "127.0.0.2"), "nothing is resolved before the Dialer: %q", asked)
				}
			}
		})
	}
}

// staticResolver answers from maps; a name it does not know is not found.
type staticResolver struct{ hosts, names map[string][]string }

func (r staticResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r staticResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if n, ok := r.names[addr]; ok {
		return n, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}
