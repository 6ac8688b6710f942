package testbroker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys the broker serves.
const (
	produceKey          int16 = 0
	fetchKey            int16 = 1
	listOffsetsKey      int16 = 2
	metadataKey         int16 = 3
	apiVersionsKey      int16 = 18
	createTopicsKey     int16 = 19
	deleteTopicsKey     int16 = 20
	initProducerIDKey   int16 = 22
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
	ecNotEnoughReplicas       int16 = 19
	ecInvalidRequiredAcks     int16 = 21
	ecUnsupportedVersion      int16 = 35
	ecTopicAlreadyExists      int16 = 36
	ecInvalidPartitions       int16 = 37
	ecInvalidReplicationFact  int16 = 38
	ecInvalidConfig           int16 = 40
	ecInvalidRequest          int16 = 42
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
}

func newRequest(key int16) func(*conn) kmsg.Request {
	return func(*conn) kmsg.Request { return kmsg.RequestForKey(key) }
}

// apis is indexed by key; the max versions are what kmsg knows.
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
	initProducerIDKey:   {min: 0, max: new(kmsg.InitProducerIDRequest).MaxVersion(), request: newRequest(initProducerIDKey), handle: handleInitProducerID},
	createPartitionsKey: {min: 0, max: new(kmsg.CreatePartitionsRequest).MaxVersion(), request: newRequest(createPartitionsKey), handle: handleCreatePartitions},
	describeConfigsKey:  {min: 0, max: new(kmsg.DescribeConfigsRequest).MaxVersion(), request: newRequest(describeConfigsKey), handle: handleDescribeConfigs},
	incrAlterConfigsKey: {min: 0, max: new(kmsg.IncrementalAlterConfigsRequest).MaxVersion(), request: newRequest(incrAlterConfigsKey), handle: handleIncrementalAlterConfigs},
	describeQuotasKey:   {min: 0, max: new(kmsg.DescribeClientQuotasRequest).MaxVersion(), request: newRequest(describeQuotasKey), handle: handleDescribeClientQuotas},
	alterQuotasKey:      {min: 0, max: new(kmsg.AlterClientQuotasRequest).MaxVersion(), request: newRequest(alterQuotasKey), handle: handleAlterClientQuotas},
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

// apiVersionsKeys lists the served APIs in key order.
func apiVersionsKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k, a := range apiTable {
		if a == nil {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), a.min, a.max
		keys = append(keys, ak)
	}
	return keys
}

func handleAPIVersions(_ *conn, _ *reqHeader, req kmsg.Request) result {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionsKeys()
	return result{resp: resp}
}

// unsupportedAPIVersions is the v0 answer to an ApiVersions request of a
// version the broker does not know.
func unsupportedAPIVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = ecUnsupportedVersion
	resp.ApiKeys = apiVersionsKeys()
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
	}
}
