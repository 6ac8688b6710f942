package testbroker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs: set by CreateTopics, read by DescribeConfigs, changed by
// IncrementalAlterConfigs. Four change what Produce and Fetch do:
//
//   - max.message.bytes: the largest batch a partition accepts
//     (MESSAGE_TOO_LARGE above it); default Config.MaxMessageBytes, the
//     broker's message.max.bytes;
//   - min.insync.replicas: an acks=all Produce gets NOT_ENOUGH_REPLICAS
//     when fewer replicas are in sync (the topic's replication factor,
//     capped by the running brokers: the log is shared, so every running
//     replica is in sync); default 1;
//   - message.timestamp.type: LogAppendTime stamps batches with the append
//     time (Produce answers it, Fetch returns it); default CreateTime;
//   - retention.bytes: the oldest batches are dropped once a partition
//     stores more, batch by batch and never the newest one (Kafka keeps its
//     active segment); Fetch below the new log start gets
//     OFFSET_OUT_OF_RANGE; default -1, unbounded.
//
// cleanup.policy, retention.ms and segment.bytes are validated, stored
// and described, but change nothing: the in-memory log neither compacts
// nor ages out. Any other name is refused with INVALID_CONFIG, as Kafka
// refuses an unknown topic config.
type topicConfigDef struct {
	name string
	typ  kmsg.ConfigType
	// synonym is the broker config the default comes from.
	synonym string
	def     func(c *Cluster) string
	check   func(v string) error
}

const (
	cfgMaxMessageBytes   = "max.message.bytes"
	cfgMinInsyncReplicas = "min.insync.replicas"
	cfgTimestampType     = "message.timestamp.type"
	cfgRetentionBytes    = "retention.bytes"
	cfgCleanupPolicy     = "cleanup.policy"
)

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func constant(v string) func(*Cluster) string { return func(*Cluster) string { return v } }

func checkInt(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is not in [%d, %d]", n, lo, hi)
		}
		return nil
	}
}

func checkOneOf(allowed ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("%q is not one of %v", v, allowed)
		}
		return nil
	}
}

func checkList(allowed ...string) func(string) error {
	return func(v string) error {
		for _, e := range splitList(v) {
			if !slices.Contains(allowed, e) {
				return fmt.Errorf("%q is not one of %v", e, allowed)
			}
		}
		return nil
	}
}

func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// topicConfigDefs is sorted by name, the order DescribeConfigs lists them.
var topicConfigDefs = []topicConfigDef{
	{cfgCleanupPolicy, kmsg.ConfigTypeList, "log.cleanup.policy", constant("delete"), checkList("delete", "compact")},
	{cfgMaxMessageBytes, kmsg.ConfigTypeInt, "message.max.bytes",
		func(c *Cluster) string { return strconv.Itoa(int(c.cfg.MaxMessageBytes)) }, checkInt(0, 1<<31-1)},
	{cfgTimestampType, kmsg.ConfigTypeString, "log.message.timestamp.type", constant("CreateTime"), checkOneOf("CreateTime", "LogAppendTime")},
	{cfgMinInsyncReplicas, kmsg.ConfigTypeInt, "min.insync.replicas", constant("1"), checkInt(1, 1<<31-1)},
	{cfgRetentionBytes, kmsg.ConfigTypeLong, "log.retention.bytes", constant("-1"), checkInt(-1<<63, 1<<63-1)},
	{"retention.ms", kmsg.ConfigTypeLong, "log.retention.ms", constant("604800000"), checkInt(-1, 1<<63-1)},
	{"segment.bytes", kmsg.ConfigTypeInt, "log.segment.bytes", constant("1073741824"), checkInt(14, 1<<31-1)},
}

func topicConfigDefFor(name string) *topicConfigDef {
	for i := range topicConfigDefs {
		if topicConfigDefs[i].name == name {
			return &topicConfigDefs[i]
		}
	}
	return nil
}

// checkTopicConfig validates one name and value.
func checkTopicConfig(name string, value *string) error {
	d := topicConfigDefFor(name)
	if d == nil {
		return fmt.Errorf("unknown topic config name: %s", name)
	}
	if value == nil {
		return fmt.Errorf("null value not supported for topic config %s", name)
	}
	if err := d.check(*value); err != nil {
		return fmt.Errorf("invalid value for topic config %s: %v", name, err)
	}
	return nil
}

