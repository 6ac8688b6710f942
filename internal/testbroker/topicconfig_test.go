package testbroker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicWith creates topic with configs over the wire (CreateTopics
// v7) and returns its answer.
func createTopicWith(t *testing.T, w *wireClient, topic string, rf int16, configs map[string]string) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, rf
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	req.Topics = append(req.Topics, rt)
	resp := w.request(req).(*kmsg.CreateTopicsResponse)
	require.Len(t, resp.Topics, 1)
	return resp.Topics[0]
}

func produceOne(t *testing.T, w *wireClient, topic string, acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := w.request(produceRequest(9, acks, topic, map[int32][]byte{0: batch})).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

// TestCreateTopicsConfigsHonoured: the topic configs of CreateTopics change
// what Produce and Fetch do, as on Kafka (kgo's
// TestClient_ProduceLargeMessages and
// TestIssueFetchLargerThanBrokerMaxReadBytes rely on max.message.bytes).
func TestCreateTopicsConfigsHonoured(t *testing.T) {
	small := testBatch{n: 1, valueSize: 1000}.build(t)
	big := testBatch{n: 60, valueSize: 1000}.build(t)    // ~60 KB
	huge := testBatch{n: 2, valueSize: 1 << 20}.build(t) // ~2 MiB, over the cluster's 1 MiB
	cases := []struct {
		name    string
		configs map[string]string
		check   func(t *testing.T, c *Cluster, w *wireClient)
	}{
		{"max.message.bytes below the broker's", map[string]string{"max.message.bytes": "51200"}, func(t *testing.T, _ *Cluster, w *wireClient) {
			assert.Zero(t, produceOne(t, w, "t", 1, small).ErrorCode)
			assert.Equal(t, codeMessageTooLarge, produceOne(t, w, "t", 1, big).ErrorCode)
		}},
		{"max.message.bytes above the broker's", map[string]string{"max.message.bytes": "10485760"}, func(t *testing.T, _ *Cluster, w *wireClient) {
			assert.Zero(t, produceOne(t, w, "t", 1, huge).ErrorCode)
		}},
		{"no config: the broker's message.max.bytes", nil, func(t *testing.T, _ *Cluster, w *wireClient) {
			assert.Equal(t, codeMessageTooLarge, produceOne(t, w, "t", 1, huge).ErrorCode)
		}},
		{"message.timestamp.type LogAppendTime", map[string]string{"message.timestamp.type": "LogAppendTime"}, func(t *testing.T, c *Cluster, w *wireClient) {
			rp := produceOne(t, w, "t", 1, testBatch{n: 2, ts: 1000}.build(t))
			require.Zero(t, rp.ErrorCode)
			assert.Greater(t, rp.LogAppendTime, int64(1000))
			recs, err := c.Records("t", 0)
			require.NoError(t, err)
			require.Len(t, recs, 2)
			assert.Equal(t, rp.LogAppendTime, recs[0].Timestamp)
		}},
		{"message.timestamp.type CreateTime", map[string]string{"message.timestamp.type": "CreateTime"}, func(t *testing.T, _ *Cluster, w *wireClient) {
			assert.EqualValues(t, -1, produceOne(t, w, "t", 1, small).LogAppendTime)
		}},
		{"retention.bytes", map[string]string{"retention.bytes": "2500"}, func(t *testing.T, c *Cluster, w *wireClient) {
			for range 5 { // ~1 KB each
				require.Zero(t, produceOne(t, w, "t", 1, small).ErrorCode)
			}
			n, err := c.NumBatches("t", 0)
			require.NoError(t, err)
			assert.Equal(t, 2, n, "the oldest batches beyond 2500 bytes are gone")
			fr := w.request(fetchRequest(12, "t", 0, 0, -1, 0)).(*kmsg.FetchResponse)
			p := fr.Topics[0].Partitions[0]
			assert.Equal(t, codeOffsetOutOfRange, p.ErrorCode)
			assert.EqualValues(t, 3, p.LogStartOffset)
			assert.EqualValues(t, 5, p.HighWatermark)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, Config{Brokers: 1})
			w := dialBroker(t, c.Addrs()[0], "cfg")
			require.Zero(t, createTopicWith(t, w, "t", 1, tc.configs).ErrorCode)
			tc.check(t, c, w)
		})
	}
}

