// The exactly-once spool's progress topic (issue 34): making sure it
// exists (compacted), and reading the committed progress of a spool with
// read_committed. The driver that writes it is in spool_eos.go.

package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/samsa-go/samsa/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/recordbatch"
	"github.com/samsa-go/samsa/spool"
)

// progressVersion is the first byte of a progress record's value; the
// next 8 bytes (big endian) are the sequence after the last one the
// transaction carrying the record committed.
const progressVersion = 1

// encodeProgress is a progress record's value.
func encodeProgress(next uint64) []byte {
	b := make([]byte, 9)
	b[0] = progressVersion
	binary.BigEndian.PutUint64(b[1:], next)
	return b
}

// decodeProgress reads a progress record's value.
func decodeProgress(v []byte) (uint64, error) {
	if len(v) != 9 || v[0] != progressVersion {
		return 0, fmt.Errorf("progress record of %d bytes, version %d: not one this producer wrote", len(v), firstByte(v))
	}
	return binary.BigEndian.Uint64(v[1:]), nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

// progressKey is the key of a spool's progress records: its ID in
// hexadecimal (one compacted topic serves many spools).
func progressKey(id spool.ID) []byte { return []byte(id.String()) }

// errProgressPermanent marks a progress-topic error that retrying cannot
// fix (the topic is missing and may not, or cannot, be created; the
// broker refuses the reads): the driver fails its records with it.
type errProgressPermanent struct{ err error }

func (e *errProgressPermanent) Error() string { return e.err.Error() }
func (e *errProgressPermanent) Unwrap() error { return e.err }

// progressPartition is where a spool's progress records go: the
// partition the key hashes to (murmur2, as Java's default partitioner),
// whatever Config.Partitioner, and the partition's leader and the
// topic's id.
type progressPartition struct {
	partition int32
	leader    int32
	topicID   [16]byte
}

// ensureProgressTopic asks for the progress topic's metadata (never
// creating it through Metadata: it must be compacted) and creates it with
// CreateTopics (1 partition, the broker's replication factor,
// cleanup.policy=compact) when it is missing, unless
// Config.DisableAutoTopicCreation. It returns the key's partition.
func (p *Producer) ensureProgressTopic(ctx context.Context, topic string, key []byte) (progressPartition, error) {
	created := false
	for {
		pp, err := p.progressMetadata(ctx, topic, key)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return pp, err
		}
		if created {
			// Metadata may lag the creation: ask again shortly.
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return progressPartition{}, err
			}
			continue
		}
		if p.cfg.DisableAutoTopicCreation {
			return progressPartition{}, &errProgressPermanent{fmt.Errorf("the spool's progress topic %q does not exist, and Config.DisableAutoTopicCreation forbids creating it: create it as a compacted topic (cleanup.policy=compact), or name another in Spool.ProgressTopic", topic)}
		}
		if err := p.createProgressTopic(ctx, topic); err != nil {
			return progressPartition{}, err
		}
		created = true
	}
}

func (p *Producer) progressMetadata(ctx context.Context, topic string, key []byte) (progressPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kresp, err := p.meta.Do(ctx, req)
	if err != nil {
		return progressPartition{}, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ForCode(t.ErrorCode); err != nil {
			if !errors.Is(err, kerr.UnknownTopicOrPartition) && !kerr.IsRetriable(err) {
				// Authorization, an invalid name: asking again
				// cannot help.
				return progressPartition{}, &errProgressPermanent{fmt.Errorf("the spool's progress topic %q: %w", topic, err)}
			}
			return progressPartition{}, err
		}
		if len(t.Partitions) == 0 {
			return progressPartition{}, errNoPartitions
		}
		part := KeyPartition(key, int32(len(t.Partitions)))
		for _, rp := range t.Partitions {
			if rp.Partition == part {
				if rp.Leader < 0 {
					return progressPartition{}, kerr.LeaderNotAvailable
				}
				return progressPartition{partition: part, leader: rp.Leader, topicID: t.TopicID}, nil
			}
		}
		return progressPartition{}, kerr.LeaderNotAvailable
	}
	return progressPartition{}, kerr.UnknownTopicOrPartition
}

