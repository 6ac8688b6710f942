//go:build cgo

package interop

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

// TestLibrdkafkaMockClusterReadsWhatSamsaWrites: samsa produces to
// librdkafka's mock cluster (confluent-kafka-go's NewMockCluster), whose
// ApiVersions handling differs from Kafka's (it answers v3 and v4 with a
// short UNSUPPORTED_VERSION body: samsa falls back to v0, as librdkafka and
// Java do), with every codec; librdkafka's own consumer then reads every
// record back, in order, with its key, value, headers and timestamp.
func TestLibrdkafkaMockClusterReadsWhatSamsaWrites(t *testing.T) {
	for _, codec := range []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			mc, err := kafka.NewMockCluster(1)
			require.NoError(t, err)
			defer mc.Close()
			const topic = "samsa"
			require.NoError(t, mc.CreateTopic(topic, 1, 1))
			addrs := strings.Split(mc.BootstrapServers(), ",")

			p := newSamsaProducer(t, addrs, producer.Config{Compression: codec, Linger: 20 * time.Millisecond})
			recs := makeSamsaRecords(topic, 300)
			for _, md := range sendAll(t, p, recs) {
				require.Equal(t, int32(0), md.Partition)
			}

			c, err := kafka.NewConsumer(&kafka.ConfigMap{
				"bootstrap.servers":  mc.BootstrapServers(),
				"group.id":           "samsa-interop",
				"enable.auto.commit": false,
				"log_level":          3,
			})
			require.NoError(t, err)
			defer c.Close()
			name := topic
			require.NoError(t, c.Assign([]kafka.TopicPartition{{Topic: &name, Partition: 0, Offset: kafka.OffsetBeginning}}))
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; i < len(recs); {
				require.True(t, time.Now().Before(deadline), "read %d of %d records", i, len(recs))
				m, err := c.ReadMessage(time.Second)
				if err != nil {
					if kerr, ok := err.(kafka.Error); ok && kerr.IsTimeout() {
						continue
					}
					require.NoError(t, err)
				}
				want := recs[i]
				require.Equal(t, int64(i), int64(m.TopicPartition.Offset), "offset")
				require.Equal(t, want.Key, nilIfEmptyLike(want.Key, m.Key), "record %d key", i)
				require.Equal(t, want.Value, nilIfEmptyLike(want.Value, m.Value), "record %d value", i)
				require.Equal(t, want.Timestamp.UnixMilli(), m.Timestamp.UnixMilli(), "record %d timestamp", i)
				require.Len(t, m.Headers, len(want.Headers), "record %d headers", i)
				for j, h := range want.Headers {
					require.Equal(t, h.Key, m.Headers[j].Key, "record %d header %d", i, j)
					require.Equal(t, h.Value, nilIfEmptyLike(h.Value, m.Headers[j].Value), "record %d header %d", i, j)
				}
				require.Equal(t, strconv.Itoa(i), string(m.Headers[0].Value))
				i++
			}
		})
	}
}

// nilIfEmptyLike returns got shaped like want: librdkafka hands out an
// empty slice and a null one alike as nil or empty, so only their length
// tells them apart when want is one of them.
func nilIfEmptyLike(want, got []byte) []byte {
	if len(got) == 0 {
		if want == nil {
			return nil
		}
		return []byte{}
	}
	return got
}
