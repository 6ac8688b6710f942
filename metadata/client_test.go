package metadata

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

func TestMain(m *testing.M) {
	// Clients without a Logger log Warn and above to slog.Default(): the
	// tests' deliberate failures stay out of the output.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}

func newCluster(t testing.TB, brokers int) *testbroker.Cluster {
	t.Helper()
	cl, err := testbroker.New(testbroker.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

// waitFor waits, on Updates, until cond holds for the snapshot.
func waitFor(t testing.TB, c *Client, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if s := c.Snapshot(); cond(s) {
			return s
		}
		select {
		case <-c.Updates():
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no bootstrap", Config{}},
		{"address without port", Config{Bootstrap: []string{"localhost"}}},
		{"negative max age", Config{Bootstrap: []string{"a:1"}, MaxAge: -1}},
		{"backoff max below backoff", Config{Bootstrap: []string{"a:1"}, RetryBackoff: time.Second, RetryBackoffMax: time.Millisecond}},
	}
	for _, tc := range cases {
		if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New error %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestNewDoesNoIO(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	c := newClient(t, Config{Bootstrap: []string{ln.Addr().String()}})
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("New opened %d connections", n)
	}
	if s := c.Snapshot(); s == nil || len(s.Topics) != 0 || len(s.Brokers) != 0 {
		t.Fatalf("initial snapshot %+v, want empty", s)
	}
	_ = c.Close()
}

// TestBootstrapSkipsDeadAddresses: dead bootstrap addresses are skipped and
// the topic arrives with its partitions, leaders and the cluster's brokers.
func TestBootstrapSkipsDeadAddresses(t *testing.T) {
	cl := newCluster(t, 3)
	if err := cl.CreateTopic("orders", 4); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{Bootstrap: []string{deadAddr(t), deadAddr(t), cl.Addrs()[1]}})
	c.Want("orders")
	s := waitFor(t, c, "orders", func(s *Snapshot) bool { return s.Topics["orders"].Usable() })
	top := s.Topics["orders"]
	if len(top.Partitions) != 4 || len(s.Brokers) != 3 || s.ClusterID == "" || top.ID == ([16]byte{}) {
		t.Fatalf("snapshot %+v, topic %+v", s, top)
	}
	for i, p := range top.Partitions {
		leader, epoch, err := cl.Leader("orders", int32(i))
		if err != nil || p.ID != int32(i) || p.Leader != leader || p.LeaderEpoch != epoch || p.Err != nil {
			t.Errorf("partition %d = %+v, cluster says leader %d epoch %d", i, p, leader, epoch)
		}
		if b, ok := s.Leader("orders", int32(i)); !ok || b.NodeID != leader || b.Addr() != cl.Addrs()[leader] {
			t.Errorf("Leader(orders, %d) = %+v, %v", i, b, ok)
		}
	}
	if top.Attempts != 0 || top.FirstWanted.IsZero() {
		t.Errorf("Attempts %d FirstWanted %v", top.Attempts, top.FirstWanted)
	}
}

// TestTopicCreatedLaterAppears: an unknown topic is visible with its error
// and attempt count, stays wanted, and shows up once created.
func TestTopicCreatedLaterAppears(t *testing.T) {
	cl := newCluster(t, 1)
	c := newClient(t, Config{Bootstrap: cl.Addrs()})
	before := time.Now()
	c.Want("late")
	s := waitFor(t, c, "two failed attempts", func(s *Snapshot) bool {
		return s.Topics["late"] != nil && s.Topics["late"].Attempts >= 2
	})
	top := s.Topics["late"]
	if !errors.Is(top.Err, kerr.UnknownTopicOrPartition) || top.Usable() || top.FirstWanted.Before(before) {
		t.Fatalf("unknown topic = %+v", top)
	}
	if err := cl.CreateTopic("late", 2); err != nil {
		t.Fatal(err)
	}
	s = waitFor(t, c, "created topic", func(s *Snapshot) bool { return s.Topics["late"].Usable() })
	if top := s.Topics["late"]; len(top.Partitions) != 2 || top.Attempts != 0 || !top.FirstWanted.Equal(s.Topics["late"].FirstWanted) {
		t.Fatalf("created topic = %+v", top)
	}
}

func TestMaxIdleDropsUntouchedTopics(t *testing.T) {
	cl := newCluster(t, 1)
	for _, name := range []string{"busy", "idle"} {
		if err := cl.CreateTopic(name, 1); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, Config{Bootstrap: cl.Addrs(), MaxIdle: 150 * time.Millisecond})
	c.Want("busy")
	c.Want("idle")
	waitFor(t, c, "both topics", func(s *Snapshot) bool { return s.Topics["busy"].Usable() && s.Topics["idle"].Usable() })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				c.Touch("busy")
			}
		}
	}()
	s := waitFor(t, c, "idle topic dropped", func(s *Snapshot) bool { return s.Topics["idle"] == nil })
	close(stop)
	wg.Wait()
	if s.Topics["busy"] == nil {
		t.Fatal("a touched topic was dropped")
	}
	// Wanting it again brings it back.
	c.Want("idle")
	waitFor(t, c, "idle topic back", func(s *Snapshot) bool { return s.Topics["idle"].Usable() })
}

