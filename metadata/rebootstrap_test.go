package metadata

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/kerr"
)

// movingName is a bootstrap name ("kafka.test:9092") that a test points
// at one cluster, then another, as DNS would: the Dialer resolves it at
// every dial.
type movingName struct{ target atomic.Value }

func (m *movingName) point(cl *testbroker.Cluster) { m.target.Store(cl.Addrs()[0]) }

func (m *movingName) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == "kafka.test:9092" {
		addr = m.target.Load().(string)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// clusterWith starts a cluster of n brokers with cluster id id ("" for
// the default) and the topics given, closed with the test.
func clusterWith(t *testing.T, n int, id string, topics ...string) *testbroker.Cluster {
	t.Helper()
	cl, err := testbroker.New(testbroker.Config{Brokers: n, ClusterID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	for _, tp := range topics {
		if err := cl.CreateTopic(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// onCluster reports whether s lists the broker 0 of a cluster whose
// addresses are addrs (Cluster.Addrs, taken before a Close).
func onCluster(s *Snapshot, addrs []string) bool {
	b, ok := s.Brokers[0]
	return ok && b.Addr() == addrs[0]
}

// stays fails the test if cond stops holding within d.
func stays(t *testing.T, c *Client, d time.Duration, what string, cond func(*Snapshot) bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !cond(c.Snapshot()) {
			t.Fatalf("%s: no longer true after %v: %+v", what, d-time.Until(end), c.Snapshot())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metadata.recovery.strategy: with rebootstrap (the default) a client
// whose brokers all went away finds the cluster again behind its
// bootstrap name; with none (DisableRebootstrap) it keeps asking the
// brokers it knows, as Java's does, and never goes back to the name.
func TestRecoveryStrategyWhenEveryBrokerIsGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		none  bool
		moves bool
	}{{"rebootstrap", false, true}, {"none", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			first := clusterWith(t, 2, "", "t")
			firstAddrs := first.Addrs()
			second := clusterWith(t, 2, "", "t") // the same cluster id, moved
			secondAddrs := second.Addrs()
			var name movingName
			name.point(first)
			c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial,
				DialTimeout: time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond,
				DisableRebootstrap: tc.none})
			c.Want("t")
			waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })

			_ = first.Close()
			name.point(second)
			c.Trigger()
			if tc.moves {
				waitFor(t, c, "the second cluster", func(s *Snapshot) bool { return onCluster(s, secondAddrs) })
				return
			}
			stays(t, c, time.Second, "brokers of the first cluster", func(s *Snapshot) bool { return onCluster(s, firstAddrs) })
			if err := c.Err(); !errors.Is(err, ErrNoBroker) {
				t.Fatalf("Err() = %v, want ErrNoBroker", err)
			}
		})
	}
}

// metadata.recovery.rebootstrap.trigger.ms (KIP-1102): known brokers that
// accept connections but never answer Metadata hold the client only until
// the trigger passes; then it asks its bootstrap name, which leads to the
// cluster's new brokers. Without the trigger it would wait twice
// RequestTimeout at each of them.
func TestRebootstrapTriggerLeavesSilentBrokers(t *testing.T) {
	first := clusterWith(t, 2, "", "t")
	second := clusterWith(t, 2, "", "t")
	secondAddrs := second.Addrs()
	var name movingName
	name.point(first)
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial,
		RequestTimeout: 30 * time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond,
		RebootstrapTrigger: 300 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })

	first.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true})
	name.point(second)
	start := time.Now()
	c.Trigger()
	waitFor(t, c, "the second cluster", func(s *Snapshot) bool { return onCluster(s, secondAddrs) })
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("rebootstrapped after %v, want about the trigger (300ms)", took)
	}
}

