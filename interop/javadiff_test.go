package interop

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/producer"
)

// The cases where samsa departs from kafka-clients 4.4 on purpose (issue
// 32), each run on both clients in one test: what Java did is recorded and
// asserted next to what samsa does. README's Compatibility and
// docs/COMING-FROM.md say the same in prose.

// TestAnotherClusterBehindBootstrapJavaVsSamsa: the producer's bootstrap
// address, and its known broker's address, come to lead to another
// cluster (another cluster id): cluster A's only broker stops and cluster
// B's starts on the same port, while each client sends a record every
// 20 ms. With metadata.cluster.check.enable on and off:
//
//   - kafka-clients 4.4 takes cluster B and writes there. With the check on
//     (the default, KIP-1242) its reconnect to node 0 sends ApiVersions v5
//     naming cluster A and node 0; B answers REBOOTSTRAP_REQUIRED, and Java
//     rebootstraps: the bootstrap address, dialed as no known node and so
//     unchecked, answers Metadata for cluster B, which Metadata.update takes
//     (it only logs "Cluster ID: B" and calls its ClusterResourceListeners).
//     With the check off nothing refuses B: Java writes there through
//     whichever connection comes first, its reconnect to node 0 or a
//     rebootstrap (no known node answered while the port was closed).
//     The check only stops a connection to a known node from being used;
//     it never refuses the new cluster's metadata, on or off.
//   - samsa refuses the other cluster either way: nothing is written to B,
//     and the records fail at their delivery timeout with
//     ErrDeliveryTimeout wrapping ErrClusterMismatch, naming cluster A
//     (and B, when a Metadata answer named it) and saying that a restart
//     moves to another cluster.
//
// Why samsa differs: a new cluster id behind the same name is what a name
// leading to the wrong cluster looks like (a DNS or load-balancer mistake,
// a copied configuration), and records written there are silently lost to
// their readers, with producer ids and sequences that meant nothing there.
// A deliberate move is rare and a restart makes it explicit.
//
// It skips without java, javac or mvn unless CI is set.
func TestAnotherClusterBehindBootstrapJavaVsSamsa(t *testing.T) {
	java := javaCommand(t, "javadiff", "JavaDiffProducer", "the comparison with kafka-clients 4.4's cluster switch")
	const topic = switchTopic
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprintf("metadata.cluster.check.enable=%v", check), func(t *testing.T) {
			t.Run("java", func(t *testing.T) {
				sw := newClusterSwitch(t, topic)
				j := startJavaDiff(t, java, topic, "bootstrap.servers="+sw.addr,
					"metadata.cluster.check.enable="+strconv.FormatBool(check),
					"linger.ms=0", "delivery.timeout.ms=20000", "request.timeout.ms=5000")
				j.do(t, "pump java 20")
				j.waitUntil(t, 10*time.Second, "5 records acknowledged by cluster A", func(s *javaDiffState) bool { return len(s.acks) >= 5 })
				b := sw.toB(t)
				waitFor(t, 15*time.Second, "Java writes to cluster B", func() bool { return len(tbValues(t, b)) >= 5 })
				j.do(t, "stop")
				j.do(t, "flush")
				j.waitUntil(t, 25*time.Second, "flushed", func(s *javaDiffState) bool { return s.flushed })
				j.close(t)

				s := j.snapshot()
				inA, inB := tbValues(t, sw.a), tbValues(t, b)
				named := sw.namedToB()
				t.Logf("Java: cluster ids taken %v; %d records acknowledged, %d failed %v; %d in cluster A, %d in cluster B; ApiVersions to B naming a cluster: %v",
					s.clusters, len(s.acks), len(s.fails), s.failClasses(), len(inA), len(inB), named)
				// kafka-clients' own log says the same (Metadata and
				// NetworkClient at INFO).
				log := j.stderrText()
				assert.Contains(t, log, "Cluster ID: cluster-b", "Java's log")
				const refused = "Rebootstrap requested by server due to cluster metadata mismatch for cluster cluster-a and node 0."
				if check {
					// Refused as node 0 of cluster A (REBOOTSTRAP_REQUIRED),
					// it names B once it has taken B's metadata.
					assert.Contains(t, log, refused, "Java's log")
					assert.Positive(t, named["cluster-b"], "Java with the check on names the cluster it took")
				} else {
					assert.NotContains(t, log, "cluster metadata mismatch", "Java's log")
					assert.Empty(t, named, "Java with the check off names no cluster")
				}
				assert.Equal(t, []string{"cluster-a", "cluster-b"}, s.clusters, "the cluster ids Java's metadata took, in order")
				assert.Empty(t, s.fails, "records Java failed")
				require.NotEmpty(t, inB, "Java wrote nothing to cluster B")
				for i, v := range inB {
					ack, ok := s.acks[v]
					if assert.True(t, ok, "%s is in cluster B but Java did not acknowledge it", v) {
						assert.Equal(t, int64(i), ack.offset, "%s: the offset Java reported in cluster B", v)
					}
				}
				for _, v := range inA {
					assert.Contains(t, s.acks, v, "%s is in cluster A but Java did not acknowledge it", v)
				}
				assert.Len(t, s.acks, len(inA)+len(inB), "Java acknowledged records that neither cluster holds")
			})
			t.Run("samsa", func(t *testing.T) {
				sw := newClusterSwitch(t, topic)
				p := newSamsaProducer(t, []string{sw.addr}, producer.Config{
					DeliveryTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
					DisableMetadataClusterCheck: !check, DisableMetricsPush: true,
				})
				pump := startSamsaPump(t, p, topic, "samsa", 20*time.Millisecond)
				waitFor(t, 10*time.Second, "5 records acknowledged by cluster A", func() bool { return pump.count(true) >= 5 })
				b := sw.toB(t)
				waitFor(t, 15*time.Second, "a record failed with ErrClusterMismatch", func() bool { return pump.mismatches() > 0 })
				pump.stop(t)
				require.NoError(t, p.Flush(testContext(t)))
				pump.wait(t)

				inA, inB := tbValues(t, sw.a), tbValues(t, b)
				acked, failed := pump.count(true), pump.count(false)
				first := pump.firstMismatch()
				t.Logf("samsa: %d records acknowledged, %d failed (%d with ErrClusterMismatch); %d in cluster A, %d in cluster B; %v",
					acked, failed, pump.mismatches(), len(inA), len(inB), first)
				assert.Empty(t, inB, "samsa wrote to cluster B")
				assert.Equal(t, acked, len(inA), "records acknowledged, records in cluster A")
				for v, err := range pump.errs() {
					assert.ErrorIs(t, err, producer.ErrDeliveryTimeout, "%s", v)
				}
				require.Error(t, first)
				assert.Contains(t, first.Error(), "cluster-a", "the error names the producer's cluster")
				assert.Contains(t, first.Error(), "restart the producer", "the error says how to move to another cluster")
				if !check {
					// Refused by the Metadata answer's cluster id, which
					// it names; with the check on, B's ApiVersions v5
					// answer refused the dial before any Metadata.
					assert.Contains(t, first.Error(), "cluster-b", "the error names the other cluster")
				}
			})
		})
	}
}

