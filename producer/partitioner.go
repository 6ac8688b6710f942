package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// UnknownPartition is what a Partitioner returns to let the producer's
// built-in uniform sticky partitioner (KIP-794) choose the partition, as the
// Java client's partitioner contract allows.
const UnknownPartition int32 = -1

// Partitioner chooses a record's partition.
//
// Partition is called by Send for every record without
// Record.ExplicitPartition, from the caller's goroutine, so it must be safe
// for concurrent use and should be fast and allocation free. Except for
// ManualPartitioner, rec.Partition is always 0 there: a record with another
// Partition and without ExplicitPartition fails before any partitioner is
// called. numPartitions is the number of partitions of rec.Topic (all of
// them, not only those with a live leader) and is always at least 1. Partition
// returns a partition in [0, numPartitions), or UnknownPartition to let the
// built-in uniform sticky partitioner choose. A returned error fails that
// record's future, wrapped in ErrInvalidRecord (a panic does too, and is
// recovered); a partition out of range does too. Partition must not modify
// rec or keep it after returning. Records sent before their topic's
// partitions are known are partitioned later, on the producer's IO
// goroutine, once metadata arrives.
type Partitioner interface {
	Partition(rec *Record, numPartitions int32) (int32, error)
}

// PartitionerFunc adapts a function to the Partitioner interface, for custom
// partitioning:
//
//	cfg.Partitioner = producer.PartitionerFunc(func(rec *producer.Record, n int32) (int32, error) {
//		return int32(rec.Value[0]) % n, nil
//	})
type PartitionerFunc func(rec *Record, numPartitions int32) (int32, error)

// Partition calls f(rec, numPartitions).
func (f PartitionerFunc) Partition(rec *Record, numPartitions int32) (int32, error) {
	return f(rec, numPartitions)
}

// DefaultPartitioner returns the Java client's default partitioner, which is
// the default of Config.Partitioner: a record with a key (Key != nil, even if
// empty) goes to partition (Murmur2(Key) & 0x7fffffff) % numPartitions, so
// keyed records land where a Java producer would put them; a record without
// a key gets UnknownPartition, and the producer's uniform sticky partitioner
// (KIP-794) places it: it sticks to one partition until about
// Config.BatchSize bytes went there, then picks the next partition at
// random, favouring partitions with shorter queues and skipping partitions
// without a leader.
func DefaultPartitioner() Partitioner { return defaultPartitioner{} }

type defaultPartitioner struct{}

func (defaultPartitioner) Partition(rec *Record, numPartitions int32) (int32, error) {
	if rec.Key == nil {
		return UnknownPartition, nil
	}
	return KeyPartition(rec.Key, numPartitions), nil
}

// KeyPartition returns the partition the Java client's default partitioner
// (and librdkafka's murmur2_random) chooses for key among numPartitions:
// (Murmur2(key) & 0x7fffffff) % numPartitions. numPartitions must be at
// least 1.
func KeyPartition(key []byte, numPartitions int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % numPartitions
}

// Murmur2 is the 32-bit murmur2 hash the Java client uses to partition keyed
// records (seed 0x9747b28c), returned as Java's signed int. Use KeyPartition
// to predict a key's partition.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// RoundRobinPartitioner returns a partitioner that sends each record of a
// topic to the next partition of that topic in turn, whatever its key, like
// the Java client's RoundRobinPartitioner (one counter per topic). Unlike
// Java's, it cycles over all partitions, including those without a leader:
// records for those wait for a leader or for Config.DeliveryTimeout. It is
// safe for concurrent use, takes no lock once a topic has been seen, and
// does not allocate per record.
//
// Round-robin makes small batches (one record per partition in turn); prefer
// DefaultPartitioner unless records must be spread exactly.
func RoundRobinPartitioner() Partitioner {
	rr := &roundRobin{}
	rr.counters.Store(&map[string]*atomic.Uint32{})
	return rr
}

type roundRobin struct {
	// counters is a copy-on-write map of per-topic counters: readers load
	// it without a lock; a new topic copies it under mu.
	counters atomic.Pointer[map[string]*atomic.Uint32]
	mu       sync.Mutex
}

func (rr *roundRobin) Partition(rec *Record, numPartitions int32) (int32, error) {
	c := (*rr.counters.Load())[rec.Topic]
	if c == nil {
		c = rr.add(rec.Topic)
	}
	n := c.Add(1) - 1
	return int32(n % uint32(numPartitions)), nil
}

