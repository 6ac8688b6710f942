// The exactly-once spool's progress topic (issue 34): making sure it
// exists (compacted), and reading the committed progress of a spool with
// read_committed. The driver that writes it is in spool_eos.go.

package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
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
	partition  int32
	partitions int32 // the topic's partition count
	leader     int32
	topicID    [16]byte
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
				return progressPartition{partition: part, partitions: int32(len(t.Partitions)), leader: rp.Leader, topicID: t.TopicID}, nil
			}
		}
		return progressPartition{}, kerr.LeaderNotAvailable
	}
	return progressPartition{}, kerr.UnknownTopicOrPartition
}

// checkProgressTopic checks, at New, that the progress topic keeps a
// spool's progress where the next New reads it: its cleanup.policy
// (DescribeConfigs) must include compact, or retention would delete the
// progress and the next New would send committed records again: refused
// (errProgressPermanent, so ErrSpoolProgress). A topic of more than one
// partition works, but adding partitions to it later moves a key's
// partition (murmur2 of the key modulo the count) and loses its progress:
// logged as a Warn. A DescribeConfigs that fails (not authorized, not
// supported) is logged as a Warn and the check skipped.
func (p *Producer) checkProgressTopic(ctx context.Context, topic string, pp progressPartition) error {
	if pp.partitions != 1 {
		p.log.Warn("spool: the exactly-once progress topic has more than one partition; adding partitions to it later moves a spool's progress and makes its next start send committed records again",
			"topic", topic, "partitions", pp.partitions)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = topic
	r.ConfigNames = []string{"cleanup.policy"}
	req.Resources = append(req.Resources, r)
	kresp, err := p.meta.Do(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		p.log.Warn("spool: could not check the exactly-once progress topic's cleanup.policy", "topic", topic, "err", err)
		return nil
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	for _, rr := range resp.Resources {
		if rr.ResourceName != topic {
			continue
		}
		if err := kerr.ForCode(rr.ErrorCode); err != nil {
			p.log.Warn("spool: could not check the exactly-once progress topic's cleanup.policy", "topic", topic, "err", err)
			return nil
		}
		for _, c := range rr.Configs {
			if c.Name != "cleanup.policy" || c.Value == nil {
				continue
			}
			for _, v := range strings.Split(*c.Value, ",") {
				if strings.TrimSpace(v) == "compact" {
					return nil
				}
			}
			return &errProgressPermanent{fmt.Errorf("the spool's progress topic %q has cleanup.policy=%s: retention would delete the progress, and a restart would send committed records again; make it compacted (cleanup.policy=compact), or name another in Spool.ProgressTopic", topic, *c.Value)}
		}
	}
	return nil
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
// read_committed from its log start to the high watermark of the first
// answer, and returns the sequence of the last committed progress record
// of key (ok false when there is none). Records of transactions are kept
// per producer id until their marker: a commit applies them, an abort
// drops them. Only records of key are kept (other spools share the
// partition).
//
// It is called after the fencing (InitProducerId): the predecessor's
// commits are all below that high watermark. The last stable offset can
// be below it while another producer's transaction is open on the
// partition (another spool mid-commit, or a crashed one whose transaction
// is open until its transaction timeout): the read then waits, fetching
// again with a backoff and a Warn log every 5 s, until the last stable
// offset passes the high watermark, or ctx ends. A start of New can thus
// take as long as another producer's transaction timeout.
func (p *Producer) readProgress(ctx context.Context, topic string, pp progressPartition, key []byte) (next uint64, ok bool, err error) {
	err = p.readCommitted(ctx, topic, pp, func(k []byte) bool { return string(k) == string(key) }, func(r recordbatch.Record) error {
		n, err := decodeProgress(r.Value)
		if err != nil {
			return &errProgressPermanent{fmt.Errorf("the spool's progress topic %q: %w", topic, err)}
		}
		next, ok = n, true
		return nil
	})
	return next, ok, err
}

// progressWaitLog is how often readCommitted logs while it waits for the
// last stable offset to reach the end of its read.
const progressWaitLog = 5 * time.Second

// progressEmptyAnswers is how many answers in a row, unthrottled and with
// the last stable offset at or past the end, must have no batch at all at
// the read's offset before readCommitted takes it that compaction removed
// everything there (a throttled or blocked answer never counts).
const progressEmptyAnswers = 10

// readCommitted calls visit for every committed record of the partition
// whose key passes key (nil: every record), in offset order, from its log start to the high watermark
// of its first answer (see readProgress: it waits for the last stable
// offset to pass it). An answer with nothing to read below that end (a
// throttled fetch, KIP-219, or the last stable offset still below it) is
// fetched again after a backoff (at least the answer's ThrottleMillis);
// the read never ends before it has read everything below the end. visit's
// error ends the read, and so does ctx.
func (p *Producer) readCommitted(ctx context.Context, topic string, pp progressPartition, key func([]byte) bool, visit func(recordbatch.Record) error) error {
	offset, end := int64(0), int64(-1)
	open := map[int64][]recordbatch.Record{} // producer id → its open transaction's records that pass key
	var waitSince, lastLog time.Time
	idle, emptyStable := 0, 0
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
		rtopic := &resp.Topics[0]
		part := &rtopic.Partitions[0]
		if (rtopic.Topic != topic && rtopic.TopicID != pp.topicID) || part.Partition != pp.partition {
			return fmt.Errorf("a Fetch of %s/%d answered for %s/%d", topic, pp.partition, rtopic.Topic, part.Partition)
		}
		if err := kerr.ForCode(part.ErrorCode); err != nil {
			if errors.Is(err, kerr.ForCode(1)) /* OFFSET_OUT_OF_RANGE */ && part.LogStartOffset > offset {
				offset = part.LogStartOffset
				continue
			}
			return err
		}
		if end < 0 && part.HighWatermark >= 0 {
			// Everything the fenced predecessor committed is below
			// the high watermark now (its markers included).
			end = part.HighWatermark
		}
		if offset < part.LogStartOffset {
			offset = part.LogStartOffset
		}
		lso := part.LastStableOffset
		if lso < 0 {
			lso = part.HighWatermark
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
			if end >= 0 && h.BaseOffset >= end {
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
				for _, r := range batch.Records {
					if key == nil || key(r.Key) {
						open[h.ProducerID] = append(open[h.ProducerID], r)
					}
				}
			default:
				for _, r := range batch.Records {
					if key != nil && !key(r.Key) {
						continue
					}
					if err := visit(r); err != nil {
						return err
					}
				}
			}
		}
		if moved {
			idle, emptyStable, waitSince = 0, 0, time.Time{}
			continue
		}
		if len(part.RecordBatches) > 0 && len(b) > 0 && len(b) == len(part.RecordBatches) {
			return fmt.Errorf("a Fetch of %s/%d at offset %d returned no whole batch (one larger than 4 MiB?)", topic, pp.partition, offset)
		}
		if end >= 0 && offset >= end {
			break
		}
		if lso >= end && resp.ThrottleMillis == 0 {
			emptyStable++
			if emptyStable >= progressEmptyAnswers {
				// Nothing blocks the read, and the broker keeps
				// answering no batch from offset to the end: the
				// batches there were removed by compaction (which
				// keeps offsets, not records). Nothing to read.
				p.log.Warn("spool: the progress topic has no batch left between the offset read and its end (compacted away)",
					"topic", topic, "partition", pp.partition, "offset", offset, "end", end)
				break
			}
		} else {
			emptyStable = 0
		}
		// Nothing to read yet below the end: a throttled or empty
		// answer, or another producer's open transaction holding the
		// last stable offset below it. Fetch again after a backoff.
		now := time.Now()
		if waitSince.IsZero() {
			waitSince = now
		}
		if lso < end && now.Sub(lastLog) >= progressWaitLog && now.Sub(waitSince) >= progressWaitLog/5 {
			lastLog = now
			p.log.Warn("spool: the exactly-once progress read waits for another producer's open transaction on the progress topic to end (at most its transaction timeout)",
				"topic", topic, "partition", pp.partition, "last_stable_offset", lso, "end", end, "waited", now.Sub(waitSince).Round(time.Millisecond).String())
		}
		idle++
		wait := min(time.Duration(idle)*20*time.Millisecond, 500*time.Millisecond)
		if th := time.Duration(resp.ThrottleMillis) * time.Millisecond; th > wait {
			wait = th
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
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
