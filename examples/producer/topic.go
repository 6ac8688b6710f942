package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
)

// topicReadTimeout bounds reading the topic's partition count after the
// run.
const topicReadTimeout = 10 * time.Second

// topicPartitions returns the partition count of o.topic as the cluster's
// metadata shows it: one Metadata request that never creates the topic,
// sent through a metadata client of its own with the producer's connection
// settings (TLS, SASL). It reads the topic as it is after the run, so that
// the summary tells how many partitions it has, whoever created it and
// whatever -partitions asked.
func topicPartitions(ctx context.Context, o options, brokers []string) (int, error) {
	md, err := metadata.New(metadata.Config{Bootstrap: brokers, ClientID: "samsa-example", TLS: o.tls, SASL: o.sasl})
	if err != nil {
		return 0, err
	}
	defer md.Close()
	ctx, cancel := context.WithTimeout(ctx, topicReadTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(o.topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	r, err := md.Do(ctx, req)
	if err != nil {
		return 0, err
	}
	for _, t := range r.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != o.topic {
			continue
		}
		if err := kerr.ForCode(t.ErrorCode); err != nil {
			return 0, err
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("the Metadata answer has no topic %q", o.topic)
}

// checkPartitions reads the topic's partition count into s after the run,
// with a warning when it is not -partitions: the topic existed before the
// run with another count (the producer creates a topic with -partitions
// only when it does not exist), or the count could not be read.
func checkPartitions(ctx context.Context, s *summary, o options, brokers []string) {
	n, err := topicPartitions(ctx, o, brokers)
	switch {
	case err != nil:
		s.warn(fmt.Sprintf("could not read the partition count of topic %q: %v", o.topic, err))
		return
	case n != o.partitions:
		s.warn(fmt.Sprintf("topic %q has %d partitions, not the %d of -partitions: it existed before the run, and -partitions only applies to a topic the example creates",
			o.topic, n, o.partitions))
	}
	s.Partitions = n
}