// parseTopicConfigs validates the configs of a CreateTopics topic; nil
// when there are none.
func parseTopicConfigs(cfgs []kmsg.CreateTopicsRequestTopicConfig) (map[string]string, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(cfgs))
	for _, cfg := range cfgs {
		if err := checkTopicConfig(cfg.Name, cfg.Value); err != nil {
			return nil, err
		}
		if _, dup := out[cfg.Name]; dup {
			return nil, fmt.Errorf("topic config %s given twice", cfg.Name)
		}
		out[cfg.Name] = *cfg.Value
	}
	return out, nil
}

// topicSettings is what the Produce path reads of a topic's configs.
type topicSettings struct {
	log       logSettings
	minInsync int32
}

// topicState is the config part of a topic.
type topicState struct {
	// configs are the topic configs set explicitly (dynamic topic
	// configs), guarded by Cluster.mu.
	configs map[string]string
	// settings is derived from configs for the hot path.
	settings atomic.Pointer[topicSettings]
	rf       int16
}

// configValueLocked returns the topic's value of a config and whether it was set.
func (c *Cluster) configValueLocked(t *topic, d *topicConfigDef) (string, bool) {
	if v, ok := t.state.configs[d.name]; ok {
		return v, true
	}
	return d.def(c), false
}

// applyConfigsLocked recomputes t's settings from its configs and pushes
// them to every partition log. The caller holds c.mu (write).
func (c *Cluster) applyConfigsLocked(t *topic) {
	num := func(name string) int64 {
		v, _ := c.configValueLocked(t, topicConfigDefFor(name))
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64) // validated on the way in
		return n
	}
	ts, _ := c.configValueLocked(t, topicConfigDefFor(cfgTimestampType))
	s := &topicSettings{
		log: logSettings{
			maxMessageBytes: int32(num(cfgMaxMessageBytes)),
			logAppendTime:   ts == "LogAppendTime",
			retentionBytes:  num(cfgRetentionBytes),
		},
		minInsync: int32(num(cfgMinInsyncReplicas)),
	}
	t.state.settings.Store(s)
	for _, p := range t.partitions {
		p.log.setSettings(s.log)
	}
}

// inSyncReplicas is how many replicas of t are in sync: its replication
// factor, capped by the running brokers.
func (c *Cluster) inSyncReplicas(t *topic) int32 {
	running := int32(0)
	for _, b := range c.brokers {
		if b.running() {
			running++
		}
	}
	return min(running, int32(t.state.rf))
}

// describeTopicConfigsLocked lists t's configs (all, or those named; an
// unknown name is left out, as Kafka does), with synonyms if asked.
func (c *Cluster) describeTopicConfigsLocked(t *topic, names []string, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		if names != nil && !slices.Contains(names, d.name) {
			continue
		}
		v, set := c.configValueLocked(t, d)
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ConfigType = d.name, kmsg.StringPtr(v), d.typ
		rc.Source, rc.IsDefault = kmsg.ConfigSourceDefaultConfig, !set
		if set {
			rc.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		if synonyms {
			if set {
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
					Name: d.name, Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceDynamicTopicConfig})
			}
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
				Name: d.synonym, Value: kmsg.StringPtr(d.def(c)), Source: kmsg.ConfigSourceDefaultConfig})
		}
		out = append(out, rc)
	}
	return out
}

// createTopicConfigsLocked is the Configs field of a CreateTopics v5+
// answer: every config of the new topic, as Kafka returns them.
func (c *Cluster) createTopicConfigsLocked(t *topic) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, rc := range c.describeTopicConfigsLocked(t, nil, false) {
		tc := kmsg.NewCreateTopicsResponseTopicConfig()
		tc.Name, tc.Value, tc.Source = rc.Name, rc.Value, int8(rc.Source)
		out = append(out, tc)
	}
	return out
}

// brokerConfigs are what DescribeConfigs tells of a broker: the settings
// of the cluster that clients may want to see, read-only.
func (c *Cluster) brokerConfigs() []kmsg.DescribeConfigsResponseResourceConfig {
	queued := c.cfg.QueuedMaxBytes
	if queued <= 0 {
		queued = -1
	}
	kv := [][2]string{
		{"auto.create.topics.enable", strconv.FormatBool(c.cfg.AllowAutoTopicCreation)},
		{"controller.quota.window.num", strconv.Itoa(c.cfg.MutationSamples)},
		{"controller.quota.window.size.seconds", strconv.FormatFloat(c.cfg.MutationWindow.Seconds(), 'f', -1, 64)},
		{"message.max.bytes", strconv.Itoa(int(c.cfg.MaxMessageBytes))},
		{"min.insync.replicas", "1"},
		{"num.partitions", strconv.Itoa(int(c.cfg.DefaultPartitions))},
		{"queued.max.bytes", strconv.FormatInt(queued, 10)},
		{"socket.request.max.bytes", strconv.Itoa(int(c.cfg.SocketRequestMaxBytes))},
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(kv))
	for _, e := range kv {
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ReadOnly = e[0], kmsg.StringPtr(e[1]), true
		rc.Source = kmsg.ConfigSourceStaticBrokerConfig
		out = append(out, rc)
	}
	return out
}

