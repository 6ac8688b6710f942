package interop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

// samsaPartitions is the partition count of the samsa tests' topics: more
// than the brokers, so that a broker leads several partitions and keyed
// records spread over them all.
const samsaPartitions = 6

// TestSamsaProduceKgoConsume produces with samsa to kfake and to the test
// broker, with every codec, idempotent (the default) and with acks=leader
// without idempotence, and reads everything back with kgo's consumer:
// every record arrives once, intact (key, value, headers, timestamp), in
// its murmur2 partition, in Send order, in a batch compressed with the
// configured codec.
func TestSamsaProduceKgoConsume(t *testing.T) {
	const n = 2000
	modes := []struct {
		name string
		cfg  producer.Config
	}{
		{"idempotent", producer.Config{}},
		{"acks=leader", producer.Config{DisableIdempotence: true, Acks: producer.AcksLeader}},
	}
	for _, br := range samsaBrokers {
		t.Run(br.name, func(t *testing.T) {
			b := br.start(t)
			for _, mode := range modes {
				for _, codec := range codecs {
					t.Run(mode.name+"/"+codec.String(), func(t *testing.T) {
						topic := topicName(mode.name[:4], codec)
						b.createTopic(t, topic, samsaPartitions)
						cfg := mode.cfg
						cfg.Compression = codec
						p := newSamsaProducer(t, b.addrs, cfg)
						recs := makeSamsaRecords(topic, n)
						mds := sendAll(t, p, recs)
						require.NoError(t, p.Close(testContext(t)))

						got := consumeAll(t, b.addrs, topic, samsaPartitions, n)
						checkDelivered(t, recs, mds, got, samsaPartitions, codec)
						idempotent := !mode.cfg.DisableIdempotence
						for _, r := range got {
							if (r.ProducerID >= 0) != idempotent {
								t.Errorf("record at %d/%d has producer id %d; idempotent: %v", r.Partition, r.Offset, r.ProducerID, idempotent)
								break
							}
						}
						if b.tb != nil {
							checkStoredBatches(t, b, topic, recs, mds, codec, idempotent)
						}
					})
				}
			}
		})
	}
}

// checkStoredBatches checks, on the test broker, what kgo cannot show: the
// codec of the batch each record was stored in (as the broker decoded it,
// independently of kgo's reading) and the producer id and sequence, which
// must be set (sequences counting up from 0 per partition) when idempotent
// and -1 otherwise.
func checkStoredBatches(t *testing.T, b *samsaBroker, topic string, recs []*producer.Record, mds []producer.RecordMetadata, codec compression.Type, idempotent bool) {
	t.Helper()
	stored := brokerRecords(t, b.tb, topic, samsaPartitions)
	bad := 0
	for i, md := range mds {
		part := stored[md.Partition]
		if md.Offset < 0 || md.Offset >= int64(len(part)) {
			t.Errorf("record %d: offset %d/%d not stored", i, md.Partition, md.Offset)
			bad++
			continue
		}
		r := part[md.Offset]
		c := compression.Type(r.Compression)
		switch {
		case c != codec && c != compression.None,
			c != codec && len(recs[i].Value) >= compressibleLen:
			t.Errorf("record %d stored in a %v batch, want %v", i, c, codec)
			bad++
		}
		if idempotent {
			if r.ProducerID < 0 || r.Sequence != int32(md.Offset) {
				t.Errorf("record %d: producer id %d, sequence %d at offset %d, want a producer id and sequence = offset", i, r.ProducerID, r.Sequence, md.Offset)
				bad++
			}
		} else if r.ProducerID != -1 || r.Sequence != -1 {
			t.Errorf("record %d: producer id %d, sequence %d, want -1 without idempotence", i, r.ProducerID, r.Sequence)
			bad++
		}
		if bad >= 10 {
			t.Fatal("too many mismatches")
		}
	}
}

// TestSamsaSendBeforeTopicExists sends records to a topic that does not
// exist yet (neither broker auto-creates topics here): samsa parks them
// without blocking Send, none completes while the topic is missing, and
// once the topic is created every record is delivered, in Send order.
func TestSamsaSendBeforeTopicExists(t *testing.T) {
	const n = 500
	for _, br := range samsaBrokers {
		t.Run(br.name, func(t *testing.T) {
			b := br.start(t)
			const topic = "late"
			p := newSamsaProducer(t, b.addrs, producer.Config{Compression: compression.LZ4})
			recs := makeSamsaRecords(topic, n)
			ctx := testContext(t)
			futs := make([]*producer.Future, n)
			for i, r := range recs {
				futs[i] = p.Send(ctx, r)
			}
			// Let the producer ask for the topic's metadata a few times
			// and be told it does not exist.
			time.Sleep(300 * time.Millisecond)
			for i, f := range futs {
				if _, done, err := f.Result(); done {
					t.Fatalf("record %d completed before its topic existed: %v", i, err)
				}
			}
			b.createTopic(t, topic, samsaPartitions)
			mds := waitAll(t, p, futs)
			require.NoError(t, p.Close(ctx))

			got := consumeAll(t, b.addrs, topic, samsaPartitions, n)
			checkDelivered(t, recs, mds, got, samsaPartitions, compression.LZ4)
		})
	}
}

// TestSamsaProduceAfterClose checks against both brokers that a producer
// which delivered its records and was closed fails later Sends with
// ErrClosed, while what it delivered stays readable.
func TestSamsaProduceAfterClose(t *testing.T) {
	for _, br := range samsaBrokers {
		t.Run(br.name, func(t *testing.T) {
			b := br.start(t)
			const topic = "closed"
			b.createTopic(t, topic, 1)
			p := newSamsaProducer(t, b.addrs, producer.Config{})
			recs := makeSamsaRecords(topic, 10)
			mds := sendAll(t, p, recs)
			ctx := testContext(t)
			require.NoError(t, p.Close(ctx))
			_, err := p.Send(ctx, &producer.Record{Topic: topic, Value: []byte("late")}).Wait(ctx)
			assert.ErrorIs(t, err, producer.ErrClosed)
			got := consumeAll(t, b.addrs, topic, 1, len(recs))
			checkDelivered(t, recs, mds, got, 1, compression.None)
		})
	}
}
