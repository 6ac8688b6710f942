package testbroker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys the broker serves.
const (
	produceKey          int16 = 0
	fetchKey            int16 = 1
	listOffsetsKey      int16 = 2
	metadataKey         int16 = 3
	offsetCommitKey     int16 = 8
	offsetFetchKey      int16 = 9
	findCoordinatorKey  int16 = 10
	joinGroupKey        int16 = 11
	heartbeatKey        int16 = 12
	leaveGroupKey       int16 = 13
	syncGroupKey        int16 = 14
	apiVersionsKey      int16 = 18
	createTopicsKey     int16 = 19
	deleteTopicsKey     int16 = 20
	initProducerIDKey   int16 = 22
	addPartitionsTxnKey int16 = 24
	addOffsetsTxnKey    int16 = 25
	endTxnKey           int16 = 26
	txnOffsetCommitKey  int16 = 28
	describeConfigsKey  int16 = 32
	createPartitionsKey int16 = 37
	incrAlterConfigsKey int16 = 44
	describeQuotasKey   int16 = 48
	alterQuotasKey      int16 = 49

	// maxAPIKey bounds the per-key request counters.
	maxAPIKey = 100
)

// Kafka error codes the handlers return (the log's codes are in
// idempotence.go).
const (
	ecUnknownTopicOrPartition int16 = 3
	ecLeaderNotAvailable      int16 = 5
	ecNotLeaderOrFollower     int16 = 6
	ecInvalidTopic            int16 = 17
	ecInvalidGroupID          int16 = 24
	ecNotEnoughReplicas       int16 = 19
	ecInvalidRequiredAcks     int16 = 21
	ecUnsupportedVersion      int16 = 35
	ecTopicAlreadyExists      int16 = 36
	ecInvalidPartitions       int16 = 37
	ecInvalidReplicationFact  int16 = 38
	ecInvalidConfig           int16 = 40
	ecInvalidRequest          int16 = 42
	ecRebootstrapRequired     int16 = 129
	ecInvalidProducerEpoch    int16 = 47
	ecFetchSessionIDNotFound  int16 = 70
	ecFencedLeaderEpoch       int16 = 74
	ecUnknownLeaderEpoch      int16 = 75
	ecThrottlingQuotaExceeded int16 = 89
	ecUnknownTopicID          int16 = 100
)

// api is one served API: its version range and handler.
type api struct {
	min, max int16
	// request returns the request to decode into (Produce reuses the
	// connection's, to keep the hot path free of allocations).
	request func(cn *conn) kmsg.Request
	handle  func(cn *conn, h *reqHeader, req kmsg.Request) result
	// enabled, when set, says whether the cluster serves the API: one it
	// does not serve is left out of ApiVersions (KIP-714's, without
	// Config.Telemetry).
	enabled func(c *Cluster) bool
}

func newRequest(key int16) func(*conn) kmsg.Request {
	return func(*conn) kmsg.Request { return kmsg.RequestForKey(key) }
}

// Versions of the transaction APIs, the same at every transaction version
// as in Kafka 4.4 (see txn.go): EndTxn v5 and TxnOffsetCommit v5 are
// KIP-890 part 2's; TxnOffsetCommit v6 and OffsetFetch v10 name topics by
// id.
const (
	maxInitProducerIDVersion  = 5
	maxAddPartitionsVersion   = 5
	maxAddOffsetsVersion      = 4
	maxEndTxnVersion          = 5
	maxTxnOffsetCommitVersion = 5
	maxOffsetFetchVersion     = 9
	// OffsetCommit v9 is KIP-848's (member epochs), v10 names topics by
	// id.
	maxOffsetCommitVersion = 8
)

