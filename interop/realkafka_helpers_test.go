package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/producer"
)

// The realkafka_* tests run samsa against a real Apache Kafka cluster,
// started by interop/kafka/start.sh (make test does it when java and mvn
// are present). They read the cluster from the environment that script
// writes:
//
//	SAMSA_KAFKA_BROKERS   the 1-node cluster (broker defaults, so
//	                      auto.create.topics.enable=true; with -quota and
//	                      -acl, also SAMSA_KAFKA_QUOTA_CLIENT_ID and
//	                      SAMSA_KAFKA_DENIED_TOPIC)
//	SAMSA_KAFKA_DIR       its directory (logs/node-N.log)
//	SAMSA_KAFKA_TELEMETRY_DIR  with -telemetry: where the client metrics plugin
//	                      writes each push (client ids starting with
//	                      SAMSA_KAFKA_TELEMETRY_CLIENT_ID_PREFIX are subscribed)
//	SAMSA_KAFKA_OAUTH_BROKERS  with -sasl-ssl: the OAUTH listener, which checks
//	                      tokens against the JWKS of SAMSA_KAFKA_OAUTH_IDP_KEY
//	SAMSA_KAFKA3_BROKERS  the 3-node cluster, auto.create.topics.enable=false
//	SAMSA_KAFKA3_DIR      its directory, for kafka/node.sh stop|start N
//
// A test whose variables are unset is skipped with one line saying which.
// The clusters are shared by every test and by reruns, so every topic name
// ends with a random suffix. With CI set, record counts are smaller.

// realCluster is a running Apache Kafka cluster given by the environment.
type realCluster struct {
	addrs []string
	// dir is the cluster's start.sh directory, "" if not given.
	dir string
	// dirVar names the variable dir came from, for messages.
	dirVar string
	// stopped holds the nodes the test stopped, for its cleanup to
	// restart those still down.
	stopped map[int32]bool
}

// realKafka returns the 1-node cluster of SAMSA_KAFKA_BROKERS, or skips the
// test. It also registers the test's goroutine-leak check and, on failure,
// the tail of the broker's log.
func realKafka(t *testing.T) *realCluster {
	t.Helper()
	return realClusterFrom(t, "SAMSA_KAFKA_BROKERS", "SAMSA_KAFKA_DIR")
}

// realKafka3 returns the 3-node cluster of SAMSA_KAFKA3_BROKERS, or skips
// the test.
func realKafka3(t *testing.T) *realCluster {
	t.Helper()
	return realClusterFrom(t, "SAMSA_KAFKA3_BROKERS", "SAMSA_KAFKA3_DIR")
}

func realClusterFrom(t *testing.T, brokersVar, dirVar string) *realCluster {
	t.Helper()
	brokers := os.Getenv(brokersVar)
	if brokers == "" {
		t.Skipf("%s is not set: no real Kafka cluster (interop/kafka/start.sh; make test starts one when java and mvn are present)", brokersVar)
	}
	c := &realCluster{addrs: strings.Split(brokers, ","), dir: os.Getenv(dirVar), dirVar: dirVar}
	checkNoLeak(t)
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t, 20)
		}
	})
	return c
}

// realEnv returns the environment variable name, or skips the test with why
// it is needed.
func realEnv(t *testing.T, name, why string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s is not set: %s", name, why)
	}
	return v
}

// checkNoLeak makes the test fail if it leaves a goroutine behind once its
// cleanups (which close its producers and clients) have run: the package's
// TestMain checks the same for the whole run, this names the test. It must
// be called before anything registers a cleanup, and only in a test that
// is not parallel.
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// inCI reports whether the CI environment variable is set: record counts
// are then smaller, so that CI stays within its time budget.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// recordCount returns full, or ci when running in CI.
func recordCount(full, ci int) int {
	if inCI() {
		return ci
	}
	return full
}

// uniqueTopic returns prefix with a random suffix: the clusters outlive a
// test run, so names must not repeat across runs.
func uniqueTopic(prefix string) string {
	return prefix + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// realContext returns a context that ends with the test or after d.
func realContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with an admin CreateTopics request sent to the
// controller through kgo, with the given topic configs, and waits until
// metadata shows every partition with a leader.
func (c *realCluster) createTopic(t *testing.T, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	require.NoError(t, createTopicWith(testContext(t), cl, topic, partitions, rf, configs))
	c.waitTopic(t, topic, partitions)
}

// createTopicWith sends CreateTopics for one topic through cl. It may run
// on any goroutine.
func createTopicWith(ctx context.Context, cl *kgo.Client, topic string, partitions int32, rf int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateTopics %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("CreateTopics %s: %w (%s)", topic, err, deref(resp.Topics[0].ErrorMessage))
	}
	return nil
}

