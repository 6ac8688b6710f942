package conn

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzRequests are the requests whose responses the producer reads, by the
// selector of fuzzResponse. ApiVersions is fuzzed in the handshake.
var fuzzRequests = []func() kmsg.Request{
	func() kmsg.Request { return metadataReq("t") }, // 0: ApiVersions, fuzzed in Dial; then Metadata
	func() kmsg.Request { return metadataReq("t") },
	func() kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks = -1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: 0, Records: []byte{}})
		r.Topics = append(r.Topics, rt)
		return r
	},
	func() kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
	func() kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = "t"
		r.Topics = append(r.Topics, rt)
		return r
	},
}

// fuzzAPIKeys lets every fuzzed request through the handshake.
func fuzzAPIKeys() []kmsg.ApiVersionsResponseApiKey {
	return append(defaultAPIKeys(), kmsg.ApiVersionsResponseApiKey{ApiKey: 19, MinVersion: 0, MaxVersion: 7})
}

// The fuzz targets feed arbitrary bytes to a connection as the answer to
// each request the producer sends (ApiVersions, Metadata, Produce,
// InitProducerId, CreateTopics): in a well-framed response with the right
// correlation id (raw=false), which exercises the decoders, or as the raw
// byte stream (raw=true), which exercises the framing. Whatever arrives, the
// connection must not panic, must complete the request exactly once, and
// must close.
func FuzzApiVersionsResponse(f *testing.F)    { fuzzResponse(f, 0) }
func FuzzMetadataResponse(f *testing.F)       { fuzzResponse(f, 1) }
func FuzzProduceResponse(f *testing.F)        { fuzzResponse(f, 2) }
func FuzzInitProducerIDResponse(f *testing.F) { fuzzResponse(f, 3) }
func FuzzCreateTopicsResponse(f *testing.F)   { fuzzResponse(f, 4) }

func fuzzResponse(f *testing.F, sel int) {
	f.Add(false, seedResponse(sel))
	f.Add(true, sizePrefix(int32(len(seedResponse(sel))+4), 1))
	f.Add(false, []byte{})
	f.Add(true, sizePrefix(maxResponseSize, 1))
	if sel == 0 {
		f.Add(false, []byte{0x00, 0x23, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00}) // librdkafka's short answer
	}
	f.Fuzz(func(t *testing.T, raw bool, data []byte) {
		client, server := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			defer server.Close()
			br := bufio.NewReader(server)
			fb := &fakeBroker{apiKeys: fuzzAPIKeys(), maxAPIVersions: -1}
			for {
				frame, err := readFrame(br)
				if err != nil {
					return
				}
				h, _, err := decodeRequest(frame)
				if err != nil {
					return
				}
				var out []byte
				switch {
				case h.key == apiVersionsKey && sel != 0 || h.version == 0 && h.key == apiVersionsKey:
					out = encodeResponse(h, fb.apiVersions(h))
				case raw:
					out = data
				default:
					out = binary.BigEndian.AppendUint32(nil, uint32(len(data)+4))
					out = binary.BigEndian.AppendUint32(out, uint32(h.corr))
					out = append(out, data...)
				}
				_ = server.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := server.Write(out); err != nil {
					return
				}
			}
		}()
		cfg := Config{
			DialTimeout: 200 * time.Millisecond, RequestTimeout: 50 * time.Millisecond,
			Dialer: func(context.Context, string, string) (net.Conn, error) { return client, nil },
		}
		c, err := Dial(context.Background(), "fuzz:9092", cfg)
		if err != nil {
			_ = client.Close()
			<-served
			return // a handshake that failed, cleanly
		}
		calls := make(chan error, 2)
		c.Send(fuzzRequests[sel](), func(_ kmsg.Response, err error) { calls <- err })
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatal("the request was not completed")
		}
		_ = c.Close()
		<-served
		if len(calls) != 0 {
			t.Fatal("the request was completed twice")
		}
	})
}

// seedResponse is a valid response body (after the correlation id) for
// the request of selector sel, at the version the fuzzed connection uses.
func seedResponse(sel int) []byte {
	keys := fuzzAPIKeys()
	version := func(key int16) int16 {
		for _, k := range keys {
			if k.ApiKey == key {
				return min(k.MaxVersion, kmsg.RequestForKey(key).MaxVersion())
			}
		}
		return 0
	}
	var resp kmsg.Response
	switch sel {
	case 0:
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = maxApiVersionsVersion
		r.ApiKeys = keys
		resp = r
	case 1:
		r := kmsg.NewPtrMetadataResponse()
		r.Version = version(3)
		b := kmsg.NewMetadataResponseBroker()
		b.Host, b.Port = "localhost", 9092
		r.Brokers = append(r.Brokers, b)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("t")
		rt.Partitions = append(rt.Partitions, kmsg.NewMetadataResponseTopicPartition())
		r.Topics = append(r.Topics, rt)
		resp = r
	case 2:
		r := kmsg.NewPtrProduceResponse()
		r.Version = min(version(0), 12)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "t"
		rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
		r.Topics = append(r.Topics, rt)
		resp = r
	case 3:
		r := kmsg.NewPtrInitProducerIDResponse()
		r.Version = version(22)
		resp = r
	default:
		r := kmsg.NewPtrCreateTopicsResponse()
		r.Version = version(19)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = "t"
		r.Topics = append(r.Topics, rt)
		resp = r
	}
	var out []byte
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		out = append(out, 0) // header tags
	}
	return resp.AppendTo(out)
}
