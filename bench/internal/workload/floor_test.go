package workload

import (
	"testing"

	"github.com/samsa-go/samsa/producer"
)

// BenchmarkW4Floor measures what W4 (100B-keyed-10k-partitions) costs any
// client per record before it has done anything of its own: reading the
// record's key from the workload's 100 000 keys (scattered by KeyStride,
// as every client reads them) and hashing it with murmur2 to find the
// partition ("key"), and then also touching one cache line of the
// partition's state, as every client keeps some per partition ("key and
// partition"). Both are lower bounds: this loop does nothing else, so the
// CPU overlaps the cache misses of consecutive records, which a client
// doing real work between them cannot. W1 (unkeyed, sticky partition)
// pays neither, which is why W4's cost per record cannot come within a few
// hundred nanoseconds of W1's (bench/README.md, "W4 against W1: the
// floor").
func BenchmarkW4Floor(b *testing.B) {
	var spec Spec
	for _, s := range All(DefaultRecords) {
		if s.Name == "100B-keyed-10k-partitions" {
			spec = s
		}
	}
	if spec.Name == "" {
		b.Fatal("no W4 workload")
	}
	p := NewPayload(spec)
	type partState struct {
		records int64
		_       [56]byte
	}
	parts := make([]partState, spec.Partitions)
	var sink int32
	b.Run("key", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sink += producer.KeyPartition(p.Key(i), int32(spec.Partitions))
			i++
		}
	})
	b.Run("key_and_partition", func(b *testing.B) {
		i := 0
		for b.Loop() {
			parts[producer.KeyPartition(p.Key(i), int32(spec.Partitions))].records++
			i++
		}
	})
	b.Run("unkeyed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			parts[0].records += int64(len(p.Value(i)))
			i++
		}
	})
	_ = sink
}