// switchTopic is the topic of TestAnotherClusterBehindBootstrapJavaVsSamsa.
const switchTopic = "switched"

// clusterSwitch is the case's two clusters: A (cluster id "cluster-a") at
// addr until toB stops its broker and starts B ("cluster-b") on the same
// port. Both have topic, one partition.
type clusterSwitch struct {
	topic string
	addr  string
	port  int
	a     *testbroker.Cluster
	mu    sync.Mutex
	named map[string]int
}

func newClusterSwitch(t *testing.T, topic string) *clusterSwitch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	a := startCluster(t, testbroker.Config{Brokers: 1, BasePort: port, ClusterID: "cluster-a"})
	require.NoError(t, a.CreateTopic(topic, 1))
	return &clusterSwitch{topic: topic, addr: a.Addrs()[0], port: port, a: a, named: map[string]int{}}
}

// toB stops cluster A's broker and starts cluster B on its port. B counts
// the ApiVersions requests that name a cluster (v5, KIP-1242), by the
// cluster id they name: a client with the check on names the cluster and
// node it believes it dials.
func (sw *clusterSwitch) toB(t *testing.T) *testbroker.Cluster {
	t.Helper()
	require.NoError(t, sw.a.StopBroker(0))
	b := startCluster(t, testbroker.Config{Brokers: 1, BasePort: sw.port, ClusterID: "cluster-b"})
	b.Intercept(testbroker.Interceptor{Keys: []int16{18}, Match: func(_ int32, req kmsg.Request) bool {
		if r := req.(*kmsg.ApiVersionsRequest); r.ClusterID != nil {
			sw.mu.Lock()
			sw.named[*r.ClusterID]++
			sw.mu.Unlock()
		}
		return false
	}})
	require.NoError(t, b.CreateTopic(sw.topic, 1))
	require.Equal(t, sw.addr, b.Addrs()[0])
	return b
}

