package interop

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaCodecs produces keyed records with headers to a real Kafka
// broker with every codec and reads them back twice, with kgo and with kcat
// (librdkafka), comparing every field: key, value (null and empty apart),
// headers in order, timestamp, partition and offset, in Send order per
// partition, each record once. Every keyed record must be in the partition
// the Java client's murmur2 gives: checkDelivered compares with samsa's own
// KeyPartition (checked against Kafka's test vectors in the producer
// package), and this test also with kgo's Java-compatible
// StickyKeyPartitioner, an independent implementation.
func TestRealKafkaCodecs(t *testing.T) {
	c := realKafka(t)
	n := recordCount(100_000, 10_000)
	const partitions = samsaPartitions
	for _, codec := range codecs {
		ok := t.Run(codec.String(), func(t *testing.T) {
			start := time.Now()
			topic := uniqueTopic("samsa-codec-" + codec.String())
			c.createTopic(t, topic, partitions, 1, nil)
			recs := makeSamsaRecords(topic, n)
			// Distinct keys, so that the murmur2 check covers n keys
			// rather than makeSamsaRecords' 50.
			for i, r := range recs {
				if len(r.Key) > 0 {
					r.Key = []byte("key-" + strconv.Itoa(i))
				}
			}
			p := newSamsaProducer(t, c.addrs, producer.Config{Compression: codec})
			mds := sendAll(t, p, recs)
			require.NoError(t, p.Close(testContext(t)))
			sent := time.Since(start)

			got := consumeAll(t, c.addrs, topic, partitions, n)
			checkDelivered(t, recs, mds, got, partitions, codec)
			read := time.Since(start) - sent

			javaPartitioner := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
			wrong := 0
			for i, r := range recs {
				if r.Key == nil {
					continue
				}
				want := int32(javaPartitioner.Partition(&kgo.Record{Key: r.Key}, partitions))
				if mds[i].Partition != want && wrong < 10 {
					wrong++
					t.Errorf("record %d: key %q in partition %d, the Java client's murmur2 (kgo) gives %d", i, r.Key, mds[i].Partition, want)
				}
			}

			t.Logf("%d records with %v: sent in %v, read back by kgo in %v", n, codec, sent.Round(time.Millisecond), read.Round(time.Millisecond))
			t.Run("kcat", func(t *testing.T) {
				kcatPath(t) // without kcat, only this part is skipped (it fails in CI)
				start := time.Now()
				checkKcatRecords(t, recs, mds, kcatConsume(t, c.addrs, topic))
				t.Logf("read back by kcat in %v", time.Since(start).Round(time.Millisecond))
			})
		})
		if !ok {
			return
		}
	}
}