// handleDescribeConfigs describes topics (UNKNOWN_TOPIC_OR_PARTITION for
// one that does not exist) and brokers (by id, or "" for the cluster
// default); other resource types get INVALID_REQUEST.
func handleDescribeConfigs(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := c.topics[r.ResourceName]
			if t == nil {
				rr.ErrorCode, rr.ErrorMessage = ecUnknownTopicOrPartition, msgPtr("unknown topic "+r.ResourceName)
				break
			}
			rr.Configs = c.describeTopicConfigsLocked(t, r.ConfigNames, req.IncludeSynonyms)
		case kmsg.ConfigResourceTypeBroker:
			if id, err := strconv.Atoi(r.ResourceName); r.ResourceName != "" && (err != nil || id < 0 || id >= len(c.brokers)) {
				rr.ErrorCode, rr.ErrorMessage = ecInvalidRequest, msgPtr("unknown broker "+r.ResourceName)
				break
			}
			for _, rc := range c.brokerConfigs() {
				if r.ConfigNames == nil || slices.Contains(r.ConfigNames, rc.Name) {
					rr.Configs = append(rr.Configs, rc)
				}
			}
		default:
			rr.ErrorCode, rr.ErrorMessage = ecInvalidRequest, msgPtr("the test broker describes topic and broker configs only")
		}
		if req.Version == 0 {
			for i := range rr.Configs {
				rr.Configs[i].ConfigSynonyms = nil
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return result{resp: resp}
}

// handleIncrementalAlterConfigs changes topic configs: SET, DELETE (back
// to the default), APPEND and SUBTRACT (list configs only). A resource's
// changes are all validated before any applies: INVALID_CONFIG for an
// unknown name or a bad value, INVALID_REQUEST for a name altered twice or
// a null SET, UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, and
// INVALID_REQUEST for any other resource type (broker configs are
// read-only here). ValidateOnly changes nothing.
func handleIncrementalAlterConfigs(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	c := cn.c
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		code, msg := c.alterTopicConfigsLocked(r, req.ValidateOnly)
		if code != 0 {
			rr.ErrorCode, rr.ErrorMessage = code, msgPtr(msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return result{resp: resp}
}

func (c *Cluster) alterTopicConfigsLocked(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	if r.ResourceType != kmsg.ConfigResourceTypeTopic {
		return ecInvalidRequest, "the test broker alters topic configs only"
	}
	t := c.topics[r.ResourceName]
	if t == nil {
		return ecUnknownTopicOrPartition, "unknown topic " + r.ResourceName
	}
	next := maps.Clone(t.state.configs)
	if next == nil {
		next = make(map[string]string)
	}
	seen := map[string]bool{}
	for _, op := range r.Configs {
		if seen[op.Name] {
			return ecInvalidRequest, "config " + op.Name + " altered twice"
		}
		seen[op.Name] = true
		d := topicConfigDefFor(op.Name)
		if d == nil {
			return ecInvalidConfig, "unknown topic config name: " + op.Name
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return ecInvalidRequest, "null value not supported for SET of " + op.Name
			}
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.typ != kmsg.ConfigTypeList {
				return ecInvalidConfig, op.Name + " is not a list: APPEND and SUBTRACT do not apply"
			}
			cur, _ := c.configValueLocked(t, d)
			if v, ok := next[op.Name]; ok {
				cur = v
			}
			list := splitList(cur)
			for _, e := range splitList(derefOr(op.Value, "")) {
				has := slices.Contains(list, e)
				switch {
				case op.Op == kmsg.IncrementalAlterConfigOpAppend && !has:
					list = append(list, e)
				case op.Op == kmsg.IncrementalAlterConfigOpSubtract && has:
					list = slices.DeleteFunc(list, func(x string) bool { return x == e })
				}
			}
			next[op.Name] = strings.Join(list, ",")
		default:
			return ecInvalidRequest, fmt.Sprintf("unknown operation %d for %s", op.Op, op.Name)
		}
		if v, ok := next[op.Name]; ok {
			if err := checkTopicConfig(op.Name, &v); err != nil {
				return ecInvalidConfig, err.Error()
			}
		}
	}
	if !validateOnly {
		t.state.configs = next
		c.applyConfigsLocked(t)
	}
	return 0, ""
}
