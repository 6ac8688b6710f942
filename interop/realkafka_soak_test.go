package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaSoak is issue 32's "soak in compressed time": the months a
// producer lives through, on real brokers set to make them short. It takes
// minutes, so it runs only with SAMSA_KAFKA_SOAK=1, on the clusters
// interop/kafka/soak.sh starts:
//
//	SAMSA_SOAK_BROKERS, SAMSA_SOAK_DIR    one node with
//	    connections.max.idle.ms=3000, producer.id.expiration.ms=5000,
//	    transactional.id.expiration.ms=5000 and both check intervals 1000
//	SAMSA_SOAK3_BROKERS, SAMSA_SOAK3_DIR  three nodes, Kafka's defaults
//
// Each event is a subtest that logs one row of figures (records sent,
// acknowledged, lost, duplicated, reordered, outcome unknown, failed with
// another error, time to recover: the first acknowledgement after the
// event minus the event) and what the producer did, and asserts that no
// acknowledged record is lost, none is duplicated and none reordered, by
// reading every partition back with a kgo consumer (read_committed for
// transactions). The table of every row is logged at the end. The events
// run in order on the same clusters: the moved-cluster event changes the
// 1-node cluster's client port, which the events after it use.
func TestRealKafkaSoak(t *testing.T) {
	if os.Getenv("SAMSA_KAFKA_SOAK") != "1" {
		t.Skip("SAMSA_KAFKA_SOAK is not 1: the soak takes minutes (interop/kafka/soak.sh runs it)")
	}
	one := realClusterFrom(t, "SAMSA_SOAK_BROKERS", "SAMSA_SOAK_DIR")
	three := &realCluster{addrs: strings.Split(realEnv(t, "SAMSA_SOAK3_BROKERS", "the soak's 3-node cluster"), ","),
		dir: os.Getenv("SAMSA_SOAK3_DIR"), dirVar: "SAMSA_SOAK3_DIR"}
	require.NotEmpty(t, one.dir, "SAMSA_SOAK_DIR")
	require.NotEmpty(t, three.dir, "SAMSA_SOAK3_DIR")

	var rows []soakRow
	defer func() { t.Log("soak figures:\n" + soakTable(rows)) }()
	event := func(name string, fn func(t *testing.T) soakRow) {
		t.Run(name, func(t *testing.T) {
			row := fn(t)
			row.event = name
			rows = append(rows, row)
			t.Logf("%s: sent %d, acked %d, lost %d, duplicated %d, reordered %d, outcome unknown %d, failed %d, recovered in %s; %s",
				name, row.sent, row.acked, row.lost, row.dup, row.reordered, row.unknown, row.failed, row.recover, row.note)
			assert.Zero(t, row.lost, "acknowledged records lost")
			if !row.dupExpected {
				assert.Zero(t, row.dup, "records duplicated")
			}
			assert.Zero(t, row.reordered, "records reordered")
		})
	}
	event("broker-idle-close", func(t *testing.T) soakRow { return soakBrokerIdle(t, one) })
	event("client-idle-close", func(t *testing.T) soakRow { return soakClientIdle(t, one) })
	event("pid-expiry", func(t *testing.T) soakRow { return soakPidExpiry(t, one) })
	event("txn-id-expiry", func(t *testing.T) soakRow { return soakTxnExpiry(t, one, 2) })
	event("txn-id-expiry-tv1", func(t *testing.T) soakRow { return soakTxnExpiry(t, one, 1) })
	event("txn-id-expiry-java", func(t *testing.T) soakRow { return soakTxnExpiryJava(t, one) })
	event("leader-reassigned", func(t *testing.T) soakRow { return soakReassign(t, three) })
	event("leader-killed", func(t *testing.T) soakRow { return soakKill(t, three) })
	event("killed-past-pid-expiry", func(t *testing.T) soakRow { return soakKill(t, one) })
	px := newSoakProxy(t, one.addrs[0])
	event("cluster-moved", func(t *testing.T) soakRow { return soakClusterMoved(t, one, px) })
	event("other-cluster", func(t *testing.T) soakRow { return soakOtherCluster(t, one, three, px) })
}

// soakRow is one event's figures.
type soakRow struct {
	event                                              string
	sent, acked, lost, dup, reordered, unknown, failed int
	recover                                            string
	note                                               string
	// dupExpected: duplicates are Kafka's doing, not the producer's (see
	// soakKill); the event checks their bound itself.
	dupExpected bool
}

func soakTable(rows []soakRow) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(w, "event\tsent\tacked\tlost\tdup\treordered\tunknown\tfailed\trecover\twhat the producer did")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", r.event, r.sent, r.acked, r.lost, r.dup, r.reordered, r.unknown, r.failed, r.recover, r.note)
	}
	_ = w.Flush()
	return b.String()
}

// soakRun sends numbered records (the value is the number, the partition
// the number modulo parts) and keeps each one's outcome.
type soakRun struct {
	topic string
	parts int32
	mu    sync.Mutex
	out   []soakOutcome
	wg    sync.WaitGroup
}

type soakOutcome struct {
	part       int32
	sent, done time.Time
	err        error
}

func newSoakRun(topic string, parts int32) *soakRun { return &soakRun{topic: topic, parts: parts} }