// createProgressTopic creates the progress topic, compacted. An error
// other than a lost race (TOPIC_ALREADY_EXISTS) is permanent: the
// producer may not create topics, or the request is invalid.
func (p *Producer) createProgressTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(p.cfg.RequestTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = 1
	rt.ReplicationFactor = -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	kresp, err := p.meta.DoController(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		err := kerr.ForCode(t.ErrorCode)
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			p.log.Info("created the spool's progress topic", "topic", topic)
			return nil
		case kerr.IsRetriable(err):
			return err
		}
		msg := ""
		if t.ErrorMessage != nil {
			msg = ": " + *t.ErrorMessage
		}
		return &errProgressPermanent{fmt.Errorf("the spool's progress topic %q does not exist and CreateTopics failed (create it as a compacted topic, cleanup.policy=compact): %w%s", topic, err, msg)}
	}
	return fmt.Errorf("no answer for topic %q in the CreateTopics response", topic)
}

// readProgress reads the key's partition of the progress topic with
// read_committed from its log start to its last stable offset, and returns
// the sequence of the last committed progress record of key (ok false
// when there is none). Records of transactions are kept per producer id
// until their marker: a commit applies them, an abort drops them.
func (p *Producer) readProgress(ctx context.Context, topic string, pp progressPartition, key []byte) (next uint64, ok bool, err error) {
	err = p.readCommitted(ctx, topic, pp, func(r recordbatch.Record) error {
		if string(r.Key) != string(key) {
			return nil
		}
		n, err := decodeProgress(r.Value)
		if err != nil {
			return &errProgressPermanent{fmt.Errorf("the spool's progress topic %q: %w", topic, err)}
		}
		next, ok = n, true
		return nil
	})
	return next, ok, err
}

// readCommitted calls visit for every committed record of the partition,
// in offset order, from its log start to its last stable offset at the
// first answer. visit's error ends the read.
func (p *Producer) readCommitted(ctx context.Context, topic string, pp progressPartition, visit func(recordbatch.Record) error) error {
	offset, end := int64(0), int64(-1)
	open := map[int64][]recordbatch.Record{} // producer id → its open transaction's records
	for end < 0 || offset < end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 0
		req.MaxBytes = 4 << 20
		req.IsolationLevel = 1 // read_committed
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, pp.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = pp.partition
		rp.FetchOffset = offset
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = 4 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := p.meta.DoPrefer(ctx, pp.leader, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ForCode(resp.ErrorCode); err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("a Fetch of %s/%d answered %d topics", topic, pp.partition, len(resp.Topics))
		}
		part := &resp.Topics[0].Partitions[0]
		if err := kerr.ForCode(part.ErrorCode); err != nil {
			if errors.Is(err, kerr.ForCode(1)) /* OFFSET_OUT_OF_RANGE */ && part.LogStartOffset > offset {
				offset = part.LogStartOffset
				continue
			}
			return err
		}
		if end < 0 {
			end = part.LastStableOffset
			if end < 0 {
				end = part.HighWatermark
			}
			if offset < part.LogStartOffset {
				offset = part.LogStartOffset
			}
		}
		b := part.RecordBatches
		moved := false
		for len(b) >= recordbatch.HeaderSize {
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				break // a batch cut by MaxBytes: fetched again from its offset
			}
			raw := b[:12+int(h.Length)]
			b = b[len(raw):]
			last := h.BaseOffset + int64(h.LastOffsetDelta)
			if last < offset {
				continue
			}
			if h.BaseOffset >= end {
				offset = end
				moved = true
				break
			}
			batch, err := recordbatch.Decode(raw, 64<<20)
			if err != nil {
				return fmt.Errorf("decoding %s/%d at offset %d: %w", topic, pp.partition, h.BaseOffset, err)
			}
			offset, moved = last+1, true
			switch {
			case h.Control():
				commit := false
				if len(batch.Records) > 0 && len(batch.Records[0].Key) >= 4 {
					commit = binary.BigEndian.Uint16(batch.Records[0].Key[2:]) == 1
				}
				recs := open[h.ProducerID]
				delete(open, h.ProducerID)
				if commit {
					for _, r := range recs {
						if err := visit(r); err != nil {
							return err
						}
					}
				}
			case h.Transactional():
				open[h.ProducerID] = append(open[h.ProducerID], batch.Records...)
			default:
				for _, r := range batch.Records {
					if err := visit(r); err != nil {
						return err
					}
				}
			}
		}
		if !moved {
			if len(part.RecordBatches) > 0 {
				return fmt.Errorf("a Fetch of %s/%d at offset %d returned no whole batch (one larger than 4 MiB?)", topic, pp.partition, offset)
			}
			break // nothing more below the last stable offset
		}
	}
	return nil
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