// namedToB returns how many ApiVersions requests to cluster B named each
// cluster id.
func (sw *clusterSwitch) namedToB() map[string]int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return maps.Clone(sw.named)
}

// tbValues returns the values of partition 0 of switchTopic on c, in
// offset order.
func tbValues(t *testing.T, c *testbroker.Cluster) []string {
	t.Helper()
	recs, err := c.Records(switchTopic, 0)
	require.NoError(t, err)
	vs := make([]string, len(recs))
	for i, r := range recs {
		vs[i] = string(r.Value)
	}
	return vs
}

// samsaPump sends a record every interval, values PREFIX-0, PREFIX-1, ...,
// and keeps each one's outcome.
type samsaPump struct {
	quit, done chan struct{}
	mu         sync.Mutex
	outcomes   map[string]error
	wg         sync.WaitGroup
}

func startSamsaPump(t *testing.T, p *producer.Producer, topic, prefix string, every time.Duration) *samsaPump {
	t.Helper()
	ctx := testContext(t)
	sp := &samsaPump{quit: make(chan struct{}), done: make(chan struct{}), outcomes: map[string]error{}}
	go func() {
		defer close(sp.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			v := prefix + "-" + strconv.Itoa(i)
			sp.wg.Add(1)
			p.SendCallback(ctx, &producer.Record{Topic: topic, Value: []byte(v)}, func(_ producer.RecordMetadata, err error) {
				defer sp.wg.Done()
				sp.mu.Lock()
				sp.outcomes[v] = err
				sp.mu.Unlock()
			})
			select {
			case <-sp.quit:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { sp.stop(t) })
	return sp
}

func (sp *samsaPump) stop(t *testing.T) {
	t.Helper()
	select {
	case <-sp.quit:
	default:
		close(sp.quit)
	}
	<-sp.done
}

// wait waits for every record's callback.
func (sp *samsaPump) wait(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { sp.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("records without an outcome 20s after Flush")
	}
}

// count returns the records acknowledged (ok) or failed so far.
func (sp *samsaPump) count(ok bool) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := 0
	for _, err := range sp.outcomes {
		if (err == nil) == ok {
			n++
		}
	}
	return n
}

func (sp *samsaPump) errs() map[string]error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	m := map[string]error{}
	for v, err := range sp.outcomes {
		if err != nil {
			m[v] = err
		}
	}
	return m
}

func (sp *samsaPump) mismatches() int {
	n := 0
	for _, err := range sp.errs() {
		if errors.Is(err, producer.ErrClusterMismatch) {
			n++
		}
	}
	return n
}

// firstMismatch returns the error of the lowest-numbered record that
// failed with ErrClusterMismatch, nil if none did.
func (sp *samsaPump) firstMismatch() error {
	var first error
	best := -1
	for v, err := range sp.errs() {
		n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
		if errors.Is(err, producer.ErrClusterMismatch) && (best < 0 || n < best) {
			first, best = err, n
		}
	}
	return first
}