func TestTriggerSeesLeaderMove(t *testing.T) {
	cl := newCluster(t, 3)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{Bootstrap: cl.Addrs(), RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	s := waitFor(t, c, "topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	old := s.Topics["t"].Partitions[0]
	to := (old.Leader + 1) % 3
	if err := cl.MoveLeader("t", 0, to); err != nil {
		t.Fatal(err)
	}
	c.Trigger()
	s = waitFor(t, c, "new leader", func(s *Snapshot) bool { return s.Topics["t"].Partitions[0].Leader == to })
	if p := s.Topics["t"].Partitions[0]; p.LeaderEpoch <= old.LeaderEpoch {
		t.Fatalf("epoch %d after move, was %d", p.LeaderEpoch, old.LeaderEpoch)
	}
}

// TestRebootstrapAfterAllBrokersDie: when every known broker is gone, the
// bootstrap name is dialed (and resolved) again, which now leads to
// another cluster.
func TestRebootstrapAfterAllBrokersDie(t *testing.T) {
	first := newCluster(t, 2)
	second := newCluster(t, 2)
	for _, cl := range []*testbroker.Cluster{first, second} {
		if err := cl.CreateTopic("t", 1); err != nil {
			t.Fatal(err)
		}
	}
	// "kafka.test:9092" stands for a DNS name; the test moves it.
	var target atomic.Value
	target.Store(first.Addrs()[0])
	var d net.Dialer
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "kafka.test:9092" {
			addr = target.Load().(string)
		}
		return d.DialContext(ctx, network, addr)
	}
	c := newClient(t, Config{
		Bootstrap:       []string{"kafka.test:9092"},
		Dialer:          dialer,
		DialTimeout:     time.Second,
		RetryBackoff:    10 * time.Millisecond,
		RetryBackoffMax: 50 * time.Millisecond,
	})
	c.Want("t")
	s := waitFor(t, c, "topic from the first cluster", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	firstBrokers := s.Brokers

	_ = first.Close()
	target.Store(second.Addrs()[0])
	c.Trigger()
	s = waitFor(t, c, "brokers of the second cluster", func(s *Snapshot) bool {
		b, ok := s.Brokers[0]
		return ok && b.Addr() == second.Addrs()[0]
	})
	if s.Brokers[0] == firstBrokers[0] || !s.Topics["t"].Usable() {
		t.Fatalf("snapshot after rebootstrap: %+v", s)
	}
}

func TestDoAndDoController(t *testing.T) {
	cl := newCluster(t, 3)
	c := newClient(t, Config{Bootstrap: cl.Addrs()})
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	resp, err := c.Do(context.Background(), ip)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerID < 0 {
		t.Fatalf("InitProducerId: %+v", r)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "made", 3, 1
	ct.Topics = append(ct.Topics, rt)
	ct.TimeoutMillis = 5000
	resp, err = c.DoController(context.Background(), ct)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics: %v", kerr.ForCode(code))
	}
	c.Want("made")
	waitFor(t, c, "created topic", func(s *Snapshot) bool { return s.Topics["made"].Usable() && len(s.Topics["made"].Partitions) == 3 })
}

func TestDoWithNoBroker(t *testing.T) {
	c := newClient(t, Config{Bootstrap: []string{deadAddr(t)}})
	_, err := c.Do(context.Background(), kmsg.NewPtrMetadataRequest())
	if !errors.Is(err, ErrNoBroker) || !errors.Is(err, kerr.NetworkException) {
		t.Fatalf("Do: %v, want ErrNoBroker wrapping the dial error", err)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Bootstrap: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	c.Want("t")
	waitFor(t, c, "topic", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	for i := 0; i < 2; i++ {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Do(context.Background(), kmsg.NewPtrMetadataRequest()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	c.Want("other") // must not block or panic
	c.Trigger()
	c.Touch("t")
}

func TestWantAndTouchDoNotAllocate(t *testing.T) {
	c := newClient(t, Config{Bootstrap: []string{deadAddr(t)}, RetryBackoff: time.Second, RetryBackoffMax: time.Second})
	c.Want("t")
	if n := testing.AllocsPerRun(100, func() { c.Want("t") }); n != 0 {
		t.Errorf("Want of a wanted topic allocates %v", n)
	}
	if n := testing.AllocsPerRun(100, func() { c.Touch("t") }); n != 0 {
		t.Errorf("Touch allocates %v", n)
	}
}

func BenchmarkSnapshotLeader(b *testing.B) {
	cl := newCluster(b, 3)
	if err := cl.CreateTopic("bench", 12); err != nil {
		b.Fatal(err)
	}
	c := newClient(b, Config{Bootstrap: cl.Addrs()})
	c.Want("bench")
	waitFor(b, c, "topic", func(s *Snapshot) bool { return s.Topics["bench"].Usable() })
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := c.Snapshot().Leader("bench", int32(i%12)); !ok {
			b.Fatal("no leader")
		}
	}
}

func BenchmarkWantTouchParallel(b *testing.B) {
	c := newClient(b, Config{Bootstrap: []string{deadAddr(b)}, RetryBackoff: time.Second, RetryBackoffMax: time.Second})
	c.Want("t")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Want("t")
			c.Touch("t")
		}
	})
}

// TestThrottledCreateTopicsDoesNotHoldMetadata: a broker that throttles a
// CreateTopics (KIP-599) mutes that connection for the throttle time
// (KIP-219), and the client holds its writes there as well; Metadata and Do
// still answer at once, since DoController has connections of its own.
// Found against a real Kafka, where a Metadata request written behind a
// throttled CreateTopics timed out and broke the connection.
func TestThrottledCreateTopicsDoesNotHoldMetadata(t *testing.T) {
	cl := newCluster(t, 1)
	cl.Intercept(testbroker.Interceptor{Keys: []int16{19}, After: true, Throttle: 20 * time.Second})
	c := newClient(t, Config{Bootstrap: cl.Addrs()})
	if _, err := c.Do(context.Background(), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err) // the ordinary connection exists before the CreateTopics
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "throttled", 1, 1
	ct.Topics = append(ct.Topics, rt)
	ct.TimeoutMillis = 5000
	resp, err := c.DoController(context.Background(), ct)
	if err != nil {
		t.Fatal(err)
	}
	if ms := resp.(*kmsg.CreateTopicsResponse).ThrottleMillis; ms <= 0 {
		t.Fatalf("CreateTopics was not throttled (ThrottleMillis %d): the test proves nothing", ms)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.Do(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("Metadata behind a throttled CreateTopics: %v", err)
	}
}

// TestOnRefreshReportsEachFetch: OnRefresh sees a fetch's broker, counts and
// latency, once its answer is applied.
func TestOnRefreshReportsEachFetch(t *testing.T) {
	cl := newCluster(t, 2)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	refreshes := make(chan Refresh, 16)
	var c *Client
	c = newClient(t, Config{Bootstrap: cl.Addrs(), OnRefresh: func(r Refresh) {
		if r.Err == nil && c.Snapshot().Topics["t"] == nil {
			t.Error("OnRefresh ran before the answer was applied")
		}
		refreshes <- r
	}})
	c.Want("t")
	r := <-refreshes
	if r.Err != nil || r.Addr == "" || r.Brokers != 2 || r.Topics != 1 || r.Latency <= 0 {
		t.Fatalf("refresh %+v", r)
	}
}

// TestHugeThrottleDoesNotFreezeMetadata: a Metadata answer with
// throttle_time_ms = MaxInt32 (a buggy broker) would hold the connection's
// next writes for 24 days (KIP-219); the client honours throttles only up
// to RequestTimeout and dials a fresh connection for the next request.
func TestHugeThrottleDoesNotFreezeMetadata(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		resp.(*kmsg.MetadataResponse).ThrottleMillis = math.MaxInt32
	}})
	c := newClient(t, Config{Bootstrap: cl.Addrs(), RequestTimeout: time.Second})
	c.Want("t")
	waitFor(t, c, "t usable", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.Do(ctx, kmsg.NewPtrMetadataRequest())
		cancel()
		if err != nil {
			t.Fatalf("request %d after the throttled answer: %v", i, err)
		}
	}
}