// REBOOTSTRAP_REQUIRED in a Metadata answer (v13, KIP-1102): with
// rebootstrap the next fetch goes to the bootstrap name at once, not after
// RetryBackoff; with none (DisableRebootstrap) the known brokers are asked
// again and the bootstrap name never.
func TestRebootstrapRequiredAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		none    bool
		backoff time.Duration
	}{{"rebootstrap at once", false, 5 * time.Second}, {"none", true, 20 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			first := clusterWith(t, 1, "", "t")
			firstAddrs := first.Addrs()
			second := clusterWith(t, 1, "", "t", "u")
			secondAddrs := second.Addrs()
			var name movingName
			name.point(first)
			c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial,
				RetryBackoff: tc.backoff, RetryBackoffMax: tc.backoff, DisableRebootstrap: tc.none})
			c.Want("t")
			waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })

			first.Intercept(testbroker.Interceptor{Keys: []int16{3}, ErrorCode: kerr.RebootstrapRequired.Code})
			name.point(second)
			start := time.Now()
			c.Want("u") // fetched at once
			if !tc.none {
				waitFor(t, c, "the second cluster", func(s *Snapshot) bool { return onCluster(s, secondAddrs) && s.Topics["u"].Usable() })
				if took := time.Since(start); took >= tc.backoff/2 {
					t.Fatalf("rebootstrapped after %v, want at once (RetryBackoff %v)", took, tc.backoff)
				}
				return
			}
			stays(t, c, time.Second, "brokers of the first cluster", func(s *Snapshot) bool {
				return onCluster(s, firstAddrs) && !s.Topics["u"].Usable()
			})
			if err := c.Err(); !errors.Is(err, kerr.RebootstrapRequired) {
				t.Fatalf("Err() = %v, want REBOOTSTRAP_REQUIRED", err)
			}
		})
	}
}

