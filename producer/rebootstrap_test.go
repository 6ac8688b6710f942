package producer

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// network stands for DNS and routing in front of test clusters: the
// bootstrap name "kafka.test:9092" leads to one cluster's broker 0, and an
// address may be routed to another broker (a broker replaced behind the
// same address).
type network struct {
	mu     sync.Mutex
	name   string            // where kafka.test:9092 leads
	routes map[string]string // address dialed -> address reached
}

func (n *network) point(addr string) {
	n.mu.Lock()
	n.name = addr
	n.mu.Unlock()
}

func (n *network) route(from, to string) {
	n.mu.Lock()
	if n.routes == nil {
		n.routes = map[string]string{}
	}
	if to == "" {
		delete(n.routes, from)
	} else {
		n.routes[from] = to
	}
	n.mu.Unlock()
}

func (n *network) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	if addr == "kafka.test:9092" {
		addr = n.name
	}
	if to, ok := n.routes[addr]; ok {
		addr = to
	}
	n.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// movingProducer starts a producer whose only bootstrap broker is the name
// of n, closed with the test.
func movingProducer(t *testing.T, n *network, cfg Config) *Producer {
	t.Helper()
	cfg.Brokers = []string{"kafka.test:9092"}
	cfg.Dialer = n.dial
	cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Millisecond, 100*time.Millisecond
	cfg.DialTimeout = time.Second
	cfg.Linger = time.Millisecond
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = time.Second
	}
	p, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// clusterOf starts a one-broker cluster with cluster id id and topic "t".
func clusterOf(t *testing.T, id string) *testbroker.Cluster {
	t.Helper()
	c := newCluster(t, testbroker.Config{Brokers: 1, ClusterID: id})
	require.NoError(t, c.CreateTopic("t", 1))
	return c
}

// movedCluster starts from's cluster moved to a new broker: the same
// cluster id, and topic "t" with the same topic id (a moved cluster keeps
// its topics; a new id would be a recreated topic, whose records the
// producer never sends to it).
func movedCluster(t *testing.T, from *testbroker.Cluster, id string) *testbroker.Cluster {
	t.Helper()
	topicID, err := from.TopicID("t")
	require.NoError(t, err)
	c := newCluster(t, testbroker.Config{Brokers: 1, ClusterID: id})
	require.NoError(t, c.CreateTopicWithID("t", 1, topicID))
	return c
}

func sendOne(t *testing.T, p *Producer, value string, wait time.Duration) error {
	t.Helper()
	_, err := waitFuture(t, p.Send(context.Background(), &Record{Topic: "t", Value: []byte(value)}), wait)
	return err
}

func recordsIn(t *testing.T, c *testbroker.Cluster) []string {
	t.Helper()
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// The whole cluster replaced behind the bootstrap name (the same cluster
// id, new brokers at new addresses): with metadata.recovery.strategy
// rebootstrap, the default, records sent after the move are delivered to
// the new brokers; with none, the producer keeps to the brokers it knew
// and the records fail at their delivery timeout, as Java's do.
func TestClusterReplacedBehindBootstrapName(t *testing.T) {
	for _, tc := range []struct {
		strategy  MetadataRecoveryStrategy
		delivered bool
	}{{MetadataRecoveryRebootstrap, true}, {"", true}, {MetadataRecoveryNone, false}} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			old := clusterOf(t, "cluster-a")
			moved := movedCluster(t, old, "cluster-a")
			var n network
			n.point(old.Addrs()[0])
			p := movingProducer(t, &n, Config{MetadataRecoveryStrategy: tc.strategy, DeliveryTimeout: 3 * time.Second})
			require.NoError(t, sendOne(t, p, "before", 10*time.Second))

			require.NoError(t, old.Close())
			n.point(moved.Addrs()[0])
			err := sendOne(t, p, "after", 10*time.Second)
			if tc.delivered {
				require.NoError(t, err)
				assert.Equal(t, []string{"after"}, recordsIn(t, moved))
				return
			}
			require.ErrorIs(t, err, ErrDeliveryTimeout)
			assert.Empty(t, recordsIn(t, moved))
		})
	}
}

// A bootstrap name that comes to lead to another cluster (another cluster
// id; brokers that do not check ApiVersions v5, as before Kafka 4.4): its
// Metadata answer is refused, nothing is written there, the record fails
// at its delivery timeout with ErrClusterMismatch naming both ids, and
// once the name leads to the producer's cluster again, records are
// delivered there.
func TestBootstrapNameLeadingToAnotherCluster(t *testing.T) {
	ours, other := clusterOf(t, "cluster-a"), clusterOf(t, "cluster-b")
	var n network
	n.point(ours.Addrs()[0])
	p := movingProducer(t, &n, Config{DeliveryTimeout: 2 * time.Second, DisableMetadataClusterCheck: true})
	require.NoError(t, sendOne(t, p, "before", 10*time.Second))

	require.NoError(t, ours.StopBroker(0))
	n.point(other.Addrs()[0])
	err := sendOne(t, p, "elsewhere", 10*time.Second)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.ErrorIs(t, err, ErrClusterMismatch)
	assert.Contains(t, err.Error(), `"cluster-a"`)
	assert.Contains(t, err.Error(), `"cluster-b"`)
	assert.Empty(t, recordsIn(t, other))

	back := movedCluster(t, ours, "cluster-a") // the producer's cluster, at new addresses
	n.point(back.Addrs()[0])
	require.NoError(t, sendOne(t, p, "back", 10*time.Second))
	assert.Equal(t, []string{"back"}, recordsIn(t, back))
	assert.Empty(t, recordsIn(t, other))
}

