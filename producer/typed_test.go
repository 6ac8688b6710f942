package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

type order struct {
	ID  int    `json:"id"`
	SKU string `json:"sku"`
}

func TestTypedEncode(t *testing.T) {
	ts := time.UnixMilli(1700000000000)
	hdrs := []Header{{Key: "h", Value: []byte("v")}}
	tp := NewTyped(&Producer{}, StringSerializer{}, JSONSerializer[order]{})
	s := new(typedScratch)
	err := tp.encode(s, &TypedRecord[string, order]{
		Topic: "orders", Partition: 3, ExplicitPartition: true, Headers: hdrs, Timestamp: ts,
		Key: "customer-1", Value: order{ID: 1, SKU: "x"},
	})
	require.NoError(t, err)
	assert.Equal(t, "orders", s.rec.Topic)
	assert.Equal(t, int32(3), s.rec.Partition)
	assert.True(t, s.rec.ExplicitPartition)
	assert.Equal(t, hdrs, s.rec.Headers)
	assert.Equal(t, ts, s.rec.Timestamp)
	assert.Equal(t, "customer-1", string(s.rec.Key))
	assert.JSONEq(t, `{"id":1,"sku":"x"}`, string(s.rec.Value))
}

func TestTypedKeysAndNulls(t *testing.T) {
	cases := []struct {
		name     string
		encode   func(s *typedScratch) error
		wantKey  []byte
		wantNull bool
	}{
		{
			"nil key serializer gives null keys",
			func(s *typedScratch) error {
				return NewTyped[int, string](&Producer{}, nil, StringSerializer{}).
					encode(s, &TypedRecord[int, string]{Topic: "t", Key: 5, Value: "v"})
			},
			nil, true,
		},
		{
			"nil []byte key stays null",
			func(s *typedScratch) error {
				return NewTyped(&Producer{}, BytesSerializer{}, StringSerializer{}).
					encode(s, &TypedRecord[[]byte, string]{Topic: "t", Value: "v"})
			},
			nil, true,
		},
		{
			"empty string key is empty, not null",
			func(s *typedScratch) error {
				return NewTyped(&Producer{}, StringSerializer{}, StringSerializer{}).
					encode(s, &TypedRecord[string, string]{Topic: "t", Key: "", Value: "v"})
			},
			[]byte{}, false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := new(typedScratch)
			require.NoError(t, tc.encode(s))
			assert.Equal(t, tc.wantNull, s.rec.Key == nil)
			assert.Equal(t, tc.wantKey, s.rec.Key)
			assert.Equal(t, "v", string(s.rec.Value))
		})
	}
}

// Key and value share the scratch buffer; a value that makes the buffer
// grow must not disturb the key.
func TestTypedKeySurvivesValueGrowth(t *testing.T) {
	tp := NewTyped(&Producer{}, StringSerializer{}, StringSerializer{})
	s := &typedScratch{buf: make([]byte, 0, 8)}
	big := strings.Repeat("v", 1000)
	require.NoError(t, tp.encode(s, &TypedRecord[string, string]{Topic: "t", Key: "key", Value: big}))
	assert.Equal(t, "key", string(s.rec.Key))
	assert.Equal(t, big, string(s.rec.Value))
	assert.Equal(t, 3, cap(s.rec.Key), "the key is capped so that appends cannot overwrite the value")
}

func TestTypedSerializerErrorsFailTheFuture(t *testing.T) {
	boom := errors.New("boom")
	failing := SerializerFunc[int](func(string, int) ([]byte, error) { return nil, boom })
	cases := []struct {
		name string
		tp   interface {
			Send(ctx context.Context, topic string, key int, value int) *Future
		}
		want string
	}{
		{"key", NewTyped[int, int](&Producer{}, failing, JSONSerializer[int]{}), `topic "t": serializing the key: boom`},
		{"value", NewTyped[int, int](&Producer{}, JSONSerializer[int]{}, failing), `topic "t": serializing the value: boom`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md, ok, err := tc.tp.Send(context.Background(), "t", 1, 2).Result()
			require.True(t, ok, "a serialization error completes the future at once")
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.ErrorIs(t, err, boom)
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, "t", md.Topic)
			assert.Equal(t, int64(-1), md.Offset)
		})
	}
}