// topicMetadata returns the Metadata answer of one broker for topic (an
// UNKNOWN_TOPIC_OR_PARTITION answer included), never creating the topic.
func (c *realCluster) topicMetadata(ctx context.Context, t *testing.T, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	return resp.Topics[0]
}

// brokerView is one broker's Metadata answer for a topic.
type brokerView struct {
	addr string
	kmsg.MetadataResponseTopic
}

// topicMetadataFromEach asks every running broker of the cluster (c.addrs,
// which start.sh lists in node id order, less the nodes the test stopped)
// for the Metadata of topic, and returns their answers. Each broker learns
// a change (a new topic, a new leader, a shrunk ISR) from the controller
// on its own, so a test that checks a change by asking one broker and then
// relies on it through another must wait for all of them. An error (a
// broker not answering, or answering with a topic error) names the
// broker.
func (c *realCluster) topicMetadataFromEach(ctx context.Context, t *testing.T, topic string) ([]brokerView, error) {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	seeds := cl.SeedBrokers() // in c.addrs' order
	views := make([]brokerView, 0, len(seeds))
	for i, b := range seeds {
		if c.stopped[int32(i)] {
			continue
		}
		addr := c.addrs[i]
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = false
		resp, err := req.RequestWith(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("Metadata from %s: %w", addr, err)
		}
		if len(resp.Topics) != 1 {
			return nil, fmt.Errorf("Metadata from %s: %d topics", addr, len(resp.Topics))
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			return nil, fmt.Errorf("Metadata from %s: %w", addr, err)
		}
		views = append(views, brokerView{addr, resp.Topics[0]})
	}
	return views, nil
}