// TestMinInsyncReplicas: with min.insync.replicas 3 on a 3-replica topic,
// acks=all fails with NOT_ENOUGH_REPLICAS once a replica's broker stops;
// acks=1 still succeeds.
func TestMinInsyncReplicas(t *testing.T) {
	c := newTestCluster(t, Config{})
	w := dialBroker(t, c.Addrs()[0], "cfg")
	require.Zero(t, createTopicWith(t, w, "t", 3, map[string]string{"min.insync.replicas": "3"}).ErrorCode)
	leader, addr := leaderAddr(t, c, "t", 0)
	lw := dialBroker(t, addr, "cfg")
	batch := testBatch{}.build(t)
	assert.Zero(t, produceOne(t, lw, "t", -1, batch).ErrorCode)
	require.NoError(t, c.StopBroker((leader+1)%3))
	assert.Equal(t, ecNotEnoughReplicas, produceOne(t, lw, "t", -1, batch).ErrorCode)
	assert.Zero(t, produceOne(t, lw, "t", 1, batch).ErrorCode)
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	assert.EqualValues(t, 2, hw, "the refused batch was not appended")
}

// TestCreateTopicsBadConfigs: an unknown name or a bad value fails the
// topic with INVALID_CONFIG and creates nothing.
func TestCreateTopicsBadConfigs(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "cfg")
	for i, cfg := range []map[string]string{
		{"no.such.config": "1"},
		{"max.message.bytes": "big"},
		{"min.insync.replicas": "0"},
		{"message.timestamp.type": "WallClock"},
		{"cleanup.policy": "delete,shred"},
	} {
		rt := createTopicWith(t, w, "t", 1, cfg)
		assert.Equal(t, ecInvalidConfig, rt.ErrorCode, "case %d", i)
		assert.NotNil(t, rt.ErrorMessage)
	}
	_, err := c.HighWatermark("t", 0)
	assert.ErrorIs(t, err, ErrUnknownTopic)
}

// TestCreateTopicsEchoesConfigs: CreateTopics v5+ answers with every
// config of the new topic, its source telling set from default; v4 with
// none.
func TestCreateTopicsEchoesConfigs(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "cfg")
	rt := createTopicWith(t, w, "t", 1, map[string]string{"max.message.bytes": "51200"})
	got := map[string]string{}
	sources := map[string]int8{}
	for _, tc := range rt.Configs {
		got[tc.Name] = *tc.Value
		sources[tc.Name] = tc.Source
	}
	assert.Equal(t, "51200", got["max.message.bytes"])
	assert.EqualValues(t, kmsg.ConfigSourceDynamicTopicConfig, sources["max.message.bytes"])
	assert.Equal(t, "1", got["min.insync.replicas"])
	assert.Equal(t, "CreateTime", got["message.timestamp.type"])
	assert.Equal(t, "-1", got["retention.bytes"])
	assert.EqualValues(t, kmsg.ConfigSourceDefaultConfig, sources["retention.bytes"])
	assert.EqualValues(t, 1, rt.NumPartitions)
	assert.EqualValues(t, 1, rt.ReplicationFactor)

	old := createTopicsRequest(4, "old", 1, 1)
	resp := w.request(old).(*kmsg.CreateTopicsResponse)
	require.Zero(t, resp.Topics[0].ErrorCode)
	assert.Empty(t, resp.Topics[0].Configs)
}

func describeTopic(t *testing.T, w *wireClient, topic string, names ...string) (map[string]string, kmsg.DescribeConfigsResponseResource) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.IncludeSynonyms = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, names
	req.Resources = append(req.Resources, r)
	resp := w.request(req).(*kmsg.DescribeConfigsResponse)
	require.Len(t, resp.Resources, 1)
	got := map[string]string{}
	for _, rc := range resp.Resources[0].Configs {
		got[rc.Name] = *rc.Value
	}
	return got, resp.Resources[0]
}

func alterTopic(t *testing.T, w *wireClient, topic string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeTopic, topic, ops
	req.Resources = append(req.Resources, r)
	resp := w.request(req).(*kmsg.IncrementalAlterConfigsResponse)
	require.Len(t, resp.Resources, 1)
	return resp.Resources[0]
}

func op(name string, o kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: name, Op: o, Value: value}
}