// TestBrokenPartitionIDsKeepTheOldTopic: an answer listing a partition id
// outside 0..n-1 is ignored for its topic: the snapshot keeps the topic as
// it was, the client asks again with backoff, and the next sound answer is
// taken.
func TestBrokenPartitionIDsKeepTheOldTopic(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{Bootstrap: cl.Addrs(), RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	c.Want("t")
	good := waitFor(t, c, "t usable", func(s *Snapshot) bool { return s.Topics["t"].Usable() }).Topics["t"]
	var broken atomic.Int32
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: 3, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		for i := range r.Topics {
			if len(r.Topics[i].Partitions) > 0 {
				r.Topics[i].Partitions[0].Partition = 1<<20 - 1
			}
		}
		broken.Add(1)
	}})
	c.Trigger()
	deadline := time.Now().Add(10 * time.Second)
	for broken.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d broken answers: no retry", broken.Load())
		}
		if got := c.Snapshot().Topics["t"]; got != good {
			t.Fatalf("a broken answer replaced the topic: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Fetched again with backoff: the next, sound, answer is taken.
	waitFor(t, c, "a sound answer", func(s *Snapshot) bool { return s.Topics["t"] != good && s.Topics["t"].Usable() })
	if n := len(c.Snapshot().Topics["t"].Partitions); n != 2 {
		t.Fatalf("%d partitions", n)
	}
}

// TestBrokenPartitionIDsOfANewTopic: a topic whose first answer is broken
// is published as not usable yet (LEADER_NOT_AVAILABLE, naming the cause)
// and fetched again.
func TestBrokenPartitionIDsOfANewTopic(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: 1, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].Partition = -3
			}
		}
	}})
	var first atomic.Pointer[Topic]
	var c *Client
	c = newClient(t, Config{Bootstrap: cl.Addrs(), OnRefresh: func(Refresh) {
		first.CompareAndSwap(nil, c.Snapshot().Topics["t"])
	}})
	c.Want("t")
	waitFor(t, c, "t usable", func(s *Snapshot) bool { return s.Topics["t"].Usable() })
	f := first.Load()
	if f == nil || f.Usable() || !errors.Is(f.Err, kerr.LeaderNotAvailable) || !strings.Contains(f.Err.Error(), "partition id -3") {
		t.Fatalf("first published topic %+v", f)
	}
}