// send sends n more records through p without waiting.
func (r *soakRun) send(ctx context.Context, p *producer.Producer, n int) {
	for range n {
		r.mu.Lock()
		i := len(r.out)
		part := int32(i) % r.parts
		r.out = append(r.out, soakOutcome{part: part, sent: time.Now()})
		r.mu.Unlock()
		r.wg.Add(1)
		rec := &producer.Record{Topic: r.topic, Partition: part, ExplicitPartition: true, Value: []byte(strconv.Itoa(i))}
		p.SendCallback(ctx, rec, func(_ producer.RecordMetadata, err error) {
			r.mu.Lock()
			r.out[i].done, r.out[i].err = time.Now(), err
			r.mu.Unlock()
			r.wg.Done()
		})
	}
}

// pump sends one record every every until stop is closed.
func (r *soakRun) pump(ctx context.Context, p *producer.Producer, every time.Duration, stop <-chan struct{}) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			r.send(ctx, p, 1)
		}
	}
}

// wait waits for every record's outcome.
func (r *soakRun) wait(t *testing.T, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("records still without an outcome after %v", d)
	}
}

// errs counts the errors of the records, by text, for the notes.
func (r *soakRun) errs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, o := range r.out {
		if o.err != nil {
			m[o.err.Error()]++
		}
	}
	var s []string
	for k, v := range m {
		s = append(s, fmt.Sprintf("%d× %q", v, k))
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

// firstAckAfter returns the time from at to the first acknowledgement
// after it, -1 if none.
func (r *soakRun) firstAckAfter(at time.Time) time.Duration { return r.firstAckOf(-1, at) }

// firstAckOf is firstAckAfter for partition part's records only (-1: any).
func (r *soakRun) firstAckOf(part int32, at time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := time.Duration(-1)
	for _, o := range r.out {
		if (part < 0 || o.part == part) && o.err == nil && !o.done.IsZero() && o.done.After(at) {
			if d := o.done.Sub(at); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

// maxAckGap returns the longest time between two consecutive
// acknowledgements of partition part among records sent after from.
func (r *soakRun) maxAckGap(part int32, from time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []time.Time
	for _, o := range r.out {
		if o.part == part && o.err == nil && o.sent.After(from) {
			ts = append(ts, o.done)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		gap = max(gap, ts[i].Sub(ts[i-1]))
	}
	return gap
}

// figures compares the outcomes with what a consumer read back: lost is
// an acknowledged record not read, dup a record read more than once,
// reordered a record read after a later one of its partition.
func (r *soakRun) figures(t *testing.T, read []*kgo.Record) soakRow {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	row := soakRow{sent: len(r.out)}
	count := make([]int, len(r.out))
	last := map[int32]int{}
	for _, rec := range read {
		i, err := strconv.Atoi(string(rec.Value))
		require.NoError(t, err, "a record of %s holds %q", r.topic, rec.Value)
		require.True(t, i >= 0 && i < len(r.out), "a record of %s holds %d, never sent", r.topic, i)
		require.Equal(t, r.out[i].part, rec.Partition, "record %d of %s read from partition %d", i, r.topic, rec.Partition)
		count[i]++
		if prev, ok := last[rec.Partition]; ok && i < prev && count[i] == 1 {
			row.reordered++ // a second copy counts as a duplicate only
		}
		last[rec.Partition] = max(last[rec.Partition], i)
	}
	for i, o := range r.out {
		switch {
		case o.err == nil:
			row.acked++
			if count[i] == 0 {
				row.lost++
			}
		case errors.Is(o.err, producer.ErrOutcomeUnknown):
			row.unknown++
		default:
			row.failed++
		}
		if count[i] > 1 {
			row.dup += count[i] - 1
		}
	}
	return row
}

// soakRead reads topic from the start until it has at least min records
// and a second passes without more.
func soakRead(t *testing.T, addrs []string, topic string, committed bool, min int) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := newKgoClient(t, addrs, opts...)
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	var out []*kgo.Record
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch error on %s/%d: %v", tp, p, err)
			}
		})
		got := fs.Records()
		out = append(out, got...)
		if len(got) == 0 && len(out) >= min {
			return out
		}
	}
	t.Fatalf("read %d records of %s, want at least %d", len(out), topic, min)
	return nil
}

// soakObserver counts what the producer did: metadata requests,
// connections set up, and connections dropped by the broker (an error) or
// by the producer (nil).
type soakObserver struct {
	metadata, connected, brokerClosed, clientClosed atomic.Int64

	mu       sync.Mutex
	mdAnswer []time.Time // when each Metadata answer was applied
	batches  []soakBatch // every Produce attempt's answer
}

// soakBatch is one Produce attempt of a batch: when its answer came, when
// it was written, to which broker, and the broker's error.
type soakBatch struct {
	part, broker   int32
	sent, answered time.Time
	err            error
}

func (o *soakObserver) OnMetadataRefreshed(m producer.MetadataRefresh) {
	o.metadata.Add(1)
	if m.Err == nil {
		o.mu.Lock()
		o.mdAnswer = append(o.mdAnswer, time.Now())
		o.mu.Unlock()
	}
}

func (o *soakObserver) OnBatchWritten(b producer.BatchWritten) {
	now := time.Now()
	o.mu.Lock()
	o.batches = append(o.batches, soakBatch{part: b.Partition, broker: b.Broker.NodeID, sent: now.Add(-b.Latency), answered: now, err: b.Err})
	o.mu.Unlock()
}