// A bootstrap name that comes to lead to another cluster (another cluster
// id) is refused: its Metadata answer is never applied, Err names both
// ids, and once the name leads to the client's cluster again (new
// brokers, the same id) the client follows it.
func TestAnswerFromAnotherClusterIsRefused(t *testing.T) {
	first := clusterWith(t, 1, "cluster-a", "t")
	other := clusterWith(t, 1, "cluster-b", "t")
	otherAddrs := other.Addrs()
	back := clusterWith(t, 1, "cluster-a", "t")
	backAddrs := back.Addrs()
	var name movingName
	name.point(first)
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial,
		DialTimeout: time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	if got := c.ClusterID(); got != "cluster-a" {
		t.Fatalf("ClusterID() = %q, want cluster-a", got)
	}

	_ = first.Close()
	name.point(other)
	c.Trigger()
	deadline := time.Now().Add(10 * time.Second)
	for err := c.Err(); !errors.Is(err, ErrClusterMismatch); err = c.Err() {
		if time.Now().After(deadline) {
			t.Fatalf("Err() = %v, want ErrClusterMismatch", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if msg := c.Err().Error(); !strings.Contains(msg, `"cluster-a"`) || !strings.Contains(msg, `"cluster-b"`) {
		t.Fatalf("Err() = %q, want both cluster ids named", msg)
	} else if !strings.Contains(msg, "restart the producer to move to another cluster") {
		t.Fatalf("Err() = %q, want it to say a restart moves to another cluster", msg)
	}
	stays(t, c, 500*time.Millisecond, "no broker of the other cluster", func(s *Snapshot) bool { return !onCluster(s, otherAddrs) })

	name.point(back)
	waitFor(t, c, "the cluster back", func(s *Snapshot) bool { return onCluster(s, backAddrs) && s.Topics["t"].Usable() })
	if got := c.ClusterID(); got != "cluster-a" {
		t.Fatalf("ClusterID() = %q after the move, want cluster-a", got)
	}
}

// clusterAt starts a cluster of n brokers with cluster id id listening on
// base, base+1, ... (closed with the test); ok is false when a port was
// taken.
func clusterAt(t *testing.T, n int, id string, base int, topics ...string) (*testbroker.Cluster, bool) {
	t.Helper()
	cl, err := testbroker.New(testbroker.Config{Brokers: n, ClusterID: id, BasePort: base})
	if err != nil {
		return nil, false
	}
	t.Cleanup(func() { _ = cl.Close() })
	for _, tp := range topics {
		if err := cl.CreateTopic(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	return cl, true
}

// bootstrap.servers names the brokers' advertised addresses; the cluster
// is rebuilt with the same cluster id and the bootstrap address now
// reaches node 1, not node 0. The known brokers are refused (node 0's
// address answers for node 1: ApiVersions v5 says REBOOTSTRAP_REQUIRED),
// but the bootstrap address is no known node: it is dialed without an
// identity to check, its Metadata answer names the client's cluster, and
// the client follows the rebuilt cluster.
func TestRebootstrapDialsBootstrapAsNoKnownNode(t *testing.T) {
	for try := 0; ; try++ {
		if try == 20 {
			t.Skip("no free ports for the two clusters")
		}
		base := 20000 + rand.IntN(40000)
		first, ok := clusterAt(t, 2, "cluster-a", base, "t")
		if !ok {
			continue
		}
		firstAddrs := first.Addrs()
		_ = first.Close()
		// Node 1 of the rebuilt cluster listens where node 0 was.
		second, ok := clusterAt(t, 2, "cluster-a", base-1)
		if !ok {
			continue
		}
		secondAddrs := second.Addrs()
		_ = second.Close()
		first, ok = clusterAt(t, 2, "cluster-a", base, "t")
		if !ok {
			continue
		}
		c := newClient(t, Config{Bootstrap: []string{firstAddrs[0]},
			DialTimeout: time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
		c.Want("t")
		waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
		_ = first.Close()
		if second, ok = clusterAt(t, 2, "cluster-a", base-1, "t"); !ok {
			continue
		}
		c.Trigger()
		waitFor(t, c, "the rebuilt cluster", func(s *Snapshot) bool { return onCluster(s, secondAddrs) && s.Topics["t"].Usable() })
		return
	}
}

// countingDialer counts the dials to each address.
type countingDialer struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[addr]++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *countingDialer) dials(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

// A rebootstrap closes the known brokers' connections and dials the
// bootstrap addresses again (Java's handleRebootstrap), even one a known
// broker has: after REBOOTSTRAP_REQUIRED the rebootstrap fetch does not go
// back to the connection that said it, and the name is resolved again.
func TestRebootstrapDialsBootstrapAgain(t *testing.T) {
	cl := clusterWith(t, 1, "", "t", "u")
	addr := cl.Addrs()[0]
	var d countingDialer
	c := newClient(t, Config{Bootstrap: []string{addr}, Dialer: d.dial,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	before := d.dials(addr)
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, ErrorCode: kerr.RebootstrapRequired.Code, Times: 1})
	c.Want("u")
	waitFor(t, c, "the second topic", func(s *Snapshot) bool { return s.Topics["u"].Usable() })
	if got := d.dials(addr) - before; got < 1 {
		t.Fatalf("%d dials of %s after REBOOTSTRAP_REQUIRED, want a fresh one (the rebootstrap reused the connection that asked for it)", got, addr)
	}
}

// A Trigger or a Rebootstrap while no topic is wanted asks for nothing:
// the refresh goroutine sleeps. It kept the request owed and woke every
// time it looked at it, about 830ms of CPU a second, forever.
func TestTriggerWithoutTopicsDoesNotSpin(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(*Client)
	}{{"Trigger", (*Client).Trigger}, {"Rebootstrap", (*Client).Rebootstrap}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := clusterWith(t, 1, "")
			c := newClient(t, Config{Bootstrap: cl.Addrs()})
			tc.call(c)
			time.Sleep(50 * time.Millisecond)
			start, cpu := time.Now(), testutil.CPUSeconds()
			time.Sleep(time.Second)
			used, took := testutil.CPUSeconds()-cpu, time.Since(start)
			if used > 0.05*took.Seconds() {
				t.Fatalf("%.3fs of CPU in %v with no topic wanted, want the refresh goroutine asleep", used, took)
			}
		})
	}
}

// countingHandler counts the records logged at Info or above per message.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		h.mu.Lock()
		if h.n == nil {
			h.n = map[string]int{}
		}
		h.n[r.Message]++
		h.mu.Unlock()
	}
	return nil
}

func (h *countingHandler) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for msg, k := range h.n {
		if strings.HasPrefix(msg, prefix) {
			n += k
		}
	}
	return n
}

// Invariant 12 (logs are rate-limited): a bootstrap name that leads to
// another cluster, with rebootstrap at every fetch (a negative trigger,
// NoWait), logs the refused broker and the rebootstrap once, not at each
// of the dozens of fetches a second (34 refusals in 3s before).
func TestRefusedBrokerAndRebootstrapLogRarely(t *testing.T) {
	first := clusterWith(t, 1, "cluster-a", "t")
	other := clusterWith(t, 1, "cluster-b", "t")
	var name movingName
	name.point(first)
	var h countingHandler
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial, Logger: slog.New(&h),
		DialTimeout: time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond,
		RebootstrapTrigger: -1})
	c.Want("t")
	waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	_ = first.Close()
	name.point(other)
	c.Trigger()
	time.Sleep(1500 * time.Millisecond)
	if !errors.Is(c.Err(), ErrClusterMismatch) {
		t.Fatalf("Err() = %v, want ErrClusterMismatch", c.Err())
	}
	for _, msg := range []string{"broker refused", "rebootstrapping", "no metadata from the known brokers"} {
		if n := h.count(msg); n > 1 {
			t.Errorf("%q logged %d times at Info or above in 1.5s, want at most once", msg, n)
		}
	}
}

