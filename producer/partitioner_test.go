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

// TestExplicitPartitionWinsOverThePartitioner: a record with
// ExplicitPartition (Java's ProducerRecord with a partition) goes to its
// Partition with any partitioner, which is not called for it, whether its
// topic was known at Send or parked; one out of range fails naming the
// topic, the partition and the count, never silently going elsewhere.
func TestExplicitPartitionWinsOverThePartitioner(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 3))
	var called atomic.Int32
	counting := PartitionerFunc(func(*Record, int32) (int32, error) { called.Add(1); return 0, nil })
	cases := []struct {
		name   string
		pt     Partitioner
		parked string // a topic created only after the Sends
	}{
		{"default", nil, "later-default"},
		{"round robin", RoundRobinPartitioner(), "later-rr"},
		{"custom", counting, "later-custom"},
		{"manual", ManualPartitioner(), "later-manual"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := newProducer(t, c, Config{Partitioner: tc.pt, Linger: NoWait})
			// Known first, so that these are partitioned in Send.
			md, err := p.Send(ctx, &Record{Topic: "known", Partition: 2, ExplicitPartition: true, Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, int32(2), md.Partition)

			var fs []*Future
			for i := range 9 {
				rec := &Record{Topic: "known", Key: []byte(fmt.Sprint(i)), Partition: int32(i % 3), ExplicitPartition: true}
				fs = append(fs, p.Send(ctx, rec))
			}
			parked0 := p.Send(ctx, &Record{Topic: tc.parked, Partition: 0, ExplicitPartition: true})
			parked1 := p.Send(ctx, &Record{Topic: tc.parked, Key: []byte("k"), Partition: 1, ExplicitPartition: true})
			parkedBad := p.Send(ctx, &Record{Topic: tc.parked, Partition: 5, ExplicitPartition: true})
			_, err = p.Send(ctx, &Record{Topic: "known", Partition: 3, ExplicitPartition: true}).Wait(ctx)
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorContains(t, err, `partition 3 of topic "known" is out of range: the topic has 3 partitions`)
			for _, topic := range []string{"known", tc.parked} {
				_, err = p.Send(ctx, &Record{Topic: topic, Partition: -1, ExplicitPartition: true}).Wait(ctx)
				require.ErrorIs(t, err, ErrInvalidRecord, "a negative partition fails in Send, even for a parked topic")
				require.ErrorContains(t, err, `partition -1 of topic "`+topic+`" is negative`)
			}

			require.NoError(t, c.CreateTopic(tc.parked, 2))
			_, err = parkedBad.Wait(ctx)
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorContains(t, err, `partition 5 of topic "`+tc.parked+`" is out of range: the topic has 2 partitions`)
			for want, f := range []*Future{parked0, parked1} {
				md, err := f.Wait(ctx)
				require.NoError(t, err)
				assert.Equal(t, int32(want), md.Partition, "parked record")
			}
			for i, md := range waitAll(t, fs) {
				assert.Equal(t, int32(i%3), md.Partition, "record %d", i)
			}
		})
	}
	assert.Zero(t, called.Load(), "the partitioner is not called for records with ExplicitPartition")
}

// TestPartitionWithoutExplicitPartitionFails: a non-zero Partition without
// ExplicitPartition, under a partitioner that would ignore it, fails in Send
// (known topic or parked) and says how to ask for it; a zero Partition is
// the zero value, and the partitioner decides, seeing Partition 0 also for
// a parked record.
func TestPartitionWithoutExplicitPartitionFails(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 3))
	var mu sync.Mutex
	var seen []int32 // the Partition the custom partitioner was given
	custom := PartitionerFunc(func(rec *Record, _ int32) (int32, error) {
		mu.Lock()
		seen = append(seen, rec.Partition)
		mu.Unlock()
		return 1, nil
	})
	cases := []struct {
		name   string
		pt     Partitioner
		parked string
	}{
		{"default", nil, "zero-default"},
		{"round robin", RoundRobinPartitioner(), "zero-rr"},
		{"custom", custom, "zero-custom"},
		{"ignore keys", ignoreKeysPartitioner{}, "zero-ignore"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := newProducer(t, c, Config{Partitioner: tc.pt, Linger: NoWait})
			_, err := p.Send(ctx, &Record{Topic: "known", Value: []byte("warm")}).Wait(ctx)
			require.NoError(t, err)
			for _, topic := range []string{"known", tc.parked} {
				for _, part := range []int32{2, -1} {
					_, err := p.Send(ctx, &Record{Topic: topic, Partition: part, Value: []byte("v")}).Wait(ctx)
					require.ErrorIs(t, err, ErrInvalidRecord)
					require.ErrorContains(t, err, fmt.Sprintf("topic %q: Partition is %d without ExplicitPartition", topic, part))
					require.ErrorContains(t, err, "set ExplicitPartition (or use ManualPartitioner)")
				}
			}
			parked := p.Send(ctx, &Record{Topic: tc.parked, Value: []byte("v")})
			require.NoError(t, c.CreateTopic(tc.parked, 3))
			_, err = parked.Wait(ctx)
			require.NoError(t, err, "a zero Partition is left to the partitioner")
		})
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int32{0, 0}, seen, "the custom partitioner sees Partition 0, in Send and for a parked record")
}