func (rr *roundRobin) add(topic string) *atomic.Uint32 {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	old := *rr.counters.Load()
	if c := old[topic]; c != nil {
		return c
	}
	next := make(map[string]*atomic.Uint32, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	c := new(atomic.Uint32)
	next[topic] = c
	rr.counters.Store(&next)
	return c
}

// ManualPartitioner returns a partitioner that sends each record to
// Record.Partition, 0 included (so the zero value is partition 0), with or
// without Record.ExplicitPartition. A partition outside [0, numPartitions)
// fails the record's future with an error wrapping ErrInvalidRecord that
// names the topic, the partition and the partition count.
func ManualPartitioner() Partitioner { return manualPartitioner{} }

type manualPartitioner struct{}

func (manualPartitioner) Partition(rec *Record, numPartitions int32) (int32, error) {
	if err := checkPartition(rec.Topic, rec.Partition, numPartitions); err != nil {
		return 0, err
	}
	return rec.Partition, nil
}

// checkRecordPartition refuses, in Send, a partition that pt would never
// honour: a negative Partition with ExplicitPartition, and a non-zero
// Partition without it under a partitioner other than ManualPartitioner
// (which would ignore it). Both are errors wrapping ErrInvalidRecord.
func checkRecordPartition(pt Partitioner, rec *Record) error {
	switch {
	case rec.ExplicitPartition:
		if rec.Partition < 0 {
			return fmt.Errorf("%w: partition %d of topic %q is negative", ErrInvalidRecord, rec.Partition, rec.Topic)
		}
	case rec.Partition != 0:
		if _, manual := pt.(manualPartitioner); !manual {
			return fmt.Errorf("%w: topic %q: Partition is %d without ExplicitPartition, and the partitioner would ignore it: set ExplicitPartition (or use ManualPartitioner)",
				ErrInvalidRecord, rec.Topic, rec.Partition)
		}
	}
	return nil
}

// parkedPartition is rec's partition as the accumulator keeps it for a
// parked record: Partition when it decides (ExplicitPartition, or
// ManualPartitioner, whose negative Partition fails once the partitions are
// known, as it would in Send), else UnknownPartition (pt decides). The sink
// sets ExplicitPartition on a parked record whose partition is not negative.
func parkedPartition(pt Partitioner, rec *Record) int32 {
	if _, manual := pt.(manualPartitioner); manual || rec.ExplicitPartition {
		return rec.Partition
	}
	return UnknownPartition
}

// callPartitioner returns rec's Partition if it has ExplicitPartition, or
// else calls pt.Partition for rec, which must be the caller's own copy: a
// partitioner other than ManualPartitioner gets it with Partition 0. The
// partitioner's error, or its panic (recovered: user code must not kill the
// goroutine it runs on, nor leave the record uncounted), comes back as an
// error wrapping ErrInvalidRecord that names the topic.
func callPartitioner(pt Partitioner, rec *Record, n int32) (part int32, err error) {
	if rec.ExplicitPartition {
		return rec.Partition, nil
	}
	if _, manual := pt.(manualPartitioner); !manual {
		// A parked record's UnknownPartition: other partitioners see 0,
		// as they do in Send.
		rec.Partition = 0
	}
	defer func() {
		if v := recover(); v != nil {
			part, err = 0, fmt.Errorf("%w: topic %q: the partitioner panicked: %v", ErrInvalidRecord, rec.Topic, v)
		}
	}()
	part, err = pt.Partition(rec, n)
	if err != nil && !errors.Is(err, ErrInvalidRecord) {
		err = fmt.Errorf("%w: topic %q: partitioner: %w", ErrInvalidRecord, rec.Topic, err)
	}
	return part, err
}

// checkPartition reports an error wrapping ErrInvalidRecord unless p is in
// [0, numPartitions). The producer calls it on a record's explicit
// partition (ExplicitPartition) and on whatever a Partitioner returns
// (other than UnknownPartition).
func checkPartition(topic string, p, numPartitions int32) error {
	if p < 0 || p >= numPartitions {
		return fmt.Errorf("%w: partition %d of topic %q is out of range: the topic has %d partitions",
			ErrInvalidRecord, p, topic, numPartitions)
	}
	return nil
}

// ignoreKeysPartitioner leaves every record to the sticky partitioner, keys
// or not: the Java client's partitioner.ignore.keys=true.
type ignoreKeysPartitioner struct{}

func (ignoreKeysPartitioner) Partition(*Record, int32) (int32, error) {
	return UnknownPartition, nil
}