// redirectDialer dials each address the test maps to another one in its
// place, as a DNS change or a rebuilt cluster would, and counts the dials
// of each address asked for.
type redirectDialer struct {
	countingDialer
	mu sync.Mutex
	to map[string]string
}

func (d *redirectDialer) redirect(from, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.to == nil {
		d.to = map[string]string{}
	}
	d.to[from] = to
}

func (d *redirectDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	to, ok := d.to[addr]
	d.mu.Unlock()
	if !ok {
		to = addr
	}
	d.countingDialer.mu.Lock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[addr]++
	d.countingDialer.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

// Only a Metadata answer of REBOOTSTRAP_REQUIRED is fetched again at once:
// a fetch that failed because a known broker's dial was refused by
// ApiVersions v5 (an error that wraps the same code) and the bootstrap
// name answered for another cluster waits for RetryBackoff, as any
// failed fetch.
func TestRefusedDialIsNoRebootstrapAnswer(t *testing.T) {
	first := clusterWith(t, 1, "cluster-a", "t")
	other := clusterWith(t, 1, "cluster-b", "t", "u")
	known := first.Addrs()[0]
	var d redirectDialer
	d.redirect("kafka.test:9092", known)
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: d.dial,
		DialTimeout: time.Second, RetryBackoff: 3 * time.Second, RetryBackoffMax: 3 * time.Second})
	c.Want("t")
	waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	d.redirect(known, other.Addrs()[0])
	d.redirect("kafka.test:9092", other.Addrs()[0])
	knownBefore, bootBefore := d.dials(known), d.dials("kafka.test:9092")
	c.Want("u") // fetched at once
	deadline := time.Now().Add(5 * time.Second)
	for !errors.Is(c.Err(), ErrClusterMismatch) {
		if time.Now().After(deadline) {
			t.Fatalf("Err() = %v, want ErrClusterMismatch", c.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if k, b := d.dials(known)-knownBefore, d.dials("kafka.test:9092")-bootBefore; k != 1 || b != 1 {
		t.Fatalf("%d dials of the known broker and %d of the bootstrap name within 500ms of the failure, want one fetch (1 and 1) before RetryBackoff (3s)", k, b)
	}
}

// A Rebootstrap (the IO goroutine met another cluster) while a fetch is
// out is not lost when that fetch's answer carries an error: the next
// fetch asks the bootstrap name, not the known broker.
func TestRebootstrapDuringAFailedFetchIsKept(t *testing.T) {
	cl := clusterWith(t, 1, "", "t", "u")
	var d redirectDialer
	d.redirect("kafka.test:9092", cl.Addrs()[0])
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: d.dial,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	before := d.dials("kafka.test:9092")
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, Times: 1, After: true,
		Match: func(int32, kmsg.Request) bool { c.Rebootstrap(); return true },
		Rewrite: func(resp kmsg.Response) {
			resp.(*kmsg.MetadataResponse).ErrorCode = kerr.UnknownServerError.Code // a top-level code, not REBOOTSTRAP_REQUIRED
		}})
	c.Want("u")
	waitFor(t, c, "the second topic", func(s *Snapshot) bool { return s.Topics["u"].Usable() })
	if got := d.dials("kafka.test:9092") - before; got < 1 {
		t.Fatalf("%d dials of the bootstrap name after Rebootstrap, want the next fetch to rebootstrap", got)
	}
}

