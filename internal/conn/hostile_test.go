package conn

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
)

// newRawBroker starts a fakeBroker that answers ApiVersions properly and
// hands every other request to answer, which writes whatever bytes it likes
// (or nothing) on the socket: the hostile half of a broker. answer returning
// false closes the connection.
func newRawBroker(t testing.TB, answer func(c net.Conn, h reqHeader, req kmsg.Request) bool) *fakeBroker {
	t.Helper()
	b := newFakeBroker(t, nil)
	b.raw = answer
	return b
}

// sizePrefix returns a frame's 4-byte size followed by the correlation id.
func sizePrefix(size int32, corr int32) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(size))
	return binary.BigEndian.AppendUint32(out, uint32(corr))
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHugeLengthPrefixDoesNotAllocateUpFront: a peer that announces a
// response of almost 100 MiB and then sends a trickle must not make the
// connection allocate the announced size: memory grows with the bytes that
// actually arrive.
func TestHugeLengthPrefixDoesNotAllocateUpFront(t *testing.T) {
	sent := make(chan struct{})
	b := newRawBroker(t, func(c net.Conn, h reqHeader, req kmsg.Request) bool {
		_, _ = c.Write(append(sizePrefix(maxResponseSize-1, h.corr), make([]byte, 1000)...))
		close(sent)
		return true // then silence: the rest never comes
	})
	c := dial(t, b.addr(), Config{RequestTimeout: time.Minute})
	before := liveHeap()
	done := make(chan error, 1)
	c.Send(metadataReq("x"), func(_ kmsg.Response, err error) { done <- err })
	<-sent
	time.Sleep(300 * time.Millisecond) // the reader has read what came
	grown := int64(liveHeap()) - int64(before)
	if grown > 4<<20 {
		t.Fatalf("live heap grew by %d MiB for a 1 KB trickle of an announced 100 MiB response", grown>>20)
	}
	_ = c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("request completed with %v, want ErrClosed", err)
	}
}

// TestResponseSizeBoundedByRequest: a response larger than its request can
// produce (a Produce answer is small) breaks the connection as soon as its
// size arrives, before any of its body is read.
func TestResponseSizeBoundedByRequest(t *testing.T) {
	cases := []struct {
		name string
		req  kmsg.Request
		size int32
	}{
		{"Produce", func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks = -1
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: 0, Records: []byte{}})
			r.Topics = append(r.Topics, rt)
			return r
		}(), 50 << 20},
		{"InitProducerId", kmsg.NewPtrInitProducerIDRequest(), 1 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newRawBroker(t, func(c net.Conn, h reqHeader, req kmsg.Request) bool {
				_, _ = c.Write(sizePrefix(tc.size, h.corr))
				return true
			})
			c := dial(t, b.addr(), Config{RequestTimeout: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Do(ctx, tc.req)
			if !errors.Is(err, kerr.NetworkException) || !strings.Contains(err.Error(), "larger than") {
				t.Fatalf("Do: %v, want the response refused for its size", err)
			}
			<-c.Done()
		})
	}
}

// TestApiVersionsFallsBackToV0OnShortUnsupportedAnswer: librdkafka's mock
// cluster answers ApiVersions v3 and v4, which it does not support, with
// UNSUPPORTED_VERSION in a short body that decodes neither as v0 nor as the
// version asked. Like librdkafka and the Java client, Dial then retries
// with v0, and the handshake succeeds.
func TestApiVersionsFallsBackToV0OnShortUnsupportedAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int16
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			sc, err := ln.Accept()
			if err != nil {
				return
			}
			fb := &fakeBroker{apiKeys: defaultAPIKeys(), maxAPIVersions: -1}
			for {
				frame, err := readFrame(sc)
				if err != nil {
					break
				}
				h, req, err := decodeRequest(frame)
				if err != nil {
					break
				}
				var out []byte
				if h.key == apiVersionsKey {
					mu.Lock()
					versions = append(versions, h.version)
					mu.Unlock()
				}
				if h.key == apiVersionsKey && h.version >= 3 {
					// What librdkafka's mock sends, byte for byte.
					out = binary.BigEndian.AppendUint32(nil, 17)
					out = binary.BigEndian.AppendUint32(out, uint32(h.corr))
					out = append(out, 0x00, 0x23, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00)
				} else if h.key == apiVersionsKey {
					out = encodeResponse(h, fb.apiVersions(h))
				} else {
					out = encodeResponse(h, metadataEcho(h, req))
				}
				if _, err := sc.Write(out); err != nil {
					break
				}
			}
			_ = sc.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-done }()

	c, err := Dial(context.Background(), ln.Addr().String(), Config{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if v := c.MaxVersion(0); v != 11 {
		t.Fatalf("Produce version %d after the fallback, want 11", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(versions) != 2 || versions[0] != maxApiVersionsVersion || versions[1] != 0 {
		t.Fatalf("ApiVersions versions tried %v, want [%d 0]", versions, maxApiVersionsVersion)
	}
}