// A known broker's address that comes to lead to a broker of another
// cluster (KIP-1242): the connection's ApiVersions v5 names the cluster and
// node dialed, that broker answers REBOOTSTRAP_REQUIRED, and no Produce is
// written on it; the record fails at its delivery timeout with
// ErrClusterMismatch, and once the address leads to the right broker again
// records are delivered there.
//
// A broker before Kafka 4.4 cannot check ApiVersions v5: the new
// connection asks it for Metadata of no topic first, whose cluster id
// refuses it the same way.
func TestKnownAddressLeadingToAnotherClusterIsNeverWritten(t *testing.T) {
	for _, preV5 := range []bool{false, true} {
		t.Run(map[bool]string{false: "broker 4.4+", true: "broker before 4.4"}[preV5], func(t *testing.T) {
			knownAddressLeadingElsewhere(t, preV5)
		})
	}
}

func knownAddressLeadingElsewhere(t *testing.T, preV5 bool) {
	ours, other := clusterOf(t, "cluster-a"), clusterOf(t, "cluster-b")
	if preV5 {
		other.Intercept(testbroker.Interceptor{Keys: []int16{18}, ErrorCode: kerr.UnsupportedVersion.Code,
			Match: func(_ int32, req kmsg.Request) bool { return req.GetVersion() >= 5 }})
	}
	oursAddr := ours.Addrs()[0]
	var n network
	n.point(oursAddr)
	p := movingProducer(t, &n, Config{DeliveryTimeout: 2 * time.Second})
	require.NoError(t, sendOne(t, p, "before", 10*time.Second))

	// The broker goes away and its address (and the bootstrap name)
	// now reach the other cluster's broker 0.
	n.route(oursAddr, other.Addrs()[0])
	require.NoError(t, ours.StopBroker(0))
	err := sendOne(t, p, "elsewhere", 10*time.Second)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.ErrorIs(t, err, ErrClusterMismatch)
	assert.True(t, strings.Contains(err.Error(), "cluster-a"), err.Error())
	assert.Empty(t, recordsIn(t, other))

	n.route(oursAddr, "")
	require.NoError(t, ours.RestartBroker(0))
	require.NoError(t, sendOne(t, p, "back", 10*time.Second))
	assert.Equal(t, []string{"before", "back"}, recordsIn(t, ours))
	assert.Empty(t, recordsIn(t, other))
}

// The three properties are parsed as Java's ConfigDef does:
// metadata.recovery.strategy in any case (CaseInsensitiveValidString),
// the trigger a long of milliseconds where 0 means at once,
// metadata.cluster.check.enable a boolean; anything else is refused.
func TestMetadataRecoveryProperties(t *testing.T) {
	cases := []struct {
		key, value string
		want       func(c Config) bool
		bad        bool
	}{
		{"metadata.recovery.strategy", "rebootstrap", func(c Config) bool { return c.MetadataRecoveryStrategy == MetadataRecoveryRebootstrap }, false},
		{"metadata.recovery.strategy", "REBOOTSTRAP", func(c Config) bool { return c.MetadataRecoveryStrategy == MetadataRecoveryRebootstrap }, false},
		{"metadata.recovery.strategy", " None ", func(c Config) bool { return c.MetadataRecoveryStrategy == MetadataRecoveryNone }, false},
		{"metadata.recovery.strategy", "", nil, true},
		{"metadata.recovery.strategy", "re-bootstrap", nil, true},
		{"metadata.recovery.rebootstrap.trigger.ms", "300000", func(c Config) bool { return c.MetadataRecoveryRebootstrapTrigger == 5*time.Minute }, false},
		{"metadata.recovery.rebootstrap.trigger.ms", "0", func(c Config) bool { return c.MetadataRecoveryRebootstrapTrigger == NoWait }, false},
		{"metadata.recovery.rebootstrap.trigger.ms", "-1", nil, true},
		{"metadata.recovery.rebootstrap.trigger.ms", "5m", nil, true},
		{"metadata.cluster.check.enable", "false", func(c Config) bool { return c.DisableMetadataClusterCheck }, false},
		{"metadata.cluster.check.enable", "TRUE", func(c Config) bool { return !c.DisableMetadataClusterCheck }, false},
		{"metadata.cluster.check.enable", "yes", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "k:9092", tc.key: tc.value})
			if tc.bad {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.key)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want(c), "%+v", c)
			assert.NotContains(t, c.IgnoredProperties(), tc.key)
			_, err = c.withDefaults()
			require.NoError(t, err)
		})
	}
}

