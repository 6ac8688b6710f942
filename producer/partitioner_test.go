package producer

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Vectors from Kafka's UtilsTest.testMurmur2 (signed int32).
func TestMurmur2MatchesJava(t *testing.T) {
	cases := []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, tc.want, Murmur2([]byte(tc.key)))
		})
	}
}

// Every tail length (0-3 bytes after the 4-byte blocks) must be hashed:
// different keys that share a prefix must not collide systematically.
func TestMurmur2TailLengths(t *testing.T) {
	seen := map[int32]string{}
	for n := range 9 {
		key := []byte("abcdefgh"[:n])
		h := Murmur2(key)
		prev, dup := seen[h]
		require.False(t, dup, "keys %q and %q collide", prev, key)
		seen[h] = string(key)
	}
}

func TestDefaultPartitioner(t *testing.T) {
	p := DefaultPartitioner()
	cases := []struct {
		name string
		key  []byte
		n    int32
		want int32
	}{
		// (murmur2 & 0x7fffffff) % n, computed from the Java vectors.
		{"foobar over 7", []byte("foobar"), 7, (-790332482 & 0x7fffffff) % 7},
		{"21 over 100", []byte("21"), 100, (-973932308 & 0x7fffffff) % 100},
		{"abc over 3", []byte("abc"), 3, 479470107 % 3},
		{"one partition", []byte("any"), 1, 0},
		{"empty key is a key", []byte{}, 1000, (Murmur2(nil) & 0x7fffffff) % 1000},
		{"nil key", nil, 12, UnknownPartition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Record{Topic: "t", Key: tc.key, Partition: 99}
			got, err := p.Partition(rec, tc.n)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestKeyPartitionIsStable(t *testing.T) {
	for _, n := range []int32{1, 2, 3, 10, 64, 1000} {
		for i := range 200 {
			key := fmt.Appendf(nil, "key-%d", i)
			p := KeyPartition(key, n)
			require.True(t, p >= 0 && p < n, "partition %d of %d", p, n)
			require.Equal(t, p, KeyPartition(key, n))
		}
	}
}

func TestRoundRobinPartitionerCyclesPerTopic(t *testing.T) {
	p := RoundRobinPartitioner()
	var a, b []int32
	for range 7 {
		pa, err := p.Partition(&Record{Topic: "a", Key: []byte("k")}, 3)
		require.NoError(t, err)
		a = append(a, pa)
		pb, err := p.Partition(&Record{Topic: "b"}, 2)
		require.NoError(t, err)
		b = append(b, pb)
	}
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2, 0}, a, "keys are ignored, topics counted apart")
	assert.Equal(t, []int32{0, 1, 0, 1, 0, 1, 0}, b)
}

// Under concurrent use every partition gets exactly its share.
func TestRoundRobinPartitionerConcurrent(t *testing.T) {
	const goroutines, per, n = 8, 1000, 4
	p := RoundRobinPartitioner()
	counts := make([][n]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			topic := fmt.Sprintf("t%d", g%2)
			for range per {
				part, err := p.Partition(&Record{Topic: topic}, n)
				if err != nil || part < 0 || part >= n {
					t.Errorf("partition %d, err %v", part, err)
					return
				}
				counts[g][part]++
			}
		})
	}
	wg.Wait()
	var total [n]int
	for _, c := range counts {
		for i, v := range c {
			total[i] += v
		}
	}
	for i, v := range total {
		assert.Equal(t, goroutines*per/n, v, "partition %d", i)
	}
}

func TestManualPartitioner(t *testing.T) {
	p := ManualPartitioner()
	cases := []struct {
		name    string
		part    int32
		n       int32
		wantErr string
	}{
		{"first", 0, 3, ""},
		{"last", 2, 3, ""},
		{"equal to count", 3, 3, `partition 3 of topic "orders" is out of range: the topic has 3 partitions`},
		{"negative", -1, 3, "partition -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Partition(&Record{Topic: "orders", Partition: tc.part, Key: []byte("k")}, tc.n)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.part, got)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestPartitionerFunc(t *testing.T) {
	var p Partitioner = PartitionerFunc(func(rec *Record, n int32) (int32, error) {
		return int32(len(rec.Value)) % n, nil
	})
	got, err := p.Partition(&Record{Value: []byte("hello")}, 3)
	require.NoError(t, err)
	assert.Equal(t, int32(2), got)
}

func TestPartitionersDoNotAllocate(t *testing.T) {
	rr := RoundRobinPartitioner()
	_, _ = rr.Partition(&Record{Topic: "t"}, 4) // first sight of the topic allocates
	cases := []struct {
		name string
		p    Partitioner
	}{
		{"default", DefaultPartitioner()},
		{"round robin", rr},
		{"manual", ManualPartitioner()},
	}
	rec := &Record{Topic: "t", Key: []byte("some-key"), Partition: 1}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := tc.p.Partition(rec, 4); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

func ExampleKeyPartition() {
	// The partition a Java producer picks for key "foobar" in a 12-partition topic.
	fmt.Println(KeyPartition([]byte("foobar"), 12))
	// Output: 6
}

func BenchmarkMurmur2(b *testing.B) {
	for _, size := range []int{8, 36, 256} {
		key := make([]byte, size)
		for i := range key {
			key[i] = byte(i * 7)
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				Murmur2(key)
			}
		})
	}
}

func BenchmarkPartitioner(b *testing.B) {
	rec := &Record{Topic: "orders", Key: []byte("customer-12345")}
	cases := []struct {
		name string
		p    Partitioner
	}{
		{"default", DefaultPartitioner()},
		{"round-robin", RoundRobinPartitioner()},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = tc.p.Partition(rec, 24)
				}
			})
		})
	}
}