// leaderMove tells how the producer followed partition part's leader
// after from: the first error answer, the first batch the new leader
// wrote (when written, when answered), and the first Metadata answer
// applied after that error.
func (o *soakObserver) leaderMove(part, newLeader int32, from time.Time) (errAt time.Time, errText string, okSent, okAt, mdAt time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.batches {
		if b.part != part || b.answered.Before(from) {
			continue
		}
		if b.err != nil && errAt.IsZero() {
			errAt, errText = b.answered, b.err.Error()
		}
		if b.err == nil && b.broker == newLeader && okAt.IsZero() {
			okSent, okAt = b.sent, b.answered
		}
	}
	for _, at := range o.mdAnswer {
		if !errAt.IsZero() && at.After(errAt) {
			mdAt = at
			break
		}
	}
	return
}

func (o *soakObserver) OnBrokerConnected(_ producer.BrokerInfo, _ time.Duration, err error) {
	if err == nil {
		o.connected.Add(1)
	}
}

func (o *soakObserver) OnBrokerDisconnected(_ producer.BrokerInfo, err error) {
	if err != nil {
		o.brokerClosed.Add(1)
	} else {
		o.clientClosed.Add(1)
	}
}

// soakLog keeps the producer's log lines (Info and above), and when each
// was logged.
type soakLog struct {
	mu    *sync.Mutex
	lines *[]string
	times *[]time.Time
	attrs []slog.Attr
	// debug keeps the Debug lines about idle connections too.
	debug bool
}

func newSoakLog() soakLog {
	return soakLog{mu: new(sync.Mutex), lines: new([]string), times: new([]time.Time)}
}

func (h soakLog) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.debug && l >= slog.LevelDebug
}

func (h soakLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo && !strings.Contains(r.Message, "idle") {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	*h.times = append(*h.times, time.Now())
	h.mu.Unlock()
	return nil
}

func (h soakLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clip(h.attrs), as...)
	return h
}

func (h soakLog) WithGroup(string) slog.Handler { return h }

// since returns the lines logged from index from on, and the new end.
func (h soakLog) since(from int) ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone((*h.lines)[from:]), len(*h.lines)
}

// between returns the lines logged in [from, to) that contain one of subs.
func (h soakLog) between(from, to time.Time, subs ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, at := range *h.times {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		for _, sub := range subs {
			if strings.Contains((*h.lines)[i], sub) {
				out = append(out, (*h.lines)[i])
				break
			}
		}
	}
	return out
}

// summary counts lines by message (the text before the first attribute).
func soakSummary(lines []string) string {
	m := map[string]int{}
	var order []string
	for _, l := range lines {
		msg := l
		if i := strings.Index(l, "="); i > 0 {
			if j := strings.LastIndex(l[:i], " "); j > 0 {
				msg = l[:j]
			}
		}
		if m[msg] == 0 {
			order = append(order, msg)
		}
		m[msg]++
	}
	var s []string
	for _, msg := range order {
		s = append(s, fmt.Sprintf("%d× %s", m[msg], msg))
	}
	if len(s) == 0 {
		return "nothing logged"
	}
	return "logged " + strings.Join(s, "; ")
}

// newSoakProducer returns a producer with a soakObserver and a soakLog.
func newSoakProducer(t *testing.T, addrs []string, cfg producer.Config) (*producer.Producer, *soakObserver, soakLog) {
	t.Helper()
	obs := new(soakObserver)
	lg := newSoakLog()
	lg.debug = cfg.ConnMaxIdle > 0
	cfg.Hooks = append(cfg.Hooks, obs)
	cfg.Logger = slog.New(lg)
	return newSamsaProducer(t, addrs, cfg), obs, lg
}

// soakBrokerIdle: the broker closes the producer's idle connections
// (connections.max.idle.ms=3000); the producer idles 5 s and resumes.
func soakBrokerIdle(t *testing.T, c *realCluster) soakRow {
	topic := uniqueTopic("soak-idle")
	c.createTopic(t, topic, 3, 1, nil)
	ctx := realContext(t, 2*time.Minute)
	p, obs, lg := newSoakProducer(t, c.addrs, producer.Config{})
	r := newSoakRun(topic, 3)
	r.send(ctx, p, 300)
	r.wait(t, 60*time.Second)
	closedBefore := obs.brokerClosed.Load()
	_, mark := lg.since(0)
	idle := time.Now()
	time.Sleep(5 * time.Second)
	resumed := time.Now()
	brokenIdle := lg.between(idle, resumed, "broker connection broken", "broker closed an idle connection")
	r.send(ctx, p, 300)
	r.wait(t, 60*time.Second)
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = r.firstAckAfter(resumed).Round(time.Millisecond).String()
	m := p.Metrics()
	closed := obs.brokerClosed.Load() - closedBefore
	row.note = fmt.Sprintf("broker closed %d idle connection(s) during the 5 s idle (seen by the connection's reader at once; HookBrokerDisconnected reported %d by the end); Produce connections set up %d in all (connection-close-total %d); %s",
		len(brokenIdle), closed, obs.connected.Load(), m.Producer.ConnectionCloseTotal, soakSummary(lines))
	assert.NotEmpty(t, brokenIdle, "the broker closed no idle connection: is connections.max.idle.ms=3000 set?")
	assert.Zero(t, row.unknown, "records with an unknown outcome")
	assert.Zero(t, row.failed, "records failed: %s", r.errs())
	return row
}