// Invariant 13: the cluster id is broker text. One over 64 bytes or with
// characters that are not printable is not kept (ClusterID stays "", it
// is never sent in ApiVersions v5) and the snapshot shows it cleaned.
func TestClusterIDIsKeptOnlyWhenItIsOne(t *testing.T) {
	for _, tc := range []struct {
		name, id, want string
	}{
		{"a Kafka id", "MkU3OEVBNTcwNTJENDM2Qk", "MkU3OEVBNTcwNTJENDM2Qk"},
		{"64 bytes", strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{"65 bytes", strings.Repeat("x", 65), ""},
		{"a newline", "cluster\nid", ""},
		{"a space", "cluster id", ""},
		{"not ASCII", "clusteré", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := clusterWith(t, 1, tc.id, "t")
			c := newClient(t, Config{Bootstrap: cl.Addrs()})
			c.Want("t")
			s := waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
			if got := c.ClusterID(); got != tc.want {
				t.Fatalf("ClusterID() = %q, want %q", got, tc.want)
			}
			if strings.ContainsAny(s.ClusterID, "\n") {
				t.Fatalf("Snapshot.ClusterID = %q, want it cleaned", s.ClusterID)
			}
		})
	}
}

// Once the cluster id is known, an answer that names none (a broker of
// another cluster before Kafka 0.10.1, or one that hides it) is refused
// as one naming another id: it was applied.
func TestAnswerWithoutClusterIDIsRefusedOnceKnown(t *testing.T) {
	first := clusterWith(t, 1, "cluster-a", "t")
	other := clusterWith(t, 1, "cluster-b", "t")
	otherAddrs := other.Addrs()
	other.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true,
		Rewrite: func(resp kmsg.Response) { resp.(*kmsg.MetadataResponse).ClusterID = nil }})
	var name movingName
	name.point(first)
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: name.dial,
		DialTimeout: time.Second, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	_ = first.Close()
	name.point(other)
	c.Trigger()
	deadline := time.Now().Add(10 * time.Second)
	for err := c.Err(); !errors.Is(err, ErrClusterMismatch); err = c.Err() {
		if time.Now().After(deadline) {
			t.Fatalf("Err() = %v, want ErrClusterMismatch", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stays(t, c, 500*time.Millisecond, "no broker of the other cluster", func(s *Snapshot) bool { return !onCluster(s, otherAddrs) })
}

// Do dials a known broker naming the cluster and the node it means to
// reach (ApiVersions v5, KIP-1242): a known address that now leads to
// another cluster's broker gets the ApiVersions request and nothing else,
// and Do goes on to the bootstrap address, which still leads to the
// client's cluster.
func TestDoToKnownAddressLeadingElsewhereSendsOnlyApiVersions(t *testing.T) {
	ours, other := clusterWith(t, 1, "cluster-a", "t"), clusterWith(t, 1, "cluster-b", "t")
	var elsewhere atomic.Int32
	other.Intercept(testbroker.Interceptor{Match: func(_ int32, req kmsg.Request) bool {
		if req.Key() != 18 {
			elsewhere.Add(1)
		}
		return false
	}})
	var d redirectDialer
	d.redirect("kafka.test:9092", ours.Addrs()[0])
	c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: d.dial,
		DialTimeout: time.Second, RetryBackoff: time.Minute, RetryBackoffMax: time.Minute, MaxAge: time.Hour})
	c.Want("t")
	waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	d.redirect(ours.Addrs()[0], other.Addrs()[0])
	before := d.dials(ours.Addrs()[0])

	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = -1, -1
	req.TransactionTimeoutMillis = 60000
	if _, err := c.Do(context.Background(), req); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if d.dials(ours.Addrs()[0]) == before {
		t.Fatal("Do did not dial the known broker's address: the test proves nothing")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the other cluster's broker got %d requests besides ApiVersions, want none", n)
	}
}