// waitTopic waits until every broker's metadata shows topic with
// partitions partitions, each with a leader.
func (c *realCluster) waitTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	ctx := testContext(t)
	for {
		views, err := c.topicMetadataFromEach(ctx, t, topic)
		for _, v := range views {
			if err == nil && int32(len(v.Partitions)) != partitions {
				err = fmt.Errorf("%s shows %d partitions", v.addr, len(v.Partitions))
			}
			for _, p := range v.Partitions {
				if err == nil && (p.ErrorCode != 0 || p.Leader < 0) {
					err = fmt.Errorf("%s shows partition %d without a leader (%v)", v.addr, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s has no leader for each of its %d partitions: %v", topic, partitions, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// partitionCount returns how many partitions topic has, failing the test if
// it does not exist.
func (c *realCluster) partitionCount(t *testing.T, topic string) int32 {
	t.Helper()
	mt := c.topicMetadata(testContext(t), t, topic)
	require.Zero(t, mt.ErrorCode, "Metadata for %s", topic)
	return int32(len(mt.Partitions))
}

// partitionInfo returns the leader and in-sync replicas of a partition.
func (c *realCluster) partitionInfo(t *testing.T, topic string, partition int32) (leader int32, isr []int32) {
	t.Helper()
	mt := c.topicMetadata(testContext(t), t, topic)
	require.Zero(t, mt.ErrorCode, "Metadata for %s", topic)
	for _, p := range mt.Partitions {
		if p.Partition == partition {
			return p.Leader, p.ISR
		}
	}
	t.Fatalf("topic %s has no partition %d", topic, partition)
	return -1, nil
}

// waitFor polls cond every 100 ms until it holds, failing the test with
// what after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// node runs interop/kafka/node.sh to stop, kill or start one node of the
// cluster, failing the test with the script's output if it fails.
func (c *realCluster) node(t *testing.T, verb string, n int32) {
	t.Helper()
	if c.dir == "" {
		t.Fatalf("%s is not set: cannot %s node %d", c.dirVar, verb, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join("kafka", "node.sh"), "-dir", c.dir, verb, strconv.Itoa(int(n)))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kafka/node.sh %s %d:\n%s", verb, n, out)
}

// nodeLog returns node n's broker log, "" if there is none.
func (c *realCluster) nodeLog(n int32) string {
	if c.dir == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, "logs", fmt.Sprintf("node-%d.log", n)))
	return string(b)
}

// logTails logs the last warnings and errors of every node's log, for a
// failing test.
func (c *realCluster) logTails(t *testing.T, lines int) {
	t.Helper()
	for n := int32(0); n < 3; n++ {
		var s []string
		for line := range strings.Lines(c.nodeLog(n)) {
			if strings.Contains(line, "] WARN ") || strings.Contains(line, "] ERROR ") {
				s = append(s, strings.TrimRight(line, "\n"))
			}
		}
		if len(s) > lines {
			s = s[len(s)-lines:]
		}
		if len(s) > 0 {
			t.Logf("last %d warnings and errors in node %d's log (%s):\n%s", len(s), n, c.dirVar, strings.Join(s, "\n"))
		}
	}
}

// kcatRecord is one line of kcat -C -J: a record as librdkafka read it.
// Null keys, values and header values are JSON nulls.
type kcatRecord struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	TSType    string    `json:"tstype"`
	TS        int64     `json:"ts"`
	Headers   []*string `json:"headers"` // key, value, key, value...
	Key       *string   `json:"key"`
	Payload   *string   `json:"payload"`
}

// kcatConsume reads every record of topic from the start with kcat -C -J
// until the end of each partition.
func kcatConsume(t *testing.T, addrs []string, topic string) []kcatRecord {
	t.Helper()
	out := runKcat(t, "", "-C", "-b", strings.Join(addrs, ","), "-t", topic, "-o", "beginning", "-e", "-q", "-J")
	var recs []kcatRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r kcatRecord
		require.NoError(t, json.Unmarshal(line, &r), "kcat -J line %q", line)
		recs = append(recs, r)
	}
	require.NoError(t, sc.Err())
	return recs
}

// checkKcatRecords checks that kcat read exactly the records samsa sent
// (mds are samsa's metadata of sent): each once, at the partition and
// offset samsa reported, with its key, value, headers in order and
// timestamp (a create time, in milliseconds), null kept apart from empty.
func checkKcatRecords(t *testing.T, sent []*producer.Record, mds []producer.RecordMetadata, got []kcatRecord) {
	t.Helper()
	type at struct {
		p int32
		o int64
	}
	index := make(map[at]int, len(mds))
	for i, md := range mds {
		index[at{md.Partition, md.Offset}] = i
	}
	var problems int
	report := func(format string, args ...any) {
		problems++
		if problems <= 10 {
			t.Errorf(format, args...)
		}
	}
	require.Len(t, got, len(sent), "kcat read %d records, %d were sent", len(got), len(sent))
	seen := make([]bool, len(sent))
	for _, r := range got {
		i, ok := index[at{r.Partition, r.Offset}]
		if !ok {
			report("kcat read a record at %d/%d that samsa did not report", r.Partition, r.Offset)
			continue
		}
		if seen[i] {
			report("kcat read %d/%d twice", r.Partition, r.Offset)
			continue
		}
		seen[i] = true
		want := sent[i]
		if !sameBytes(want.Key, kcatBytes(r.Key)) {
			report("record %d (kcat): key %s, want %s", i, describeBytes(kcatBytes(r.Key)), describeBytes(want.Key))
		}
		if !sameBytes(want.Value, kcatBytes(r.Payload)) {
			report("record %d (kcat): value %s, want %s", i, describeBytes(kcatBytes(r.Payload)), describeBytes(want.Value))
		}
		var hs []kgo.RecordHeader
		for j := 0; j+1 < len(r.Headers); j += 2 {
			hs = append(hs, kgo.RecordHeader{Key: deref(r.Headers[j]), Value: kcatBytes(r.Headers[j+1])})
		}
		if len(r.Headers)%2 != 0 || !sameHeaders(want.Headers, hs) {
			report("record %d (kcat): headers %s, want %s", i, describeKgoHeaders(hs), describeHeaders(want.Headers))
		}
		if r.TSType != "create" || r.TS != want.Timestamp.UnixMilli() {
			report("record %d (kcat): timestamp %s %d, want create %d", i, r.TSType, r.TS, want.Timestamp.UnixMilli())
		}
	}
	for i, ok := range seen {
		if !ok {
			report("record %d (sent to %d/%d) never read by kcat", i, mds[i].Partition, mds[i].Offset)
		}
	}
	if problems > 10 {
		t.Errorf("... %d mismatches in all", problems)
	}
}

// kcatBytes turns a kcat JSON string into bytes, null staying nil.
func kcatBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}
