package producer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// hostileBroker is a one-node Kafka that answers ApiVersions, Metadata
// (topic "t", one partition it leads), InitProducerId and Produce properly,
// except for the API under test, which it answers with the mode's
// misbehaviour.
type hostileBroker struct {
	ln   net.Listener
	key  int16  // the API misbehaving
	mode string // see hostileModes
	port int32

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// hostileModes are the ways the broker misbehaves.
var hostileModes = []string{"silence", "garbage", "truncated", "huge-length", "wrong-correlation", "duplicate", "drop"}

func newHostileBroker(t *testing.T, key int16, mode string) *hostileBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	b := &hostileBroker{ln: ln, key: key, mode: mode, port: int32(p)}
	b.wg.Add(1)
	go b.accept()
	return b
}

func (b *hostileBroker) addr() string { return b.ln.Addr().String() }

func (b *hostileBroker) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *hostileBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *hostileBroker) serve(c net.Conn) {
	defer b.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		req.SetVersion(version)
		rest := frame[8:]
		n := int(int16(binary.BigEndian.Uint16(rest)))
		rest = rest[2+max(n, 0):]
		if req.IsFlexible() {
			rest = rest[1:] // empty header tags
		}
		if err := req.ReadFrom(rest); err != nil {
			return
		}
		resp := b.answer(req)
		out := encodeHostile(corr, key, resp)
		if key == b.key {
			switch b.mode {
			case "silence":
				continue
			case "garbage":
				out = []byte("HTTP/1.1 400 Bad Request\r\n\r\n")
			case "truncated":
				_, _ = c.Write(out[:len(out)/2])
				return
			case "huge-length":
				out = binary.BigEndian.AppendUint32(nil, 100<<20-1)
				out = binary.BigEndian.AppendUint32(out, uint32(corr))
			case "wrong-correlation":
				out = encodeHostile(corr+1, key, resp)
			case "duplicate":
				out = append(out, out...)
			case "drop":
				return
			}
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func encodeHostile(corr int32, key int16, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
	if resp.IsFlexible() && key != 18 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func (b *hostileBroker) answer(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		for _, k := range []int16{0, 3, 18, 22} {
			r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: 0, MaxVersion: kmsg.RequestForKey(k).MaxVersion()})
		}
		r.ApiKeys[0].MinVersion, r.ApiKeys[0].MaxVersion = 3, 9
		r.ApiKeys[1].MaxVersion = 12
	case *kmsg.MetadataResponse:
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = 0, "127.0.0.1", b.port
		r.Brokers = append(r.Brokers, br)
		r.ControllerID = 0
		for _, t := range req.(*kmsg.MetadataRequest).Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = t.Topic
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Leader, p.Replicas, p.ISR = 0, []int32{0}, []int32{0}
			rt.Partitions = append(rt.Partitions, p)
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.InitProducerIDResponse:
		r.ProducerID, r.ProducerEpoch = 1, 0
	case *kmsg.ProduceResponse:
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}
	return resp
}

// TestHostileBrokerKeepsEveryPromise: whatever a broker answers to
// Metadata, InitProducerId or Produce (nothing, garbage, a truncated
// frame, a 100 MiB length prefix, a wrong correlation id, the answer twice,
// a dropped connection), the producer does not panic, completes every
// future exactly once within DeliveryTimeout plus a margin, keeps its live
// heap within the bound, and leaves no goroutine behind after Close.
func TestHostileBrokerKeepsEveryPromise(t *testing.T) {
	const (
		deliveryTimeout = 2 * time.Second
		margin          = 2 * time.Second
		bufferMemory    = 1 << 20
		records         = 200
	)
	apis := []struct {
		name string
		key  int16
	}{{"Metadata", 3}, {"InitProducerId", 22}, {"Produce", 0}}
	for _, api := range apis {
		for _, mode := range append([]string{"honest"}, hostileModes...) {
			t.Run(api.name+"/"+mode, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				b := newHostileBroker(t, api.key, mode)
				defer b.close()
				p, err := New(Config{
					Brokers: []string{b.addr()}, BufferMemory: bufferMemory, BatchSize: 16 << 10,
					DeliveryTimeout: deliveryTimeout, RequestTimeout: 500 * time.Millisecond, MaxBlock: time.Second,
					RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
				})
				require.NoError(t, err)
				before := heapNow()
				var calls [records]atomic.Int32
				var failed atomic.Int32
				var done sync.WaitGroup
				done.Add(records)
				start := time.Now()
				for i := range records {
					p.SendCallback(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(_ RecordMetadata, err error) {
						if err != nil {
							failed.Add(1)
						}
						if calls[i].Add(1) == 1 {
							done.Done()
						}
					})
				}
				all := make(chan struct{})
				go func() { done.Wait(); close(all) }()
				select {
				case <-all:
				case <-time.After(deliveryTimeout + margin):
					t.Fatalf("records not all completed %v after Send", deliveryTimeout+margin)
				}
				require.Less(t, time.Since(start), deliveryTimeout+margin)
				grown := int64(heapNow()) - int64(before)
				require.Less(t, grown, int64(bufferMemory+bookkeepingSlack), "live heap grew by %d bytes", grown)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := p.Close(ctx); err != nil && !errors.Is(err, ErrClosed) {
					t.Fatalf("Close: %v", err)
				}
				for i := range calls {
					require.Equal(t, int32(1), calls[i].Load(), "record %d completed %d times", i, calls[i].Load())
				}
				if mode == "honest" {
					require.Zero(t, failed.Load(), "records failed against an honest broker")
				}
			})
		}
	}
}

// TestNoGoroutineOutlivesClose: Close promises that every goroutine of the
// producer has exited when it returns nil. Against a broker that drops
// connections mid-request (the producer closes each broken connection,
// redials, and Close comes at any point of that), nothing of the producer
// may still be at work right after Close: not a connection's close, reader
// or writer, not a dial, not an InitProducerId request. It used to be so in
// about one run in seven: connections were closed on goroutines nobody
// waited for.
func TestNoGoroutineOutlivesClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cases := []struct {
		name       string
		key        int16
		mode       string
		iterations int
	}{
		{"Produce dropped", 0, "drop", 25},
		{"Produce answer cut", 0, "truncated", 15},
		{"InitProducerId dropped", 22, "drop", 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.iterations {
				b := newHostileBroker(t, tc.key, tc.mode)
				before := goroutineIDs()
				p, err := New(Config{
					Brokers: []string{b.addr()}, Linger: time.Millisecond,
					DeliveryTimeout: 300 * time.Millisecond, RequestTimeout: 200 * time.Millisecond,
					RetryBackoff: 5 * time.Millisecond, RetryBackoffMax: 20 * time.Millisecond,
				})
				require.NoError(t, err)
				for j := range 50 {
					p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(j))})
				}
				time.Sleep(time.Duration(i%10) * 10 * time.Millisecond) // Close at various points
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = p.Close(ctx)
				cancel()
				left := workingGoroutines(before)
				b.close()
				require.NoError(t, err)
				require.Empty(t, left, "iteration %d: goroutines still at work after Close returned", i)
			}
		})
	}
}