// TestRealKafkaRecreatedTopicJavaVsSamsa (KIP-516, Produce v13 by topic
// id): on real Kafka 4.4, each client sends warm-0 and sees it
// acknowledged, buffers old-0 ... old-9 (linger 30 s), the topic is deleted
// and recreated under its name (a new topic id), and each then sends
// new-0 ... new-2. Two cases:
//
//   - "learned first": the client's metadata (max age 200 ms) shows the
//     new id before anything is flushed (Java's log says "topicId changed";
//     samsa's buffered records fail by themselves), then new-0..2 and a
//     flush;
//   - "sent first": metadata is not refreshed (max age 60 s), so the flush
//     sends old-0..9 under the old id; the broker answers UNKNOWN_TOPIC_ID;
//     then new-0..2 and a flush.
//
// kafka-clients 4.4 writes all 13 records into the new topic, the 10 made
// for the old one first: its ProducerBatch holds no topic id, and the
// Sender reads metadata.topicIds() for every Produce request, retries
// included. Its log (NetworkClient at DEBUG) shows it: Produce v13 under
// the new id only ("learned first"), or under the old id answered
// UNKNOWN_TOPIC_ID (code 100) and then the same batch under the new id
// ("sent first"). samsa fails old-0..9 with UNKNOWN_TOPIC_ID ("the topic
// was deleted and recreated (topic id A, now B)"), buffered or in flight,
// and writes only new-0..2 into the new topic, from offset 0.
//
// Why samsa differs: a batch is made for a topic, and a recreated topic is
// another topic that only shares the name (new partitions, perhaps another
// partition count and configs, consumers that start over). Java's records
// land in a topic made after they were sent, ahead of the records made for
// it; samsa tells the caller, who may resend them there.
//
// It skips without SAMSA_KAFKA_BROKERS, and without java, javac or mvn
// unless CI is set.
func TestRealKafkaRecreatedTopicJavaVsSamsa(t *testing.T) {
	c := realKafka(t)
	java := javaCommand(t, "javadiff", "JavaDiffProducer", "the comparison with kafka-clients 4.4 on a recreated topic")
	olds := []string{"old-0", "old-1", "old-2", "old-3", "old-4", "old-5", "old-6", "old-7", "old-8", "old-9"}
	news := []string{"new-0", "new-1", "new-2"}
	for _, tc := range []struct {
		name      string
		sentFirst bool
		maxAge    time.Duration
	}{
		{"learned first", false, 200 * time.Millisecond},
		{"sent first", true, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("java", func(t *testing.T) {
				topic := uniqueTopic("recreated-java")
				c.createTopic(t, topic, 1, 1, nil)
				j := startJavaDiff(t, java, topic, "bootstrap.servers="+strings.Join(c.addrs, ","), "linger.ms=30000",
					"metadata.max.age.ms="+strconv.Itoa(int(tc.maxAge.Milliseconds())), "allow.auto.create.topics=false")
				j.do(t, "send warm 1")
				j.do(t, "flush")
				j.waitUntil(t, 20*time.Second, "warm-0 flushed", func(s *javaDiffState) bool { return s.flushes == 1 })
				j.do(t, "send old 10")
				oldID, newID := recreateRealTopic(t, c, topic)
				if tc.sentFirst {
					j.do(t, "flush")
					j.waitUntil(t, 20*time.Second, "old flushed", func(s *javaDiffState) bool { return s.flushes == 2 })
				} else {
					j.waitUntil(t, 20*time.Second, "Java's metadata shows the new topic id", func(*javaDiffState) bool {
						return javaLearnedTopicID(j.stderrText(), newID)
					})
				}
				j.do(t, "send new 3")
				j.do(t, "flush")
				flushes := map[bool]int{false: 2, true: 3}[tc.sentFirst]
				j.waitUntil(t, 20*time.Second, "new flushed", func(s *javaDiffState) bool { return s.flushes == flushes })
				j.close(t)

				s := j.snapshot()
				produces := javaProduces(j.stderrText())
				got := consumeAll(t, c.addrs, topic, 1, 13)
				var values []string
				for _, r := range got {
					values = append(values, string(r.Value))
				}
				t.Logf("Java: topic id %s, now %s; %d acknowledged, %d failed %v; Produce requests %v; the new topic holds %v",
					oldID, newID, len(s.acks), len(s.fails), s.failClasses(), produces, values)
				want := append(append([]string(nil), olds...), news...)
				assert.Equal(t, want, values, "what the recreated topic holds")
				assert.Empty(t, s.fails, "records Java failed")
				for i, v := range want {
					if ack, ok := s.acks[v]; assert.True(t, ok, "%s not acknowledged", v) {
						assert.Equal(t, int64(i), ack.offset, "%s: the offset Java reported", v)
					}
				}
				// Its Produce requests, all v13 by topic id: warm-0 under
				// the old id, then the old id answered UNKNOWN_TOPIC_ID
				// only when it sent first, then the new id.
				require.NotEmpty(t, produces, "no Produce request in Java's log")
				assert.Equal(t, javaProduce{13, oldID, 0}, produces[0], "warm-0's Produce")
				rest := produces[1:]
				if tc.sentFirst {
					require.NotEmpty(t, rest)
					assert.Equal(t, javaProduce{13, oldID, 100}, rest[0], "old-0..9's first Produce: under the old id, UNKNOWN_TOPIC_ID")
					rest = rest[1:]
				}
				require.NotEmpty(t, rest)
				for _, pr := range rest {
					assert.Equal(t, javaProduce{13, newID, 0}, pr, "Produce requests after the recreation")
				}
			})
			t.Run("samsa", func(t *testing.T) {
				topic := uniqueTopic("recreated-samsa")
				c.createTopic(t, topic, 1, 1, nil)
				var wire samsaProduces
				p := newSamsaProducer(t, c.addrs, producer.Config{Linger: 30 * time.Second, MetadataMaxAge: tc.maxAge,
					DisableAutoTopicCreation: true, DisableMetricsPush: true, Hooks: []producer.Hook{&wire}})
				ctx := testContext(t)
				send := func(v string) *producer.Future {
					return p.Send(ctx, &producer.Record{Topic: topic, Value: []byte(v)})
				}
				warm := send("warm-0")
				require.NoError(t, p.Flush(ctx))
				_, err := warm.Wait(ctx)
				require.NoError(t, err)
				var oldFuts []*producer.Future
				for _, v := range olds {
					oldFuts = append(oldFuts, send(v))
				}
				oldID, newID := recreateRealTopic(t, c, topic)
				if tc.sentFirst {
					require.NoError(t, p.Flush(ctx))
				}
				for i, f := range oldFuts {
					wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					_, err := f.Wait(wctx)
					cancel()
					require.ErrorIs(t, err, kerr.UnknownTopicID, "record %s", olds[i])
					require.Contains(t, err.Error(), "deleted and recreated (topic id "+oldID+", now "+newID+")", "record %s", olds[i])
					if i == 0 {
						t.Logf("samsa: %s: %v", olds[i], err)
					}
				}
				var newFuts []*producer.Future
				for _, v := range news {
					newFuts = append(newFuts, send(v))
				}
				require.NoError(t, p.Flush(ctx))
				for i, f := range newFuts {
					md, err := f.Wait(ctx)
					require.NoError(t, err, news[i])
					assert.Equal(t, int64(i), md.Offset, news[i])
				}
				got := consumeAll(t, c.addrs, topic, 1, 3)
				var values []string
				for _, r := range got {
					values = append(values, string(r.Value))
				}
				assert.Equal(t, news, values, "what the recreated topic holds")
				// Its Produce requests, all v13, and the batches answered:
				// warm-0, old-0..9 under the old id answered
				// UNKNOWN_TOPIC_ID only when it sent first, new-0..2.
				versions, batches := wire.get()
				t.Logf("samsa: Produce versions %v; batches answered (records, error) %v", versions, batches)
				assert.Equal(t, []int16{13}, slices.Compact(versions), "Produce versions")
				want := []string{"1 <nil>", "3 <nil>"}
				if tc.sentFirst {
					want = []string{"1 <nil>", "10 " + kerr.UnknownTopicID.Error(), "3 <nil>"}
				}
				assert.Equal(t, want, batches, "batches answered")
			})
		})
	}
}