func TestTypedSerializerErrorCallsCallback(t *testing.T) {
	boom := errors.New("boom")
	tp := NewTyped(&Producer{}, StringSerializer{}, SerializerFunc[string](func(string, string) ([]byte, error) { return nil, boom }))
	var got error
	calls := 0
	tp.SendCallback(context.Background(), &TypedRecord[string, string]{Topic: "t"}, func(_ RecordMetadata, err error) {
		calls++
		got = err
	})
	assert.Equal(t, 1, calls, "called once, before SendCallback returns")
	assert.ErrorIs(t, got, boom)
	assert.ErrorIs(t, got, ErrInvalidRecord)
}

func TestTypedNilRecord(t *testing.T) {
	tp := NewTyped(&Producer{}, StringSerializer{}, StringSerializer{})
	_, ok, err := tp.SendRecord(context.Background(), nil).Result()
	require.True(t, ok)
	assert.ErrorIs(t, err, ErrInvalidRecord)
}

func TestNewTypedNeedsValueSerializer(t *testing.T) {
	assert.Panics(t, func() { NewTyped[string, string](&Producer{}, StringSerializer{}, nil) })
	assert.Panics(t, func() { NewTyped[string, string](nil, StringSerializer{}, StringSerializer{}) })
}

// With append serializers, encoding reuses the scratch buffer: no
// allocation per record.
func TestTypedEncodeDoesNotAllocate(t *testing.T) {
	tp := NewTyped(&Producer{}, StringSerializer{}, StringSerializer{})
	rec := &TypedRecord[string, string]{Topic: "t", Key: "key", Value: "a value of some length"}
	s := new(typedScratch) // not from the pool: -race makes sync.Pool drop items
	allocs := testing.AllocsPerRun(100, func() {
		if err := tp.encode(s, rec); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// A huge record's buffer is not kept for reuse.
func TestTypedDropsHugeScratch(t *testing.T) {
	tp := NewTyped(&Producer{}, StringSerializer{}, StringSerializer{})
	s := &typedScratch{}
	require.NoError(t, tp.encode(s, &TypedRecord[string, string]{Topic: "t", Value: strings.Repeat("x", maxScratch+1)}))
	tp.release(s)
	assert.Nil(t, s.rec.Value, "references to the record are dropped on release")
	got := tp.scratch.Get().(*typedScratch)
	assert.Less(t, cap(got.buf), maxScratch)
}

func BenchmarkTypedEncode(b *testing.B) {
	tp := NewTyped(&Producer{}, StringSerializer{}, StringSerializer{})
	rec := &TypedRecord[string, string]{Topic: "t", Key: "customer-12345", Value: strings.Repeat("v", 100)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s := tp.scratch.Get().(*typedScratch)
			_ = tp.encode(s, rec)
			tp.release(s)
		}
	})
}

// End to end against the test broker: typed records arrive serialized, keyed
// records in the partition a Java producer would choose, and a nil key
// serializer gives null keys.
func TestTypedProducerDelivers(t *testing.T) {
	cluster, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { cluster.Close() })
	const partitions = 3
	require.NoError(t, cluster.CreateTopic("orders", partitions))
	require.NoError(t, cluster.CreateTopic("audit", 1))

	p, err := New(Config{Brokers: cluster.Addrs(), Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	orders := NewTyped(p, StringSerializer{}, JSONSerializer[order]{})
	audit := NewTyped[struct{}, string](p, nil, StringSerializer{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 60
	var futures []*Future
	for i := range n {
		futures = append(futures, orders.Send(ctx, "orders", fmt.Sprintf("customer-%d", i%7), order{ID: i, SKU: "sku"}))
	}
	futures = append(futures, audit.SendRecord(ctx, &TypedRecord[struct{}, string]{
		Topic: "audit", Value: "hello", Headers: []Header{{Key: "who", Value: []byte("test")}},
	}))
	cbDone := make(chan error, 1)
	orders.SendCallback(ctx, &TypedRecord[string, order]{Topic: "orders", Key: "cb", Value: order{ID: n}},
		func(_ RecordMetadata, err error) { cbDone <- err })
	for i, f := range futures {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
	}
	require.NoError(t, <-cbDone)

	seen := 0
	for part := range int32(partitions) {
		recs, err := cluster.Records("orders", part)
		require.NoError(t, err)
		for _, r := range recs {
			seen++
			assert.Equal(t, part, KeyPartition(r.Key, partitions), "key %q in partition %d", r.Key, part)
			var o order
			require.NoError(t, json.Unmarshal(r.Value, &o))
			assert.Equal(t, "cb" == string(r.Key), o.ID == n)
		}
	}
	assert.Equal(t, n+1, seen)

	recs, err := cluster.Records("audit", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Nil(t, recs[0].Key, "null key")
	assert.Equal(t, "hello", string(recs[0].Value))
	require.Len(t, recs[0].Headers, 1)
}

// SendTo delivers one TypedResult per record, carrying the caller's typed
// record; a serialization error arrives before SendTo returns; a nil
// channel panics.
func TestTypedSendToDeliversEveryResult(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("orders", 2))
	p := newProducer(t, c, Config{})
	orders := NewTyped(p, StringSerializer{}, JSONSerializer[order]{})

	const n = 50
	results := make(chan TypedResult[string, order], n)
	recs := make([]*TypedRecord[string, order], n)
	for i := range recs {
		recs[i] = &TypedRecord[string, order]{Topic: "orders", Key: fmt.Sprint(i), Value: order{ID: i}}
		orders.SendTo(context.Background(), recs[i], results)
	}
	seen := map[*TypedRecord[string, order]]bool{}
	for range recs {
		r := <-results
		require.NoError(t, r.Err)
		assert.Equal(t, "orders", r.Metadata.Topic)
		assert.GreaterOrEqual(t, r.Metadata.Offset, int64(0))
		require.False(t, seen[r.Record], "one result per record")
		seen[r.Record] = true
	}
	for _, rec := range recs {
		assert.True(t, seen[rec], "record %s delivered with its own pointer", rec.Key)
	}

	boom := errors.New("boom")
	bad := NewTyped(p, StringSerializer{}, SerializerFunc[int](func(string, int) ([]byte, error) { return nil, boom }))
	badResults := make(chan TypedResult[string, int], 1)
	badRec := &TypedRecord[string, int]{Topic: "orders"}
	bad.SendTo(context.Background(), badRec, badResults)
	require.Len(t, badResults, 1, "a serialization error is delivered before SendTo returns")
	r := <-badResults
	assert.Same(t, badRec, r.Record)
	assert.ErrorIs(t, r.Err, ErrInvalidRecord)
	assert.ErrorIs(t, r.Err, boom)
	assert.Equal(t, int64(-1), r.Metadata.Offset)

	assert.Panics(t, func() { orders.SendTo(context.Background(), recs[0], nil) })
}

// TrySend delivers like SendRecord, fails a serialization error at once,
// and fails with ErrBufferExhausted instead of waiting for memory (MaxBlock
// is a minute here: a TrySend that waited would hang the test).
func TestTypedTrySend(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{BufferMemory: 64 << 10, BatchSize: 16 << 10, MaxBlock: time.Minute, Linger: -1})
	tp := NewTyped(p, StringSerializer{}, StringSerializer{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	md, err := tp.TrySend(ctx, &TypedRecord[string, string]{Topic: "t", Key: "k", Value: "v"}).Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), md.Offset)
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "k", string(recs[0].Key))
	assert.Equal(t, "v", string(recs[0].Value))

	_, err = tp.TrySend(ctx, nil).Wait(ctx)
	assert.ErrorIs(t, err, ErrInvalidRecord)

	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Stall: true})
	defer remove()
	value := strings.Repeat("v", 1000)
	var pending []*Future
	var exhausted error
	for range 1000 {
		f := tp.TrySend(ctx, &TypedRecord[string, string]{Topic: "t", Value: value})
		select {
		case <-f.Done():
			_, err := f.Wait(ctx)
			if errors.Is(err, ErrBufferExhausted) {
				exhausted = err
			}
		default:
			pending = append(pending, f)
		}
		if exhausted != nil {
			break
		}
	}
	require.ErrorIs(t, exhausted, ErrBufferExhausted, "64 KiB of buffer fills up within 1000 records of 1 KB")
	remove()
	waitAll(t, pending)
}