// soakClientIdle: the producer's ConnMaxIdle (1 s) is below the broker's
// connections.max.idle.ms (3 s): over the same 5 s idle, the producer
// closes its connections first and the broker closes none.
func soakClientIdle(t *testing.T, c *realCluster) soakRow {
	topic := uniqueTopic("soak-cidle")
	c.createTopic(t, topic, 3, 1, nil)
	ctx := realContext(t, 2*time.Minute)
	p, obs, lg := newSoakProducer(t, c.addrs, producer.Config{ConnMaxIdle: time.Second})
	r := newSoakRun(topic, 3)
	r.send(ctx, p, 300)
	r.wait(t, 60*time.Second)
	closesBefore := p.Metrics().Producer.ConnectionCloseTotal
	idle := time.Now()
	time.Sleep(5 * time.Second)
	resumed := time.Now()
	closesIdle := p.Metrics().Producer.ConnectionCloseTotal - closesBefore
	byClient := lg.between(idle, resumed, "closing idle connection")
	byClientAll := lg.between(time.Time{}, resumed, "closing idle connection")
	byBroker := lg.between(idle, resumed, "broker connection broken", "broker closed an idle connection")
	_, mark := lg.since(0)
	r.send(ctx, p, 300)
	r.wait(t, 60*time.Second)
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = r.firstAckAfter(resumed).Round(time.Millisecond).String()
	row.note = fmt.Sprintf("ConnMaxIdle 1s: during the 5 s idle the producer closed %d idle connection(s) (Debug \"closing idle connection\"; %d since it started, the metadata one included; Produce ones in connection-close-total: %d), the broker %d; Produce connections set up %d in all; after resuming %s",
		len(byClient), len(byClientAll), closesIdle, len(byBroker), obs.connected.Load(), soakSummary(lines))
	assert.NotEmpty(t, byClient, "the producer closed no idle connection")
	assert.Empty(t, byBroker, "the broker closed an idle connection first")
	assert.Zero(t, row.unknown, "records with an unknown outcome")
	assert.Zero(t, row.failed, "records failed: %s", r.errs())
	return row
}

func (r *soakRun) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.out {
		if o.err == nil {
			n++
		}
	}
	return n
}

// soakPidExpiry: the broker forgets the idempotent producer's id after 5 s
// idle (producer.id.expiration.ms=5000); the producer idles 8 s, then
// writes four partitions at once.
func soakPidExpiry(t *testing.T, c *realCluster) soakRow {
	topic := uniqueTopic("soak-pid")
	c.createTopic(t, topic, 4, 1, nil)
	ctx := realContext(t, 2*time.Minute)
	p, _, lg := newSoakProducer(t, c.addrs, producer.Config{})
	r := newSoakRun(topic, 4)
	r.send(ctx, p, 400)
	r.wait(t, 60*time.Second)
	before := soakProducers(t, c, topic)
	time.Sleep(8 * time.Second)
	after := soakProducers(t, c, topic)
	_, mark := lg.since(0)
	resumed := time.Now()
	r.send(ctx, p, 4000)
	r.wait(t, 60*time.Second)
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = r.firstAckAfter(resumed).Round(time.Millisecond).String()
	row.note = fmt.Sprintf("producer states on the broker (DescribeProducers): %d partitions before the idle, %d after; then 4000 records to 4 partitions at once; %s",
		before, after, soakSummary(lines))
	assert.Equal(t, 4, before, "partitions with producer state before the idle")
	assert.Zero(t, after, "partitions with producer state after 8 s idle: is producer.id.expiration.ms=5000 set?")
	assert.Zero(t, row.unknown, "records with an unknown outcome")
	assert.Zero(t, row.failed, "records failed: %s", r.errs())
	return row
}

// soakProducers returns how many partitions of topic hold a producer's
// state.
func soakProducers(t *testing.T, c *realCluster, topic string) int {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	ds, err := kadm.NewClient(cl).DescribeProducers(realContext(t, 20*time.Second), kadm.TopicsSet{topic: nil})
	require.NoError(t, err)
	n := 0
	ds.EachPartition(func(p kadm.DescribedProducersPartition) {
		require.NoError(t, p.Err)
		if len(p.ActiveProducers) > 0 {
			n++
		}
	})
	return n
}