// samsaProduces is a samsa hook that keeps the version of each Produce
// request written and, for each batch answered, its records and error.
type samsaProduces struct {
	mu       sync.Mutex
	versions []int16
	batches  []string
}

func (w *samsaProduces) OnBrokerRequestWritten(_ producer.BrokerInfo, r producer.RequestWritten) {
	if r.Key == 0 {
		w.mu.Lock()
		w.versions = append(w.versions, r.Version)
		w.mu.Unlock()
	}
}

func (w *samsaProduces) OnBatchWritten(b producer.BatchWritten) {
	w.mu.Lock()
	w.batches = append(w.batches, fmt.Sprint(b.Records, " ", b.Err))
	w.mu.Unlock()
}

func (w *samsaProduces) get() ([]int16, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.versions), slices.Clone(w.batches)
}

// javaProduce is one Produce request in kafka-clients' log: its version,
// the topic id it named (Kafka's base64 form) and the error code its
// answer gave the partition (-1 when no answer was logged).
type javaProduce struct {
	version int
	topicID string
	code    int
}

var (
	javaProduceSent = regexp.MustCompile(`Sending PRODUCE request with header RequestHeader\(apiKey=PRODUCE, apiVersion=(\d+), clientId=[^,]*, correlationId=(\d+).*partitionSizes=\[([^:\]]*):`)
	javaProduceRecv = regexp.MustCompile(`Received PRODUCE response .*correlationId=(\d+), .*TopicProduceResponse\(name='[^']*', topicId=([^,]*), partitionResponses=\[PartitionProduceResponse\(index=\d+, errorCode=(-?\d+)`)
)