// New's defaults and refusals for the three fields.
func TestMetadataRecoveryConfig(t *testing.T) {
	c, err := Config{Brokers: []string{"k:9092"}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, MetadataRecoveryRebootstrap, c.MetadataRecoveryStrategy)
	assert.Equal(t, 5*time.Minute, c.MetadataRecoveryRebootstrapTrigger)
	assert.False(t, c.DisableMetadataClusterCheck)

	c, err = Config{Brokers: []string{"k:9092"}, MetadataRecoveryRebootstrapTrigger: NoWait}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), metadataTrigger(c), "at once, in metadata.Config's terms")

	for _, bad := range []Config{
		{Brokers: []string{"k:9092"}, MetadataRecoveryStrategy: "REBOOTSTRAP"},
		{Brokers: []string{"k:9092"}, MetadataRecoveryStrategy: "sometimes"},
		{Brokers: []string{"k:9092"}, MetadataRecoveryRebootstrapTrigger: -time.Second},
	} {
		_, err := bad.withDefaults()
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "MetadataRecovery")
	}
}

// The leader's address comes to lead to another cluster's broker while
// another known broker still answers Metadata with the old view, and the
// bootstrap name now leads to the producer's cluster at new addresses.
// The IO goroutine's refused dial (ApiVersions v5) asks metadata to
// rebootstrap, not merely to refresh: a refresh would ask the known
// broker again, get the same stale leader, and the record would wait for
// its delivery timeout.
func TestRefusedLeaderDialRebootstraps(t *testing.T) {
	old := newCluster(t, testbroker.Config{Brokers: 2, ClusterID: "cluster-a"})
	require.NoError(t, old.CreateTopic("t", 1))
	require.NoError(t, old.MoveLeader("t", 0, 1))
	moved, other := clusterOf(t, "cluster-a"), clusterOf(t, "cluster-b")
	var n network
	n.point(old.Addrs()[0])
	p := movingProducer(t, &n, Config{DeliveryTimeout: 5 * time.Second})
	require.NoError(t, sendOne(t, p, "before", 10*time.Second))

	n.route(old.Addrs()[1], other.Addrs()[0])
	old.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{1}, Drop: true})
	n.point(moved.Addrs()[0])
	// This record meets the refused dial; made for the old cluster's
	// topic id, it fails once the producer finds the moved cluster
	// (another topic id), or at its delivery timeout without a
	// rebootstrap.
	_ = sendOne(t, p, "lost", 10*time.Second)
	require.Eventually(t, func() bool {
		b, ok := p.meta.Snapshot().Brokers[0]
		return ok && b.Addr() == moved.Addrs()[0]
	}, 10*time.Second, 5*time.Millisecond, "metadata never reached the moved cluster")
	require.NoError(t, sendOne(t, p, "after", 10*time.Second))
	assert.Equal(t, []string{"after"}, recordsIn(t, moved))
	assert.Empty(t, recordsIn(t, other))
}

// The transaction coordinator's address comes to lead to another
// cluster's broker: the coordinator's connection names the cluster and
// the node FindCoordinator gave (ApiVersions v5), and a broker before
// Kafka 4.4, which cannot check that, is asked which cluster it is of
// (Metadata for no topic) before anything else. No transactional request
// reaches the other cluster (an InitProducerId there would fence its
// producer of the same transactional.id).
func TestCoordinatorAddressLeadingToAnotherCluster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		preV5 bool
	}{{"broker 4.4+", false}, {"broker before 4.4", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ours := newCluster(t, testbroker.Config{Brokers: 2, ClusterID: "cluster-a"})
			require.NoError(t, ours.CreateTopic("t", 1))
			require.NoError(t, ours.MoveLeader("t", 0, 0))
			require.NoError(t, ours.MoveCoordinator(1, "tx", 1))
			other := clusterOf(t, "cluster-b")
			var written sync.Map // API key -> true
			other.Intercept(testbroker.Interceptor{Match: func(_ int32, req kmsg.Request) bool {
				if k := req.Key(); k != 18 && k != 3 {
					written.Store(k, true)
				}
				return false
			}})
			if tc.preV5 {
				other.Intercept(testbroker.Interceptor{Keys: []int16{18}, ErrorCode: kerr.UnsupportedVersion.Code,
					Match: func(_ int32, req kmsg.Request) bool { return req.GetVersion() >= 5 }})
			}
			var n network
			n.point(ours.Addrs()[0])
			p := movingProducer(t, &n, Config{TransactionalID: "tx", DeliveryTimeout: 2 * time.Second})
			p.meta.Want("t")
			require.Eventually(t, func() bool { return p.meta.ClusterID() == "cluster-a" }, 10*time.Second, 5*time.Millisecond)
			n.route(ours.Addrs()[1], other.Addrs()[0])

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			require.NoError(t, p.BeginTransaction())
			f := p.Send(ctx, &Record{Topic: "t", Value: []byte("v")})
			err := p.CommitTransaction(ctx)
			require.Error(t, err)
			_, _ = waitFuture(t, f, 10*time.Second)
			written.Range(func(k, _ any) bool {
				t.Errorf("the other cluster got API key %v", k)
				return true
			})
		})
	}
}
