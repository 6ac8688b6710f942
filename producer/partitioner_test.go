package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
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
			rec := &Record{Topic: "t", Key: tc.key}
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
			got, err := p.Partition(&Record{Topic: "orders", Partition: ToPartition(tc.part), Key: []byte("k")}, tc.n)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.part, got)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
	// A record without a partition is an error, not partition 0.
	_, err := p.Partition(&Record{Topic: "orders", Key: []byte("k")}, 3)
	assert.ErrorIs(t, err, ErrInvalidRecord)
	assert.ErrorContains(t, err, "ManualPartitioner needs one")
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
	rec := &Record{Topic: "t", Key: []byte("some-key"), Partition: ToPartition(1)}
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

// TestRecordPartitionWinsOverThePartitioner: a record that names its
// partition (Java's ProducerRecord with a partition) goes there with any
// partitioner, which is not called for it, whether its topic was known at
// Send or parked; one out of range fails naming the topic, the partition and
// the count, never silently going elsewhere.
func TestRecordPartitionWinsOverThePartitioner(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 3))
	var called atomic.Int32
	counting := PartitionerFunc(func(*Record, int32) (int32, error) { called.Add(1); return 0, nil })
	cases := []struct {
		name string
		pt   Partitioner
	}{
		{"default", nil},
		{"round robin", RoundRobinPartitioner()},
		{"custom", counting},
		{"manual", ManualPartitioner()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := newProducer(t, c, Config{Partitioner: tc.pt, Linger: NoWait})
			later := "later-" + tc.name[:3]
			// Known first, so that these are partitioned in Send.
			_, err := p.Send(ctx, &Record{Topic: "known", Partition: ToPartition(2), Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)

			var fs []*Future
			for i := range 9 {
				fs = append(fs, p.Send(ctx, &Record{Topic: "known", Key: []byte(fmt.Sprint(i)), Partition: ToPartition(int32(i % 3))}))
			}
			parked := p.Send(ctx, &Record{Topic: later, Key: []byte("k"), Partition: ToPartition(1)})
			parkedBad := p.Send(ctx, &Record{Topic: later, Partition: ToPartition(5)})
			_, err = p.Send(ctx, &Record{Topic: "known", Partition: ToPartition(3)}).Wait(ctx)
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorContains(t, err, `partition 3 of topic "known" is out of range: the topic has 3 partitions`)
			_, err = p.Send(ctx, &Record{Topic: later, Partition: ToPartition(-1)}).Wait(ctx)
			require.ErrorIs(t, err, ErrInvalidRecord, "a negative partition fails in Send, even for a parked topic")
			require.ErrorContains(t, err, `partition -1 of topic "`+later+`" is negative`)

			time.Sleep(50 * time.Millisecond) // parked: the topic does not exist yet
			require.NoError(t, c.CreateTopic(later, 2))
			_, err = parkedBad.Wait(ctx)
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorContains(t, err, `partition 5 of topic "`+later+`" is out of range: the topic has 2 partitions`)
			md, err := parked.Wait(ctx)
			require.NoError(t, err)
			assert.Equal(t, int32(1), md.Partition, "parked record")
			for i, md := range waitAll(t, fs) {
				assert.Equal(t, int32(i%3), md.Partition, "record %d", i)
			}
		})
	}
	assert.Zero(t, called.Load(), "the partitioner is not called for records that name their partition")
}

// TestManualPartitionerFailsRecordsWithoutPartition: with ManualPartitioner
// every record must name its partition; one that does not fails, in Send or
// once parked, instead of landing on partition 0.
func TestManualPartitionerFailsRecordsWithoutPartition(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 2))
	p := newProducer(t, c, Config{Partitioner: ManualPartitioner()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	parked := p.Send(ctx, &Record{Topic: "later", Value: []byte("v")})
	_, err := p.Send(ctx, &Record{Topic: "known", Partition: ToPartition(1)}).Wait(ctx)
	require.NoError(t, err)
	_, err = p.Send(ctx, &Record{Topic: "known", Value: []byte("v")}).Wait(ctx)
	require.ErrorIs(t, err, ErrInvalidRecord)
	require.ErrorContains(t, err, "ManualPartitioner needs one")
	require.NoError(t, c.CreateTopic("later", 2))
	_, err = parked.Wait(ctx)
	require.ErrorIs(t, err, ErrInvalidRecord)
	require.ErrorContains(t, err, "ManualPartitioner needs one")
}

func TestPartitionChoice(t *testing.T) {
	var zero PartitionChoice
	id, ok := zero.Get()
	assert.False(t, ok, "the zero value lets the partitioner choose")
	assert.Zero(t, id)
	assert.Equal(t, "any", zero.String())
	id, ok = ToPartition(0).Get()
	assert.True(t, ok, "partition 0 is a choice, unlike the zero value")
	assert.Zero(t, id)
	assert.Equal(t, "7", ToPartition(7).String())
	for _, c := range []PartitionChoice{zero, ToPartition(0), ToPartition(3)} {
		assert.Equal(t, c, fromParked(c.parked()), "%v survives parking", c)
	}
}

// TestParkedRecordsSeeTheirHeadersInThePartitioner: a custom Partitioner
// must see the same record whether or not the topic was known at Send: a
// parked record is partitioned later from its encoded body, and must still
// carry its headers (routing by a tenant header is common).
func TestParkedRecordsSeeTheirHeadersInThePartitioner(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	byHeader := PartitionerFunc(func(rec *Record, n int32) (int32, error) {
		for _, h := range rec.Headers {
			if h.Key == "p" {
				return int32(h.Value[0]) % n, nil
			}
		}
		return 0, fmt.Errorf("record %q has no header p", rec.Value)
	})
	p := newProducer(t, c, Config{Partitioner: byHeader})
	var fs []*Future
	for i := range 20 {
		fs = append(fs, p.Send(context.Background(), &Record{
			Topic: "later", Value: []byte(fmt.Sprint(i)), Headers: []Header{{Key: "p", Value: []byte{byte(i)}}},
		}))
	}
	time.Sleep(100 * time.Millisecond) // parked: the topic does not exist yet
	require.NoError(t, c.CreateTopic("later", 2))
	for i, md := range waitAll(t, fs) {
		require.Equal(t, int32(i%2), md.Partition, "record %d", i)
	}
}
