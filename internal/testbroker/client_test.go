package testbroker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/bufferpool"
)

// wireClient is a minimal Kafka client for the tests: one connection,
// requests encoded by kmsg, one request at a time unless pipelined with
// send/recv.
type wireClient struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	sent []kmsg.Request // requests awaiting a response, in order
}

func dialBroker(t testing.TB, addr, clientID string) *wireClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return &wireClient{t: t, nc: nc, br: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// send writes req at its current version.
func (w *wireClient) send(req kmsg.Request) error {
	w.corr++
	_, err := w.nc.Write(w.fmt.AppendRequest(nil, req, w.corr))
	if err == nil {
		w.sent = append(w.sent, req)
	}
	return err
}

// recv reads the response to the oldest request sent.
func (w *wireClient) recv() (kmsg.Response, error) {
	if len(w.sent) == 0 {
		return nil, fmt.Errorf("nothing sent")
	}
	req := w.sent[0]
	w.sent = w.sent[1:]
	_ = w.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(w.br, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.br, buf); err != nil {
		return nil, err
	}
	corr := int32(binary.BigEndian.Uint32(buf))
	buf = buf[4:]
	if want := w.corr - int32(len(w.sent)); corr != want {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, want)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		buf = buf[1:] // empty header tags
	}
	return resp, resp.ReadFrom(buf)
}

// request sends req and returns its response, failing the test on error.
func (w *wireClient) request(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	require.NoError(w.t, w.send(req))
	resp, err := w.recv()
	require.NoError(w.t, err)
	return resp
}

// produceRequest builds a Produce request of one batch per partition.
func produceRequest(version int16, acks int16, topic string, batches map[int32][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p, b := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// newTestCluster starts a cluster closed at the end of the test. With
// QueuedMaxBytes set, request memory comes from a pool with leak detection
// (KIP-72's "reclaiming buffers that were never released"), and the test
// fails if any buffer was garbage-collected unreleased or is still out
// once the cluster is closed.
func newTestCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	var pool *bufferpool.SimplePool
	if cfg.QueuedMaxBytes > 0 && cfg.MemoryPool == nil {
		var err error
		pool, err = bufferpool.New(bufferpool.Options{
			Size: cfg.QueuedMaxBytes, PooledSize: int(min(cfg.QueuedMaxBytes, bufferpool.DefaultPooledSize)),
			OverAllocate: true, LeakDetection: true,
		})
		require.NoError(t, err)
		cfg.MemoryPool = pool
	}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Close()
		if pool != nil {
			runtime.GC()
			runtime.GC()
			st := pool.Stats()
			assert.Zero(t, st.Leaked, "request buffers garbage-collected without Release")
			assert.Equal(t, st.Size, st.Available, "request memory still out after Close")
		}
	})
	return c
}

// leaderAddr returns the address of the broker leading topic/partition.
func leaderAddr(t testing.TB, c *Cluster, topic string, partition int32) (int32, string) {
	t.Helper()
	id, _, err := c.Leader(topic, partition)
	require.NoError(t, err)
	return id, c.Addrs()[id]
}