// apis is indexed by key; the max versions are what kmsg knows, except for
// the transaction APIs above.
var apis = map[int16]*api{
	produceKey: {min: 3, max: new(kmsg.ProduceRequest).MaxVersion(),
		request: func(cn *conn) kmsg.Request { return &cn.produceReq },
		handle:  handleProduce},
	fetchKey:            {min: 4, max: new(kmsg.FetchRequest).MaxVersion(), request: newRequest(fetchKey), handle: handleFetch},
	listOffsetsKey:      {min: 1, max: new(kmsg.ListOffsetsRequest).MaxVersion(), request: newRequest(listOffsetsKey), handle: handleListOffsets},
	metadataKey:         {min: 0, max: new(kmsg.MetadataRequest).MaxVersion(), request: newRequest(metadataKey), handle: handleMetadata},
	apiVersionsKey:      {min: 0, max: new(kmsg.ApiVersionsRequest).MaxVersion(), request: newRequest(apiVersionsKey), handle: handleAPIVersions},
	createTopicsKey:     {min: 0, max: new(kmsg.CreateTopicsRequest).MaxVersion(), request: newRequest(createTopicsKey), handle: handleCreateTopics},
	deleteTopicsKey:     {min: 0, max: new(kmsg.DeleteTopicsRequest).MaxVersion(), request: newRequest(deleteTopicsKey), handle: handleDeleteTopics},
	initProducerIDKey:   {min: 0, max: maxInitProducerIDVersion, request: newRequest(initProducerIDKey), handle: handleInitProducerID},
	findCoordinatorKey:  {min: 0, max: new(kmsg.FindCoordinatorRequest).MaxVersion(), request: newRequest(findCoordinatorKey), handle: handleFindCoordinator},
	addPartitionsTxnKey: {min: 0, max: maxAddPartitionsVersion, request: newRequest(addPartitionsTxnKey), handle: handleAddPartitionsToTxn},
	addOffsetsTxnKey:    {min: 0, max: maxAddOffsetsVersion, request: newRequest(addOffsetsTxnKey), handle: handleAddOffsetsToTxn},
	endTxnKey:           {min: 0, max: maxEndTxnVersion, request: newRequest(endTxnKey), handle: handleEndTxn},
	txnOffsetCommitKey:  {min: 0, max: maxTxnOffsetCommitVersion, request: newRequest(txnOffsetCommitKey), handle: handleTxnOffsetCommit},
	offsetFetchKey:      {min: 1, max: maxOffsetFetchVersion, request: newRequest(offsetFetchKey), handle: handleOffsetFetch},
	offsetCommitKey:     {min: 0, max: maxOffsetCommitVersion, request: newRequest(offsetCommitKey), handle: handleOffsetCommit},
	joinGroupKey:        {min: 0, max: new(kmsg.JoinGroupRequest).MaxVersion(), request: newRequest(joinGroupKey), handle: handleJoinGroup},
	syncGroupKey:        {min: 0, max: new(kmsg.SyncGroupRequest).MaxVersion(), request: newRequest(syncGroupKey), handle: handleSyncGroup},
	heartbeatKey:        {min: 0, max: new(kmsg.HeartbeatRequest).MaxVersion(), request: newRequest(heartbeatKey), handle: handleHeartbeat},
	leaveGroupKey:       {min: 0, max: new(kmsg.LeaveGroupRequest).MaxVersion(), request: newRequest(leaveGroupKey), handle: handleLeaveGroup},
	createPartitionsKey: {min: 0, max: new(kmsg.CreatePartitionsRequest).MaxVersion(), request: newRequest(createPartitionsKey), handle: handleCreatePartitions},
	describeConfigsKey:  {min: 0, max: new(kmsg.DescribeConfigsRequest).MaxVersion(), request: newRequest(describeConfigsKey), handle: handleDescribeConfigs},
	incrAlterConfigsKey: {min: 0, max: new(kmsg.IncrementalAlterConfigsRequest).MaxVersion(), request: newRequest(incrAlterConfigsKey), handle: handleIncrementalAlterConfigs},
	describeQuotasKey:   {min: 0, max: new(kmsg.DescribeClientQuotasRequest).MaxVersion(), request: newRequest(describeQuotasKey), handle: handleDescribeClientQuotas},
	alterQuotasKey:      {min: 0, max: new(kmsg.AlterClientQuotasRequest).MaxVersion(), request: newRequest(alterQuotasKey), handle: handleAlterClientQuotas},
	getTelemetrySubscriptionsKey: {min: 0, max: new(kmsg.GetTelemetrySubscriptionsRequest).MaxVersion(),
		request: newRequest(getTelemetrySubscriptionsKey), handle: handleGetTelemetrySubscriptions, enabled: telemetryEnabled},
	pushTelemetryKey: {min: 0, max: new(kmsg.PushTelemetryRequest).MaxVersion(),
		request: newRequest(pushTelemetryKey), handle: handlePushTelemetry, enabled: telemetryEnabled},
}

var apiTable [maxAPIKey + 1]*api

func init() {
	for k, a := range apis {
		apiTable[k] = a
	}
}

func lookupAPI(key int16) *api {
	if key < 0 || key > maxAPIKey {
		return nil
	}
	return apiTable[key]
}

// apiVersionsKeys lists the APIs c serves, in key order.
func apiVersionsKeys(c *Cluster) []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k, a := range apiTable {
		if a == nil || (a.enabled != nil && !a.enabled(c)) {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), a.min, a.max
		keys = append(keys, ak)
	}
	return keys
}

// transactionVersionFeature is the name of KIP-890's feature.
const transactionVersionFeature = "transaction.version"