// soakTxnExpiry: the coordinator forgets the transactional id after 5 s
// (transactional.id.expiration.ms=5000); the producer idles 8 s: its next
// transaction fails fatally with INVALID_PRODUCER_ID_MAPPING, and a new
// producer with the same transactional id commits. At transaction.version
// level (KIP-890): 2 (Kafka 4.4's default), the answer to the first
// Produce; 1, to AddPartitionsToTxn (the level is set back afterwards).
func soakTxnExpiry(t *testing.T, c *realCluster, level int16) soakRow {
	if was := txnVersionOf(t, c); was != level {
		setTxnVersion(t, c, level)
		t.Cleanup(func() { setTxnVersion(t, c, was) })
	}
	topic := uniqueTopic("soak-txn")
	c.createTopic(t, topic, 2, 1, nil)
	ctx := realContext(t, 2*time.Minute)
	txnID := uniqueTopic("soak-txn-id")
	p, _, lg := newSoakProducer(t, c.addrs, producer.Config{TransactionalID: txnID})
	r := newSoakRun(topic, 2)
	for range 3 {
		require.NoError(t, p.BeginTransaction())
		r.send(ctx, p, 20)
		require.NoError(t, p.CommitTransaction(ctx))
	}
	r.wait(t, 30*time.Second)
	committed := r.acked()
	time.Sleep(8 * time.Second)
	_, mark := lg.since(0)
	require.NoError(t, p.BeginTransaction())
	failedFrom := len(r.out)
	r.send(ctx, p, 20)
	commitErr := p.CommitTransaction(ctx)
	r.wait(t, 30*time.Second)
	failedAt := time.Now()
	lines, _ := lg.since(mark)
	require.Error(t, commitErr, "the transaction after the id expired committed")
	t.Logf("CommitTransaction after the idle: %v (IsFatal %v, IsAbortable %v)", commitErr, producer.IsFatal(commitErr), producer.IsAbortable(commitErr))
	t.Logf("a record of that transaction: %v (IsFatal %v, ErrTransactionAborted %v)", r.out[len(r.out)-1].err,
		producer.IsFatal(r.out[len(r.out)-1].err), errors.Is(r.out[len(r.out)-1].err, producer.ErrTransactionAborted))
	assert.True(t, producer.IsFatal(commitErr), "IsFatal(%v)", commitErr)
	assert.Contains(t, commitErr.Error(), "INVALID_PRODUCER_ID_MAPPING")
	recErr := r.out[failedFrom].err
	assert.Error(t, recErr, "a record of the failed transaction")
	assert.Error(t, p.BeginTransaction(), "BeginTransaction after a fatal error")
	retried := p.Metrics().Producer.BatchRetryTotal // a transaction begun at once after a commit may meet CONCURRENT_TRANSACTIONS
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_ = p.Close(closeCtx)
	cancel()

	q, _, _ := newSoakProducer(t, c.addrs, producer.Config{TransactionalID: txnID})
	require.NoError(t, q.BeginTransaction())
	r.send(ctx, q, 20)
	require.NoError(t, q.CommitTransaction(ctx))
	r.wait(t, 30*time.Second)
	row := r.figures(t, soakRead(t, c.addrs, topic, true, committed+20))
	row.recover = r.firstAckAfter(failedAt).Round(time.Millisecond).String() + " (new producer)"
	row.note = fmt.Sprintf("3 transactions back to back (%d batch retries); after 8 s idle the 4th: CommitTransaction = %q (IsFatal %v); its records: %v; a new producer with the same transactional.id committed 20; %s",
		retried, commitErr, producer.IsFatal(commitErr), recErr, soakSummary(lines))
	assert.Equal(t, 80, row.acked, "records acknowledged: 3×20 committed, then 20 by the new producer")
	assert.Equal(t, 20, row.failed+row.unknown, "records of the failed transaction")
	return row
}

// soakTxnExpiryJava runs kafka-clients 4.4's KafkaProducer through the same
// expiry (kafka/JavaTxnExpiry.java) and records what it throws.
func soakTxnExpiryJava(t *testing.T, c *realCluster) soakRow {
	java := soakJava(t, "JavaTxnExpiry")
	topic := uniqueTopic("soak-txn-java")
	c.createTopic(t, topic, 1, 1, nil)
	ctx := realContext(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, java[0], append(java[1:], c.addrs[0], topic, uniqueTopic("soak-java-txn-id"), "8000")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "java JavaTxnExpiry:\n%s%s", out, stderr.String())
	t.Logf("JavaTxnExpiry (kafka-clients 4.4.0) printed:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var failed, abort string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "FAILED "):
			failed = l
		case strings.HasPrefix(l, "ABORT "):
			abort = l
		}
	}
	read := soakRead(t, c.addrs, topic, true, 30)
	var committed, x, recovered int
	for _, rec := range read {
		switch v := string(rec.Value); {
		case strings.HasPrefix(v, "c"):
			committed++
		case strings.HasPrefix(v, "x-"):
			x++
		case strings.HasPrefix(v, "r-"):
			recovered++
		}
	}
	assert.Contains(t, lines, "COMMITTED 30")
	assert.Contains(t, lines, "RECOVERED 10")
	assert.Equal(t, 30, committed, "read_committed: records of the 3 transactions before the idle")
	assert.Zero(t, x, "read_committed: records of the failed transaction")
	assert.Equal(t, 10, recovered, "read_committed: records of the new producer's transaction")
	row := soakRow{sent: 50, acked: 40, failed: 10, lost: 30 - committed + max(0, 10-recovered)}
	row.recover = "n/a"
	row.note = "Java 4.4: " + failed + " | " + abort
	return row
}

