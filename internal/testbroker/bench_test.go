package testbroker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceSink drives one sink-mode broker over loopback TCP with
// prebuilt Produce requests (16 partitions × one batch each), pipelined on
// one connection, and reports the ingest rate (MB/s) with CRC checked.
func BenchmarkProduceSink(b *testing.B) {
	for _, bc := range []struct {
		batchBytes int
		partitions int
	}{
		{batchBytes: 16 << 10, partitions: 16},
		{batchBytes: 64 << 10, partitions: 16},
		{batchBytes: 1 << 20, partitions: 4},
	} {
		b.Run(fmt.Sprintf("batch=%dKiB/partitions=%d", bc.batchBytes>>10, bc.partitions), func(b *testing.B) {
			benchProduceSink(b, bc.batchBytes, bc.partitions)
		})
	}
}

func benchProduceSink(b *testing.B, batchBytes, partitions int) {
	c, err := New(Config{Brokers: 1, Sink: true, MaxMessageBytes: 2 << 20})
	require.NoError(b, err)
	defer c.Close()
	require.NoError(b, c.CreateTopic("sink", int32(partitions)))

	// Records of 1 KiB, as many as fill batchBytes.
	batch := testBatch{n: batchBytes / 1024, valueSize: 1000}.build(b)
	batches := make(map[int32][]byte, partitions)
	for p := range partitions {
		batches[int32(p)] = batch
	}
	req := produceRequest(9, 1, "sink", batches)
	wire := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 0)

	nc, err := net.Dial("tcp", c.Addrs()[0])
	require.NoError(b, err)
	defer nc.Close()

	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(nc, 1<<20)
		for i := 0; i < b.N; i++ {
			binary.BigEndian.PutUint32(wire[8:], uint32(i)) // correlation id
			if _, err := bw.Write(wire); err != nil {
				errc <- err
				return
			}
		}
		errc <- bw.Flush()
	}()
	br := bufio.NewReaderSize(nc, 64<<10)
	var size [4]byte
	buf := make([]byte, 0, 4096)
	for i := 0; i < b.N; i++ {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 9
			require.NoError(b, resp.ReadFrom(buf[5:]))
			for _, p := range resp.Topics[0].Partitions {
				require.Zero(b, p.ErrorCode, "partition %d", p.Partition)
			}
		}
	}
	b.StopTimer()
	require.NoError(b, <-errc)
}