func handleAPIVersions(cn *conn, _ *reqHeader, req kmsg.Request) result {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionsKeys(cn.c)
	// KIP-1242 (v5): a client that names the cluster and node it dialed
	// learns, with REBOOTSTRAP_REQUIRED, that this broker is not that
	// node of that cluster; one of the two alone is INVALID_REQUEST.
	if r := req.(*kmsg.ApiVersionsRequest); r.Version >= 5 && (r.ClusterID != nil || r.NodeID >= 0) {
		switch {
		case r.ClusterID == nil || r.NodeID < 0:
			resp.ErrorCode = ecInvalidRequest
		case *r.ClusterID != cn.c.cfg.ClusterID || r.NodeID != cn.b.id:
			resp.ErrorCode = ecRebootstrapRequired
		}
	}
	if resp.Version >= 3 {
		c := cn.c
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		resp.FinalizedFeaturesEpoch = c.featuresEpoch.Load()
		if v := int16(c.txnVersion.Load()); v > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, v, v
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	return result{resp: resp}
}

// SetTransactionVersion changes the cluster's finalized transaction.version
// at run time (1, 2, or -1 for none), as FeatureCommand upgrade or
// downgrade does in Kafka: ApiVersions answers from now on report it with
// a higher FinalizedFeaturesEpoch. Connections are not told; a client
// learns it from its next ApiVersions. It returns an error wrapping
// ErrInvalidConfig for another level.
func (c *Cluster) SetTransactionVersion(v int16) error {
	if v != -1 && v != 1 && v != 2 {
		return fmt.Errorf("%w: transaction version %d is not 1, 2 or -1 (none)", ErrInvalidConfig, v)
	}
	if c.txnVersion.Swap(int32(v)) != int32(v) {
		c.featuresEpoch.Add(1)
	}
	return nil
}

// unsupportedAPIVersions is the v0 answer to an ApiVersions request of a
// version the broker does not know.
func unsupportedAPIVersions(c *Cluster) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = ecUnsupportedVersion
	resp.ApiKeys = apiVersionsKeys(c)
	return resp
}

// errorResponse answers req with code in every topic or partition it names,
// without running the handler (an interceptor before the handler).
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.BaseOffset = -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rp.HighWatermark = -1
				rp.RecordBatches = noRecords
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic = t.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, k := range r.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key = k
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		for _, tx := range r.Transactions {
			rx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rx.TransactionalID = tx.TransactionalID
			for _, t := range tx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				rx.Topics = append(rx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rx)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		for _, m := range r.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			resp.Members = append(resp.Members, rm)
		}
		setErrorCode(resp, code)
		return resp
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			for _, t := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		setErrorCode(resp, code)
		return resp
	default:
		resp := req.ResponseKind()
		setErrorCode(resp, code)
		return resp
	}
}

// setErrorCode overwrites every error code of resp with code (an
// interceptor after the handler). Successful partitions lose their offsets
// as a real failure would report them, but the handler's effects stay:
// that is how a test gets an ambiguous REQUEST_TIMED_OUT after an append.
func setErrorCode(resp kmsg.Response, code int16) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.ErrorCode = code
				p.BaseOffset = -1
				p.LogAppendTime = -1
			}
		}
	case *kmsg.FetchResponse:
		if r.Version >= 7 && len(r.Topics) == 0 {
			r.ErrorCode = code
		}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.ErrorCode = code
				p.RecordBatches = noRecords
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.ErrorCode = code
				p.Offset, p.Timestamp = -1, -1
			}
		}
	case *kmsg.MetadataResponse:
		if r.Version >= 13 && code == 129 {
			// Kafka sets the top-level code (v13+, KIP-1102) only for
			// REBOOTSTRAP_REQUIRED; other codes are per topic.
			r.ErrorCode = code
		}
		for i := range r.Topics {
			r.Topics[i].ErrorCode = code
			r.Topics[i].Partitions = nil
		}
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			r.Topics[i].ErrorCode = code
		}
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			r.Topics[i].ErrorCode = code
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			r.Topics[i].ErrorCode = code
		}
	case *kmsg.InitProducerIDResponse:
		r.ErrorCode = code
		r.ProducerID, r.ProducerEpoch = -1, -1
	case *kmsg.ApiVersionsResponse:
		r.ErrorCode = code
	case *kmsg.FindCoordinatorResponse:
		r.ErrorCode, r.NodeID, r.Host, r.Port = code, -1, "", -1
		for i := range r.Coordinators {
			rc := &r.Coordinators[i]
			rc.ErrorCode, rc.NodeID, rc.Host, rc.Port = code, -1, "", -1
		}
	case *kmsg.AddPartitionsToTxnResponse:
		if r.Version >= 4 {
			r.ErrorCode = code
		}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		for i := range r.Transactions {
			for j := range r.Transactions[i].Topics {
				for k := range r.Transactions[i].Topics[j].Partitions {
					r.Transactions[i].Topics[j].Partitions[k].ErrorCode = code
				}
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.GetTelemetrySubscriptionsResponse:
		*r = kmsg.GetTelemetrySubscriptionsResponse{Version: r.Version, ThrottleMillis: r.ThrottleMillis, ErrorCode: code}
	case *kmsg.PushTelemetryResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	case *kmsg.TxnOffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation, r.Members = code, -1, nil
	case *kmsg.SyncGroupResponse:
		r.ErrorCode, r.MemberAssignment = code, nil
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
		for i := range r.Members {
			r.Members[i].ErrorCode = code
		}
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.ErrorCode, p.Offset, p.Metadata = code, -1, nil
			}
		}
		for i := range r.Groups {
			g := &r.Groups[i]
			g.ErrorCode = code
			for j := range g.Topics {
				for k := range g.Topics[j].Partitions {
					p := &g.Topics[j].Partitions[k]
					p.ErrorCode, p.Offset, p.Metadata = code, -1, nil
				}
			}
		}
	}
}