// soakJava compiles kafka/NAME.java once (into kafka/target/NAME) and
// returns the command that runs it.
func soakJava(t *testing.T, name string) []string {
	t.Helper()
	javaBin, err := exec.LookPath("java")
	require.NoError(t, err, "java")
	javac, err := exec.LookPath("javac")
	require.NoError(t, err, "javac")
	lib := filepath.Join("kafka", "target", "lib")
	jars, _ := filepath.Glob(filepath.Join(lib, "kafka-clients-*.jar"))
	require.NotEmpty(t, jars, "no kafka-clients jar in %s (interop/kafka/start.sh fetches it)", lib)
	cp := filepath.Join(lib, "*")
	src := filepath.Join("kafka", name+".java")
	classes := filepath.Join("kafka", "target", name)
	class := filepath.Join(classes, name+".class")
	srcInfo, err := os.Stat(src)
	require.NoError(t, err)
	if ci, err := os.Stat(class); err != nil || ci.ModTime().Before(srcInfo.ModTime()) {
		tmp, err := os.MkdirTemp(filepath.Join("kafka", "target"), name+"-")
		require.NoError(t, err)
		defer os.RemoveAll(tmp)
		out, err := exec.Command(javac, "-nowarn", "-d", tmp, "-cp", cp, src).CombinedOutput()
		require.NoError(t, err, "javac %s:\n%s", src, out)
		require.NoError(t, os.MkdirAll(classes, 0o755))
		require.NoError(t, os.Rename(filepath.Join(tmp, name+".class"), class))
	}
	return []string{javaBin, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", cp + string(os.PathListSeparator) + classes, name}
}

// soakReassign: on the 3-node cluster, partition 0's replicas move off its
// leader (AlterPartitionReassignments) while the producer writes.
func soakReassign(t *testing.T, c *realCluster) soakRow {
	topic := uniqueTopic("soak-move")
	c.createTopic(t, topic, 2, 2, nil)
	ctx := realContext(t, 3*time.Minute)
	md := c.topicMetadata(ctx, t, topic)
	var replicas []int32
	for _, mp := range md.Partitions {
		if mp.Partition == 0 {
			replicas = mp.Replicas
		}
	}
	require.Len(t, replicas, 2)
	leader, _ := c.partitionInfo(t, topic, 0)
	var target []int32
	for _, n := range []int32{0, 1, 2} {
		if !slices.Contains(replicas, n) {
			target = append(target, n) // the node without a replica
		}
	}
	for _, n := range replicas {
		if n != leader {
			target = append(target, n) // the follower stays
		}
	}
	p, obs, lg := newSoakProducer(t, c.addrs, producer.Config{})
	r := newSoakRun(topic, 2)
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() { defer close(pumped); r.pump(ctx, p, 2*time.Millisecond, stop) }()
	time.Sleep(3 * time.Second)
	mdBefore := obs.metadata.Load()
	_, mark := lg.since(0)
	cl := newKgoClient(t, c.addrs)
	adm := kadm.NewClient(cl)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	moved := time.Now()
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	for _, pr := range resp.Sorted() {
		require.NoError(t, pr.Err, "AlterPartitionAssignments %s/%d: %s", pr.Topic, pr.Partition, pr.ErrMessage)
	}
	var newLeader int32
	waitFor(t, 60*time.Second, "partition 0's leadership to move", func() bool {
		newLeader, _ = c.partitionInfo(t, topic, 0)
		return newLeader != leader && newLeader >= 0
	})
	leaderMoved := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	<-pumped
	r.wait(t, 60*time.Second)
	mdDuring := obs.metadata.Load() - mdBefore
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = fmt.Sprintf("%v (longest gap between partition 0's acks)", r.maxAckGap(0, moved.Add(-time.Second)).Round(time.Millisecond))
	errAt, errText, okSent, okAt, mdAt := obs.leaderMove(0, newLeader, moved)
	follow := "no error answer: the producer learned the move from Metadata"
	if !errAt.IsZero() {
		rel := func(at time.Time) string {
			if at.IsZero() {
				return "never"
			}
			return "+" + at.Sub(errAt).Round(time.Millisecond).String()
		}
		how := "after a Metadata answer"
		if !okSent.IsZero() && (mdAt.IsZero() || okSent.Before(mdAt)) {
			how = "without waiting for Metadata (KIP-951 hint)"
		}
		follow = fmt.Sprintf("first error %q; from it: first batch to node %d written %s, acked %s, first Metadata answer %s: followed %s",
			errText, newLeader, rel(okSent), rel(okAt), rel(mdAt), how)
	}
	row.note = fmt.Sprintf("partition 0 replicas %v → %v, leader %d → %d (seen %v after the request); %s; %d Metadata requests from the move to the end; %s",
		replicas, target, leader, newLeader, leaderMoved.Sub(moved).Round(time.Millisecond), follow, mdDuring, soakSummary(lines))
	assert.Zero(t, row.unknown, "records with an unknown outcome")
	assert.Zero(t, row.failed, "records failed: %s", r.errs())
	return row
}

// soakKill: the leader of partition 0 (one replica) is killed (SIGKILL)
// while the producer writes, with requests in flight, and started again 8 s
// later. On the 3-node cluster (producer.id.expiration.ms at Kafka's
// default, a day) the retried batches are deduplicated: 0 duplicates. On
// the 1-node soak cluster the outage outlasts producer.id.expiration.ms
// (5 s): the restarted broker drops the expired producer's state as it
// loads its snapshot, so a batch it had appended but not acknowledged
// before the kill is taken again as new when the producer retries it
// (Kafka 2.5+ accepts any sequence from an unknown producer id): a
// duplicate no client can prevent (the Java client retries the same way),
// bounded by the records in flight at the kill.
func soakKill(t *testing.T, c *realCluster) soakRow {
	topic := uniqueTopic("soak-kill")
	c.createTopic(t, topic, 2, 1, nil)
	ctx := realContext(t, 4*time.Minute)
	leader, _ := c.partitionInfo(t, topic, 0)
	p, obs, lg := newSoakProducer(t, c.addrs, producer.Config{DeliveryTimeout: 2 * time.Minute})
	r := newSoakRun(topic, 2)
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() { defer close(pumped); r.pump(ctx, p, 2*time.Millisecond, stop) }()
	time.Sleep(2 * time.Second)
	_, mark := lg.since(0)
	mdBefore := obs.metadata.Load()
	c.node(t, "kill", leader)
	killed := time.Now()
	inFlight := 0
	r.mu.Lock()
	for _, o := range r.out {
		if o.part == 0 && o.sent.Before(killed) && (o.done.IsZero() || o.done.After(killed)) {
			inFlight++
		}
	}
	r.mu.Unlock()
	time.Sleep(time.Until(killed.Add(8 * time.Second)))
	c.node(t, "start", leader)
	up := time.Now()
	waitFor(t, 60*time.Second, "an acknowledgement after the restart", func() bool { return r.firstAckOf(0, up) >= 0 })
	time.Sleep(2 * time.Second)
	close(stop)
	<-pumped
	r.wait(t, 150*time.Second)
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = fmt.Sprintf("partition 0: %v after the kill, %v after the node served again", r.firstAckOf(0, killed).Round(time.Millisecond), r.firstAckOf(0, up).Round(time.Millisecond))
	row.note = fmt.Sprintf("node %d (partition 0's only replica) killed with %d records of partition 0 unacknowledged, back after %v; %d Metadata requests; %s",
		leader, inFlight, up.Sub(killed).Round(time.Millisecond), obs.metadata.Load()-mdBefore, soakSummary(lines))
	if row.unknown+row.failed > 0 {
		row.note += "; errors: " + r.errs()
	}
	if len(c.addrs) == 1 {
		row.dupExpected = true
		row.note += fmt.Sprintf("; %d duplicated (at most the records in flight at the kill: a restarted broker drops a producer id expired meanwhile, outage > producer.id.expiration.ms, and takes a batch it had appended unacknowledged as new when retried)", row.dup)
		assert.LessOrEqual(t, row.dup, inFlight, "duplicates beyond the records in flight at the kill")
	}
	assert.Zero(t, row.failed, "records failed with an error other than ErrOutcomeUnknown: %s", r.errs())
	return row
}

// soakProxy is the bootstrap address of the moved-cluster events: a TCP
// listener on 127.0.0.1 that forwards each connection to its current
// target, as a DNS name would lead to whatever cluster it names now.
type soakProxy struct {
	ln     net.Listener
	target atomic.Value // string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newSoakProxy(t *testing.T, target string) *soakProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	px := &soakProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	px.target.Store(target)
	px.wg.Add(1)
	go px.accept()
	t.Cleanup(px.close)
	return px
}

func (px *soakProxy) addr() string { return px.ln.Addr().String() }

func (px *soakProxy) accept() {
	defer px.wg.Done()
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", px.target.Load().(string), 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		px.mu.Lock()
		px.conns[c], px.conns[up] = struct{}{}, struct{}{}
		px.mu.Unlock()
		px.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer px.wg.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			px.mu.Lock()
			delete(px.conns, dst)
			delete(px.conns, src)
			px.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// point sends new connections to target and closes the ones open.
func (px *soakProxy) point(target string) {
	px.target.Store(target)
	px.mu.Lock()
	for c := range px.conns {
		c.Close()
	}
	px.mu.Unlock()
}

func (px *soakProxy) close() {
	px.ln.Close()
	px.point("127.0.0.1:1")
	px.wg.Wait()
}

// moveNode0 stops node 0 of the 1-node cluster, gives its PLAINTEXT
// listener a new port (storage, cluster id and the other listeners stay)
// and starts it again: the cluster moved to a new address.
func (c *realCluster) moveNode0(t *testing.T) string {
	t.Helper()
	c.node(t, "stop", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	to := ln.Addr().String()
	ln.Close()
	from := c.addrs[0]
	for _, f := range []string{filepath.Join(c.dir, "node-0", "server.properties"), filepath.Join(c.dir, "env")} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		nb := bytes.ReplaceAll(b, []byte("PLAINTEXT://"+from), []byte("PLAINTEXT://"+to))
		nb = bytes.ReplaceAll(nb, []byte("SAMSA_KAFKA_BROKERS="+from), []byte("SAMSA_KAFKA_BROKERS="+to))
		require.NotEqual(t, b, nb, "%s does not name %s", f, from)
		require.NoError(t, os.WriteFile(f, nb, 0o600))
	}
	c.addrs = []string{to}
	return to
}

// soakClusterMoved: the producer's bootstrap address leads to the 1-node
// cluster; the cluster stops and comes back at a new port (same storage,
// same cluster id) and the bootstrap address follows it.
func soakClusterMoved(t *testing.T, c *realCluster, px *soakProxy) soakRow {
	topic := uniqueTopic("soak-moved")
	c.createTopic(t, topic, 2, 1, nil)
	ctx := realContext(t, 4*time.Minute)
	p, obs, lg := newSoakProducer(t, []string{px.addr()}, producer.Config{
		MetadataRecoveryRebootstrapTrigger: 5 * time.Second,
		DeliveryTimeout:                    2 * time.Minute,
	})
	r := newSoakRun(topic, 2)
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() { defer close(pumped); r.pump(ctx, p, 5*time.Millisecond, stop) }()
	time.Sleep(2 * time.Second)
	mdBefore := obs.metadata.Load()
	_, mark := lg.since(0)
	moving := time.Now()
	old := c.addrs[0]
	to := c.moveNode0(t)
	down := time.Now()
	px.point(to)
	c.node(t, "start", 0)
	up := time.Now()
	waitFor(t, 60*time.Second, "an acknowledgement after the move", func() bool { return r.firstAckAfter(up) >= 0 })
	time.Sleep(3 * time.Second)
	close(stop)
	<-pumped
	r.wait(t, 150*time.Second)
	lines, _ := lg.since(mark)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	row.recover = fmt.Sprintf("%v after the cluster was gone, %v after it served at the new address", r.firstAckAfter(down).Round(time.Millisecond), r.firstAckAfter(up).Round(time.Millisecond))
	row.note = fmt.Sprintf("cluster %s → %s (controlled shutdown took %v, gone for %v); %d Metadata requests after the move; %s",
		old, to, down.Sub(moving).Round(time.Millisecond), up.Sub(down).Round(time.Millisecond), obs.metadata.Load()-mdBefore, soakSummary(lines))
	if row.unknown+row.failed > 0 {
		row.note += "; errors: " + r.errs()
	}
	assert.Zero(t, row.failed, "records failed with an error other than ErrOutcomeUnknown: %s", r.errs())
	return row
}

// soakOtherCluster: the bootstrap address leads, for a while, to another
// cluster (the 3-node one) while the producer's cluster is down: nothing
// is written there, and once the address leads back and the cluster is up
// again every record is delivered to it.
func soakOtherCluster(t *testing.T, c, other *realCluster, px *soakProxy) soakRow {
	topic := uniqueTopic("soak-other")
	c.createTopic(t, topic, 2, 1, nil)
	other.createTopic(t, topic, 2, 1, nil) // the records could land there
	ctx := realContext(t, 4*time.Minute)
	idA, idB := soakClusterID(t, c), soakClusterID(t, other)
	px.point(c.addrs[0])
	p, obs, lg := newSoakProducer(t, []string{px.addr()}, producer.Config{
		MetadataRecoveryRebootstrapTrigger: 5 * time.Second,
		DeliveryTimeout:                    2 * time.Minute,
	})
	r := newSoakRun(topic, 2)
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() { defer close(pumped); r.pump(ctx, p, 5*time.Millisecond, stop) }()
	time.Sleep(2 * time.Second)
	_, mark := lg.since(0)
	mdBefore := obs.metadata.Load()
	switched := time.Now()
	px.point(other.addrs[0])
	c.node(t, "stop", 0)
	time.Sleep(12 * time.Second) // past two rebootstrap triggers
	ackedAway := 0
	r.mu.Lock()
	for _, o := range r.out {
		if o.err == nil && o.done.After(switched.Add(time.Second)) {
			ackedAway++
		}
	}
	r.mu.Unlock()
	mismatchLines, mark2 := lg.since(mark)
	back := time.Now()
	px.point(c.addrs[0])
	c.node(t, "start", 0)
	up := time.Now()
	waitFor(t, 60*time.Second, "an acknowledgement after the switch back", func() bool { return r.firstAckAfter(up) >= 0 })
	time.Sleep(2 * time.Second)
	close(stop)
	<-pumped
	r.wait(t, 150*time.Second)
	afterLines, _ := lg.since(mark2)
	row := r.figures(t, soakRead(t, c.addrs, topic, false, r.acked()))
	elsewhere := soakEndOffsets(t, other, topic)
	mismatch, sample := 0, ""
	for _, l := range mismatchLines {
		if strings.Contains(l, idA) && strings.Contains(l, idB) {
			if mismatch == 0 {
				sample = l
			}
			mismatch++
		}
	}
	t.Logf("the first log line naming both cluster ids: %s", sample)
	row.recover = fmt.Sprintf("%v after the address led back, %v after the cluster served again", r.firstAckAfter(back).Round(time.Millisecond), r.firstAckAfter(up).Round(time.Millisecond))
	row.note = fmt.Sprintf("address led to cluster %s instead of %s for %v: %d records written there, %d acked meanwhile, %d log lines name both ids; %d Metadata requests; while away %s; after %s",
		idB, idA, back.Sub(switched).Round(time.Millisecond), elsewhere, ackedAway, mismatch, obs.metadata.Load()-mdBefore, soakSummary(mismatchLines), soakSummary(afterLines))
	if row.unknown+row.failed > 0 {
		row.note += "; errors: " + r.errs()
	}
	assert.Zero(t, elsewhere, "records written to the other cluster")
	assert.Zero(t, ackedAway, "records acknowledged while the address led to the other cluster")
	assert.Positive(t, mismatch, "no log line names both cluster ids")
	assert.Zero(t, row.failed, "records failed with an error other than ErrOutcomeUnknown: %s", r.errs())
	return row
}

// soakClusterID returns the cluster's id from a Metadata answer.
func soakClusterID(t *testing.T, c *realCluster) string {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(realContext(t, 20*time.Second), cl)
	require.NoError(t, err)
	require.NotNil(t, resp.ClusterID)
	return *resp.ClusterID
}

// soakEndOffsets returns the sum of topic's end offsets on c.
func soakEndOffsets(t *testing.T, c *realCluster, topic string) int64 {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(realContext(t, 20*time.Second), topic)
	require.NoError(t, err)
	var n int64
	offs.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		n += o.Offset
	})
	return n
}