// TestManualPartitionerUsesPartition: with ManualPartitioner every record
// goes to its Partition, 0 included, with or without ExplicitPartition, as
// before ExplicitPartition existed; one out of range fails naming the
// count, in Send or (parked) once the partitions are known.
func TestManualPartitionerUsesPartition(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("known", 2))
	p := newProducer(t, c, Config{Partitioner: ManualPartitioner(), Linger: NoWait})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct {
		name     string
		part     int32
		explicit bool
		wantErr  string // with %s for the topic and %d for the count
	}{
		{"zero value", 0, false, ""},
		{"one", 1, false, ""},
		{"explicit zero", 0, true, ""},
		{"explicit one", 1, true, ""},
		{"out of range", 2, false, `partition 2 of topic "%s" is out of range: the topic has %d partitions`},
		{"negative", -1, false, `partition -1 of topic "%s" is out of range: the topic has %d partitions`},
	}
	type sent struct {
		f    *Future
		want string
	}
	var parked []sent
	for _, tc := range cases {
		rec := &Record{Topic: "later", Partition: tc.part, ExplicitPartition: tc.explicit, Value: []byte(tc.name)}
		parked = append(parked, sent{p.Send(ctx, rec), tc.wantErr})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md, err := p.Send(ctx, &Record{Topic: "known", Partition: tc.part, ExplicitPartition: tc.explicit}).Wait(ctx)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.part, md.Partition)
				return
			}
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.ErrorContains(t, err, fmt.Sprintf(tc.wantErr, "known", 2))
		})
	}
	require.NoError(t, c.CreateTopic("later", 2))
	for i, tc := range cases {
		md, err := parked[i].f.Wait(ctx)
		if tc.wantErr == "" {
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.part, md.Partition, tc.name)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidRecord, tc.name)
		require.ErrorContains(t, err, fmt.Sprintf(tc.wantErr, "later", 2), tc.name)
	}
}

func TestCheckRecordPartition(t *testing.T) {
	cases := []struct {
		name     string
		pt       Partitioner
		part     int32
		explicit bool
		wantErr  string
	}{
		{"zero value, default", DefaultPartitioner(), 0, false, ""},
		{"zero value, custom", PartitionerFunc(nil), 0, false, ""},
		{"explicit zero", DefaultPartitioner(), 0, true, ""},
		{"explicit", RoundRobinPartitioner(), 7, true, ""},
		{"explicit, manual", ManualPartitioner(), 7, true, ""},
		{"explicit negative", DefaultPartitioner(), -1, true, `partition -1 of topic "t" is negative`},
		{"explicit negative, manual", ManualPartitioner(), -3, true, `partition -3 of topic "t" is negative`},
		{"without the flag, default", DefaultPartitioner(), 2, false, `topic "t": Partition is 2 without ExplicitPartition`},
		{"without the flag, negative", RoundRobinPartitioner(), -1, false, "set ExplicitPartition (or use ManualPartitioner)"},
		{"without the flag, custom", PartitionerFunc(nil), 1, false, "set ExplicitPartition"},
		{"without the flag, manual", ManualPartitioner(), 2, false, ""},
		{"without the flag, manual, negative", ManualPartitioner(), -1, false, ""}, // out of range later, as before
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRecordPartition(tc.pt, &Record{Topic: "t", Partition: tc.part, ExplicitPartition: tc.explicit})
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestParkedPartition(t *testing.T) {
	cases := []struct {
		name     string
		pt       Partitioner
		part     int32
		explicit bool
		want     int32
	}{
		{"zero value", DefaultPartitioner(), 0, false, UnknownPartition},
		{"explicit zero", DefaultPartitioner(), 0, true, 0},
		{"explicit", PartitionerFunc(nil), 4, true, 4},
		{"manual zero value", ManualPartitioner(), 0, false, 0},
		{"manual", ManualPartitioner(), 3, false, 3},
		{"manual negative", ManualPartitioner(), -2, false, -2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, parkedPartition(tc.pt, &Record{Partition: tc.part, ExplicitPartition: tc.explicit}))
		})
	}
}
