package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/producer"
)

// Issue 22: the example's -partitions 6 against a real Kafka that
// auto-creates topics gave a topic of 1 partition, because the producer's
// Metadata request (allow_auto_topic_creation=true) let the broker create it
// with its num.partitions before samsa's CreateTopics ran. These tests run
// on the 1-node cluster, whose broker auto-creates topics (Kafka's default
// auto.create.topics.enable=true, num.partitions=1): requireBrokerAutoCreates
// checks that first.

// askedPartitionsWarning is the producer's Warn message for a topic that
// exists with another partition count than AutoCreatePartitions.
const askedPartitionsWarning = "partition count other than AutoCreatePartitions"

// TestRealKafkaAutoCreatePartitionsWithBrokerAutoCreate: a producer with
// AutoCreateTopics and AutoCreatePartitions 6 gets a topic of 6 partitions
// on a broker that auto-creates topics with 1, every record delivered to
// them; and a topic that existed with 2 partitions keeps them, with one
// warning that names it, its count and the count asked.
func TestRealKafkaAutoCreatePartitionsWithBrokerAutoCreate(t *testing.T) {
	c := realKafka(t)
	c.requireBrokerAutoCreates(t)
	cases := []struct {
		name     string
		existing int32 // partitions of the topic made before the producer starts; 0: none
		rf       int16
		want     int32
		warnings int
	}{
		{"new topic", 0, 0, 6, 0},
		{"new topic, replication factor 1", 0, 1, 6, 0},
		{"existing topic of 2 partitions", 2, 0, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := uniqueTopic("samsa-asked")
			if tc.existing > 0 {
				c.createTopic(t, topic, tc.existing, 1, nil)
			}
			var logs testutil.SyncBuffer
			p := newSamsaProducer(t, c.addrs, producer.Config{
				AutoCreateTopics:            true,
				AutoCreatePartitions:        6,
				AutoCreateReplicationFactor: tc.rf,
				MaxBlock:                    20 * time.Second,
				Logger:                      slog.New(slog.NewTextHandler(&logs, nil)),
			})
			const n = 600
			recs := makeSamsaRecords(topic, n)
			mds := sendAll(t, p, recs)
			require.NoError(t, p.Close(testContext(t)))

			require.Equal(t, tc.want, c.partitionCount(t, topic), "partitions of %s", topic)
			got := consumeAll(t, c.addrs, topic, tc.want, n)
			checkDelivered(t, recs, mds, got, tc.want, compression.None)
			warnings := logs.LinesWith(askedPartitionsWarning)
			require.Len(t, warnings, tc.warnings, "%s", logs.String())
			for _, w := range warnings {
				require.Contains(t, w, "topic="+topic)
				require.Contains(t, w, fmt.Sprintf("partitions=%d", tc.existing))
				require.Contains(t, w, "asked=6")
			}
		})
	}
}

// TestRealKafkaExamplePartitionsFlag: the example's -partitions 6 (the
// binary, built from examples/producer) makes a topic of 6 partitions on a
// broker that auto-creates topics with 1, and its summary says 6; for a
// topic that existed with 2 partitions the summary says 2 and warns.
func TestRealKafkaExamplePartitionsFlag(t *testing.T) {
	c := realKafka(t)
	c.requireBrokerAutoCreates(t)
	bin := buildExample(t)
	cases := []struct {
		name     string
		existing int32
		want     int
		warnings int
	}{
		{"new topic", 0, 6, 0},
		{"existing topic of 2 partitions", 2, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := uniqueTopic("samsa-example")
			if tc.existing > 0 {
				c.createTopic(t, topic, tc.existing, 1, nil)
			}
			ctx := realContext(t, 2*time.Minute)
			cmd := exec.CommandContext(ctx, bin, "-json", "-brokers", strings.Join(c.addrs, ","),
				"-topic", topic, "-partitions", "6", "-records", "2000")
			cmd.WaitDelay = 5 * time.Second
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "examples/producer: %s\n%s", out, stderr.String())
			var s struct {
				Partitions      int      `json:"partitions"`
				PartitionsAsked int      `json:"partitions_asked"`
				Records         int64    `json:"records"`
				Verified        bool     `json:"verified"`
				Warnings        []string `json:"warnings"`
			}
			require.NoError(t, json.Unmarshal(out, &s), "%s", out)
			require.True(t, s.Verified, "%s", out)
			require.Equal(t, int64(2000), s.Records)
			require.Equal(t, tc.want, s.Partitions, "the summary's partitions: %s", out)
			require.Equal(t, 6, s.PartitionsAsked)
			require.Len(t, s.Warnings, tc.warnings, "%s", out)
			require.Equal(t, int32(tc.want), c.partitionCount(t, topic), "partitions of %s", topic)
		})
	}
}

// requireBrokerAutoCreates fails the test unless the cluster's broker 0
// auto-creates topics (auto.create.topics.enable=true) with num.partitions
// 1, read with DescribeConfigs: the premise of the issue 22 tests.
func (c *realCluster) requireBrokerAutoCreates(t *testing.T) {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.ResourceName = "0"
	res.ConfigNames = []string{"auto.create.topics.enable", "num.partitions"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testContext(t), cl)
	require.NoError(t, err)
	require.Len(t, resp.Resources, 1)
	r := resp.Resources[0]
	require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "DescribeConfigs of broker 0: %s", deref(r.ErrorMessage))
	got := map[string]string{}
	for _, cfg := range r.Configs {
		got[cfg.Name] = deref(cfg.Value)
	}
	require.Equal(t, map[string]string{"auto.create.topics.enable": "true", "num.partitions": "1"}, got,
		"the cluster of %s must auto-create topics with 1 partition", c.dirVar)
}

// buildExample builds examples/producer (of the module in the parent
// directory) into the test's temporary directory and returns its path.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "producer")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/producer")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./examples/producer:\n%s", out)
	return bin
}