// TestDescribeAndAlterTopicConfigs: DescribeConfigs shows a topic's configs
// with their source and synonyms; IncrementalAlterConfigs changes them,
// all or nothing per resource, and Produce follows at once.
func TestDescribeAndAlterTopicConfigs(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1})
	w := dialBroker(t, c.Addrs()[0], "cfg")
	require.Zero(t, createTopicWith(t, w, "t", 1, nil).ErrorCode)
	big := testBatch{n: 60, valueSize: 1000}.build(t)
	require.Zero(t, produceOne(t, w, "t", 1, big).ErrorCode)

	got, res := describeTopic(t, w, "t")
	require.Zero(t, res.ErrorCode)
	assert.Equal(t, "1048588", got["max.message.bytes"])
	assert.Equal(t, "delete", got["cleanup.policy"])
	for _, rc := range res.Configs {
		assert.Equal(t, kmsg.ConfigSourceDefaultConfig, rc.Source, rc.Name)
		require.NotEmpty(t, rc.ConfigSynonyms, rc.Name)
	}

	s := kmsg.StringPtr
	r := alterTopic(t, w, "t", false, op("max.message.bytes", kmsg.IncrementalAlterConfigOpSet, s("51200")),
		op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, s("compact")))
	require.Zero(t, r.ErrorCode, "%v", r.ErrorMessage)
	assert.Equal(t, codeMessageTooLarge, produceOne(t, w, "t", 1, big).ErrorCode, "the new limit applies at once")
	got, res = describeTopic(t, w, "t", "max.message.bytes", "cleanup.policy", "no.such")
	assert.Equal(t, map[string]string{"max.message.bytes": "51200", "cleanup.policy": "delete,compact"}, got)
	for _, rc := range res.Configs {
		assert.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, rc.Source, rc.Name)
	}

	// A failing change leaves the resource as it was.
	for i, bad := range []struct {
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
	}{
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("max.message.bytes", kmsg.IncrementalAlterConfigOpDelete, nil), op("no.such", kmsg.IncrementalAlterConfigOpSet, s("1"))}, ecInvalidConfig},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("max.message.bytes", kmsg.IncrementalAlterConfigOpAppend, s("1"))}, ecInvalidConfig},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("min.insync.replicas", kmsg.IncrementalAlterConfigOpSet, s("-3"))}, ecInvalidConfig},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.bytes", kmsg.IncrementalAlterConfigOpSet, nil)}, ecInvalidRequest},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.bytes", kmsg.IncrementalAlterConfigOpSet, s("1")), op("retention.bytes", kmsg.IncrementalAlterConfigOpDelete, nil)}, ecInvalidRequest},
	} {
		assert.Equal(t, bad.code, alterTopic(t, w, "t", false, bad.ops...).ErrorCode, "case %d", i)
	}
	assert.Equal(t, ecUnknownTopicOrPartition, alterTopic(t, w, "nope", false).ErrorCode)
	got, _ = describeTopic(t, w, "t", "max.message.bytes")
	assert.Equal(t, "51200", got["max.message.bytes"], "unchanged by the failures")

	// ValidateOnly changes nothing; DELETE goes back to the default.
	require.Zero(t, alterTopic(t, w, "t", true, op("max.message.bytes", kmsg.IncrementalAlterConfigOpDelete, nil)).ErrorCode)
	assert.Equal(t, codeMessageTooLarge, produceOne(t, w, "t", 1, big).ErrorCode)
	require.Zero(t, alterTopic(t, w, "t", false, op("max.message.bytes", kmsg.IncrementalAlterConfigOpDelete, nil),
		op("cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, s("delete"))).ErrorCode)
	assert.Zero(t, produceOne(t, w, "t", 1, big).ErrorCode)
	got, _ = describeTopic(t, w, "t", "max.message.bytes", "cleanup.policy")
	assert.Equal(t, map[string]string{"max.message.bytes": "1048588", "cleanup.policy": "compact"}, got)

	_, res = describeTopic(t, w, "nope")
	assert.Equal(t, ecUnknownTopicOrPartition, res.ErrorCode)

	// Broker configs are described, read-only.
	req := kmsg.NewPtrDescribeConfigsRequest()
	br := kmsg.NewDescribeConfigsRequestResource()
	br.ResourceType, br.ResourceName, br.ConfigNames = kmsg.ConfigResourceTypeBroker, "0", []string{"message.max.bytes"}
	req.Resources = append(req.Resources, br)
	dr := w.request(req).(*kmsg.DescribeConfigsResponse)
	require.Len(t, dr.Resources[0].Configs, 1)
	assert.Equal(t, "1048588", *dr.Resources[0].Configs[0].Value)
	assert.True(t, dr.Resources[0].Configs[0].ReadOnly)
}