// levelCounter is a slog handler counting records at Warn and above.
type levelCounter struct{ warns *atomic.Int32 }

func (h levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h levelCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h levelCounter) WithGroup(string) slog.Handler            { return h }
func (h levelCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warns.Add(1)
	}
	return nil
}

// With MaxAge equal to ConnMaxIdle (Azure Event Hubs recommends 180000 for
// both), a refresh now and then finds its connection open just as the idle
// timer closes it: the request, never written (ErrNotSent, ErrIdleClosed),
// goes to a fresh connection at once. No refresh fails and nothing is
// logged at Warn. The clients run side by side, ConnMaxIdle a little above
// MaxAge for some, which makes the race likelier (the connection's time
// starts as the answer is read, MaxAge's once it is applied).
func TestConnMaxIdleEqualToMaxAgeFailsNoRefresh(t *testing.T) {
	cl := newCluster(t, 1)
	if err := cl.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	const maxAge = 20 * time.Millisecond
	type result struct {
		refreshes, failed atomic.Int32
		firstErr          atomic.Value
		warns             atomic.Int32
	}
	cases := []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 300 * time.Microsecond}
	results := make([]*result, len(cases))
	for i, extra := range cases {
		r := new(result)
		results[i] = r
		c := newClient(t, Config{
			Bootstrap:   cl.Addrs(),
			MaxAge:      maxAge,
			ConnMaxIdle: maxAge + extra,
			Logger:      slog.New(levelCounter{&r.warns}),
			OnRefresh: func(rf Refresh) {
				r.refreshes.Add(1)
				if rf.Err != nil {
					r.failed.Add(1)
					r.firstErr.CompareAndSwap(nil, rf.Err.Error())
				}
			},
		})
		c.Want("t")
	}
	time.Sleep(3 * time.Second)
	for i, extra := range cases {
		r := results[i]
		if n := r.refreshes.Load(); n < 20 {
			t.Errorf("ConnMaxIdle %v: only %d refreshes in 3s with MaxAge %v", maxAge+extra, n, maxAge)
		}
		if n := r.failed.Load(); n != 0 {
			t.Errorf("ConnMaxIdle %v: %d of %d refreshes failed (first: %v)", maxAge+extra, n, r.refreshes.Load(), r.firstErr.Load())
		}
		if n := r.warns.Load(); n != 0 {
			t.Errorf("ConnMaxIdle %v: %d records at Warn or above", maxAge+extra, n)
		}
	}
}