// Once the cluster id is known, Do writes only on connections known to
// reach the client's cluster: a broker that identified itself
// (ApiVersions v5) or whose Metadata answer named the client's cluster.
// A bootstrap name now leading to another cluster, or a known address now
// leading to another cluster's broker that cannot check ApiVersions v5
// (before Kafka 4.4), gets a Metadata request for no topic, which names
// the other cluster, and never the InitProducerId (it would fence that
// cluster's producer of the same transactional id).
func TestDoWritesOnlyToItsCluster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known bool // the known address leads elsewhere, not the name
	}{{"bootstrap name", false}, {"known address of a broker before 4.4", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ours, other := clusterWith(t, 1, "cluster-a", "t"), clusterWith(t, 1, "cluster-b", "t")
			oursAddr := ours.Addrs()[0]
			var written atomic.Int32
			other.Intercept(testbroker.Interceptor{Match: func(_ int32, req kmsg.Request) bool {
				if k := req.Key(); k != 18 && k != 3 {
					written.Add(1)
				}
				return false
			}})
			other.Intercept(testbroker.Interceptor{Keys: []int16{18}, ErrorCode: kerr.UnsupportedVersion.Code,
				Match: func(_ int32, req kmsg.Request) bool { return req.GetVersion() >= 5 }})
			var d redirectDialer
			d.redirect("kafka.test:9092", oursAddr)
			c := newClient(t, Config{Bootstrap: []string{"kafka.test:9092"}, Dialer: d.dial,
				DialTimeout: time.Second, RetryBackoff: time.Minute, RetryBackoffMax: time.Minute, MaxAge: time.Hour})
			c.Want("t")
			waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
			if tc.known {
				d.redirect(oursAddr, other.Addrs()[0])
				d.redirect("kafka.test:9092", deadAddr(t))
			} else {
				_ = ours.Close()
				d.redirect("kafka.test:9092", other.Addrs()[0])
			}
			// Break the connections the client has.
			c.Rebootstrap()
			c.Want("u")
			time.Sleep(100 * time.Millisecond)

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req := kmsg.NewPtrInitProducerIDRequest()
			req.ProducerID, req.ProducerEpoch = -1, -1
			req.TransactionTimeoutMillis = 60000
			_, err := c.Do(ctx, req)
			if !errors.Is(err, ErrClusterMismatch) {
				t.Fatalf("Do: %v, want ErrClusterMismatch", err)
			}
			if n := written.Load(); n != 0 {
				t.Fatalf("the other cluster's broker got %d requests besides ApiVersions and Metadata, want none", n)
			}
		})
	}
}

// canonicalResolver resolves kafka.test to 127.0.0.1 and 127.0.0.1 back to
// kafka-1.canonical.test, for ResolveCanonicalBootstrap.
type canonicalResolver struct{}

func (canonicalResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if host == "kafka.test" {
		return []string{"127.0.0.1"}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (canonicalResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if addr == "127.0.0.1" {
		return []string{"kafka-1.canonical.test."}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}

// client.dns.lookup=resolve_canonical_bootstrap_servers_only: the
// bootstrap connections are the canonical names', and a rebootstrap
// closes and dials those again too (it closed only connections kept
// under the names as configured, of which there are none).
func TestRebootstrapDialsCanonicalBootstrapAgain(t *testing.T) {
	cl := clusterWith(t, 1, "", "t", "u")
	real := cl.Addrs()[0]
	_, port, _ := net.SplitHostPort(real)
	canonical := net.JoinHostPort("kafka-1.canonical.test", port)
	old := conn.Resolver
	conn.Resolver = canonicalResolver{}
	t.Cleanup(func() { conn.Resolver = old })
	var d redirectDialer
	d.redirect(canonical, real)
	c := newClient(t, Config{Bootstrap: []string{net.JoinHostPort("kafka.test", port)}, ResolveCanonicalBootstrap: true,
		Dialer: d.dial, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	waitFor(t, c, "the topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	before := d.dials(canonical)
	if before == 0 {
		t.Fatalf("the canonical name was never dialed: the test proves nothing")
	}
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, ErrorCode: kerr.RebootstrapRequired.Code, Times: 1})
	c.Want("u")
	waitFor(t, c, "the second topic", func(s *Snapshot) bool { return s.Topics["u"].Usable() })
	if got := d.dials(canonical) - before; got < 1 {
		t.Fatalf("%d dials of %s after REBOOTSTRAP_REQUIRED, want a fresh one", got, canonical)
	}
}