// javaProduces reads the Produce requests from kafka-clients' log (its
// NetworkClient at DEBUG), in the order sent.
func javaProduces(log string) []javaProduce {
	var out []javaProduce
	byCorr := map[string]int{}
	for line := range strings.Lines(log) {
		if m := javaProduceSent.FindStringSubmatch(line); m != nil {
			v, _ := strconv.Atoi(m[1])
			byCorr[m[2]] = len(out)
			out = append(out, javaProduce{v, m[3], -1})
		} else if m := javaProduceRecv.FindStringSubmatch(line); m != nil {
			if i, ok := byCorr[m[1]]; ok && out[i].topicID == m[2] {
				out[i].code, _ = strconv.Atoi(m[3])
			}
		}
	}
	return out
}

// javaLearnedTopicID reports whether kafka-clients' log says its metadata
// took id for the topic's partition ("... since the associated topicId
// changed from OLD to NEW", Metadata at INFO).
func javaLearnedTopicID(log, id string) bool {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "associated topicId changed from") && strings.HasSuffix(strings.TrimSpace(line), " to "+id) {
			return true
		}
	}
	return false
}

// recreateRealTopic deletes topic and creates it again (one partition),
// retrying the creation while Kafka still has the old one, and returns
// the old and the new topic ids in Kafka's base64 form, which must differ.
func recreateRealTopic(t *testing.T, c *realCluster, topic string) (oldID, newID string) {
	t.Helper()
	ctx := testContext(t)
	old := c.topicMetadata(ctx, t, topic).TopicID
	deleteTopic(t, &samsaBroker{addrs: c.addrs}, topic)
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	waitFor(t, 20*time.Second, "the topic created again", func() bool {
		return createTopicWith(ctx, cl, topic, 1, 1, nil) == nil
	})
	c.waitTopic(t, topic, 1)
	recreated := c.topicMetadata(ctx, t, topic).TopicID
	require.NotEqual(t, old, recreated, "the recreated topic's id")
	return base64.RawURLEncoding.EncodeToString(old[:]), base64.RawURLEncoding.EncodeToString(recreated[:])
}

// javaDiff is a running JavaDiffProducer (see the Java file for its
// commands and output).
type javaDiff struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncWriter
	mu     sync.Mutex
	st     javaDiffState
	read   chan struct{} // closed when stdout is drained
}

// javaDiffState is what JavaDiffProducer reported so far.
type javaDiffState struct {
	ready    bool
	clusters []string
	acks     map[string]javaAck
	fails    map[string]string // value → exception class and message
	flushed  bool
	flushes  int
	closed   bool
}

type javaAck struct {
	partition int32
	offset    int64
}

func (s *javaDiffState) failClasses() map[string]int {
	m := map[string]int{}
	for _, f := range s.fails {
		m[strings.Fields(f)[0]]++
	}
	return m
}

// startJavaDiff starts JavaDiffProducer for topic with the given producer
// properties and waits until its producer is built.
func startJavaDiff(t *testing.T, cmdline []string, topic string, props ...string) *javaDiff {
	t.Helper()
	args := append(append(cmdline[1:len(cmdline):len(cmdline)], topic), props...)
	cmd := exec.Command(cmdline[0], args...)
	j := &javaDiff{cmd: cmd, stderr: &syncWriter{}, read: make(chan struct{})}
	j.st.acks, j.st.fails = map[string]javaAck{}, map[string]string{}
	var err error
	j.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = j.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = j.stdin.Close()
		_ = cmd.Process.Kill() // after close's Wait: "process already finished"
		<-j.read
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("JavaDiffProducer's stderr:\n%s", j.stderrText())
		}
	})
	go func() {
		defer close(j.read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			j.line(sc.Text())
		}
	}()
	j.waitUntil(t, 30*time.Second, "the Java producer built", func(s *javaDiffState) bool { return s.ready })
	return j
}

// syncWriter keeps what is written to it; it may be read while written.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (j *javaDiff) line(l string) {
	f := strings.SplitN(l, " ", 4)
	j.mu.Lock()
	defer j.mu.Unlock()
	switch f[0] {
	case "READY":
		j.st.ready = true
	case "CLUSTER":
		j.st.clusters = append(j.st.clusters, f[1])
	case "ACK":
		p, _ := strconv.Atoi(f[2])
		o, _ := strconv.ParseInt(f[3], 10, 64)
		j.st.acks[f[1]] = javaAck{int32(p), o}
	case "FAIL":
		j.st.fails[f[1]] = strings.Join(f[2:], " ")
	case "FLUSHED":
		j.st.flushed = true
		j.st.flushes++
	case "CLOSED":
		j.st.closed = true
	}
}

// do writes one command to the program.
func (j *javaDiff) do(t *testing.T, command string) {
	t.Helper()
	_, err := io.WriteString(j.stdin, command+"\n")
	require.NoError(t, err, "JavaDiffProducer: %s", command)
}

// waitUntil polls the program's state every 20 ms until cond holds,
// failing the test with what after d or when the program has exited.
func (j *javaDiff) waitUntil(t *testing.T, d time.Duration, what string, cond func(*javaDiffState) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		j.mu.Lock()
		ok := cond(&j.st)
		j.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-j.read:
			t.Fatalf("JavaDiffProducer exited before: %s", what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// close closes the Java producer and waits for the program to exit.
func (j *javaDiff) close(t *testing.T) {
	t.Helper()
	j.do(t, "close")
	j.waitUntil(t, 30*time.Second, "the Java producer closed", func(s *javaDiffState) bool { return s.closed })
	<-j.read
}

// snapshot returns a copy of what the program reported.
func (j *javaDiff) snapshot() javaDiffState {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.st
	s.clusters = append([]string(nil), j.st.clusters...)
	s.acks, s.fails = map[string]javaAck{}, map[string]string{}
	for k, v := range j.st.acks {
		s.acks[k] = v
	}
	for k, v := range j.st.fails {
		s.fails[k] = v
	}
	return s
}

// stderrText returns what the program wrote to stderr so far: kafka-clients'
// log. A waitUntil condition may call it.
func (j *javaDiff) stderrText() string {
	j.stderr.mu.Lock()
	defer j.stderr.mu.Unlock()
	return j.stderr.b.String()
}
