package protobuf_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/samsa-go/samsa/producer"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb"
)

var (
	_ producer.Serializer[*testpb.Order]       = (*protobuf.Serializer[*testpb.Order])(nil)
	_ producer.AppendSerializer[*testpb.Order] = (*protobuf.Serializer[*testpb.Order])(nil)
)

func setup(t *testing.T) (*fakeregistry.Registry, *sr.Client) { return fakeregistry.Setup(t) }

func order() *testpb.Order {
	note := "leave at the door"
	return &testpb.Order{
		Id: 42, Customer: "ada", Amount: 9.75, Paid: true,
		Price:   &testpb.Money{Cents: 975, Currency: "EUR"},
		Tags:    []string{"gift"},
		Counts:  map[string]int32{"apples": 3},
		Status:  testpb.Status_STATUS_PAID,
		Created: timestamppb.New(time.Unix(1700000000, 0)),
		Payment: &testpb.Order_Card{Card: "4111"},
		Note:    &note,
		Lines:   []*testpb.Order_Line{{Sku: "x", Quantity: 2}},
	}
}

// TestImportsRegisteredFirst: the file's import becomes a reference,
// registered under its path; the well-known import is left to the
// registry.
func TestImportsRegisteredFirst(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	_, err := protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	subjects, err := c.Subjects(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"orders-value", "testpb/common.proto"}, subjects)

	common, err := protobuf.Render(testpb.File_testpb_common_proto)
	require.NoError(t, err)
	assert.Equal(t, []fakeregistry.Schema{{Schema: common, SchemaType: "PROTOBUF"}}, fake.Versions("testpb/common.proto"))
	main, err := protobuf.Render(testpb.File_testpb_order_proto)
	require.NoError(t, err)
	assert.Equal(t, []fakeregistry.Schema{{Schema: main, SchemaType: "PROTOBUF",
		References: []fakeregistry.Reference{{Name: "testpb/common.proto", Subject: "testpb/common.proto", Version: 1}}}},
		fake.Versions("orders-value"))
}

func TestWireBytes(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	fake.SetNextID(9)
	cases := []struct {
		name    string
		ser     func() ([]byte, error)
		indexes []byte
		msg     proto.Message
	}{
		{"first message", func() ([]byte, error) {
			s, err := protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"a"}})
			require.NoError(t, err)
			return s.Serialize("a", order())
		}, []byte{0}, order()},
		{"second message", func() ([]byte, error) {
			s, err := protobuf.NewSerializer[*testpb.Flat](ctx, c, sr.SerializerConfig{Topics: []string{"b"}})
			require.NoError(t, err)
			return s.Serialize("b", &testpb.Flat{Id: 1})
		}, []byte{2, 2}, &testpb.Flat{Id: 1}},
		{"nested three deep", func() ([]byte, error) {
			s, err := protobuf.NewSerializer[*testpb.Envelope_Inner_Deep](ctx, c, sr.SerializerConfig{Topics: []string{"c"}})
			require.NoError(t, err)
			return s.Serialize("c", &testpb.Envelope_Inner_Deep{Text: "t"})
		}, []byte{6, 4, 0, 0}, &testpb.Envelope_Inner_Deep{Text: "t"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ser()
			require.NoError(t, err)
			id, rest, err := sr.ParseHeader(got)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, id, 9)
			payload, err := proto.MarshalOptions{}.Marshal(tc.msg)
			require.NoError(t, err)
			assert.Equal(t, append(append([]byte{}, tc.indexes...), payload...), rest)
		})
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	ser, err := protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	b, err := ser.AppendSerialize([]byte("prefix"), "orders", order())
	require.NoError(t, err)
	got, err := protobuf.NewDeserializer[*testpb.Order](c).Deserialize(ctx, "orders", b[len("prefix"):])
	require.NoError(t, err)
	assert.True(t, proto.Equal(order(), got), "%v", got)

	deep, err := protobuf.NewSerializer[*testpb.Envelope_Inner_Deep](ctx, c, sr.SerializerConfig{SubjectNameStrategy: sr.RecordNameStrategy})
	require.NoError(t, err)
	b, err = deep.Serialize("any", &testpb.Envelope_Inner_Deep{Text: "deep"})
	require.NoError(t, err)
	d, err := protobuf.NewDeserializer[*testpb.Envelope_Inner_Deep](c).Deserialize(ctx, "any", b)
	require.NoError(t, err)
	assert.Equal(t, "deep", d.Text)
	subjects, err := c.Subjects(ctx)
	require.NoError(t, err)
	assert.Contains(t, subjects, "samsa.test.Envelope.Inner.Deep")

	// A reader of another type is told which message the record holds.
	_, err = protobuf.NewDeserializer[*testpb.Flat](c).Deserialize(ctx, "any", b)
	require.ErrorContains(t, err, "writes samsa.test.Envelope.Inner.Deep, not samsa.test.Flat")
}

func TestIncompatibleSchemaFailsConstruction(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	_, err := c.Register(ctx, "orders-value", sr.Schema{Schema: `syntax = "proto3"; message Old { string a = 1; }`, Type: sr.Protobuf}, false)
	require.NoError(t, err)
	fake.Compatible = func(string, string, []fakeregistry.Schema, fakeregistry.Schema) bool { return false }
	_, err = protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.StatusCode)
	assert.Contains(t, err.Error(), "incompatible")
}

func TestRegistryDownFailsConstructionWithinItsContext(t *testing.T) {
	fakeregistry.RequireBoundedByContext(t, func(ctx context.Context, c *sr.Client) error {
		_, err := protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
		return err
	})
}

// TestSendsKeepGoingWithRegistryDown: once constructed, a serializer never
// calls the registry.
func TestSendsKeepGoingWithRegistryDown(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := protobuf.NewSerializer[*testpb.Flat](ctx, c, sr.SerializerConfig{Topics: []string{"flat"}})
	require.NoError(t, err)
	var in []*testpb.Flat
	for i := range 50 {
		in = append(in, &testpb.Flat{Id: int64(i), Customer: fmt.Sprint("c", i)})
	}
	values := fakeregistry.SendWithRegistryDown(t, fake, ser, "flat", in)
	require.Len(t, values, len(in))
	d := protobuf.NewDeserializer[*testpb.Flat](c)
	for i, v := range values {
		out, err := d.Deserialize(ctx, "flat", v)
		require.NoError(t, err)
		assert.True(t, proto.Equal(in[i], out))
	}
}

func TestSerializeErrors(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	before := len(fake.Requests())
	_, err = ser.Serialize("other", order())
	require.ErrorIs(t, err, sr.ErrTopicNotRegistered)
	assert.Len(t, fake.Requests(), before)
	require.NoError(t, ser.Register(ctx, "other"))
	_, err = ser.Serialize("other", order())
	require.NoError(t, err)

	_, err = protobuf.NewSerializer[proto.Message](ctx, c, sr.SerializerConfig{Topics: []string{"x"}})
	require.ErrorContains(t, err, "generated message type")
}

func TestLookupWithoutAutoRegister(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	cfg := sr.SerializerConfig{Topics: []string{"orders"}, DisableAutoRegister: true}
	_, err := protobuf.NewSerializer[*testpb.Order](ctx, c, cfg)
	require.True(t, sr.IsNotFound(err), "%v", err)
	subjects, err := c.Subjects(ctx)
	require.NoError(t, err)
	assert.Empty(t, subjects, "nothing registered, not even the import")

	_, err = protobuf.NewSerializer[*testpb.Order](ctx, c, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	fresh, err := sr.NewClient(sr.Config{URLs: []string{fake.URL()}})
	require.NoError(t, err)
	defer fresh.Close()
	_, err = protobuf.NewSerializer[*testpb.Order](ctx, fresh, cfg)
	require.NoError(t, err)
}

func TestDeserializeErrors(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	d := protobuf.NewDeserializer[*testpb.Order](c)
	_, err := d.Deserialize(ctx, "t", nil)
	assert.ErrorIs(t, err, protobuf.ErrNull)
	for _, in := range [][]byte{{0, 0, 0}, {1, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 1, 0x80}, {0, 0, 0, 0, 1, 3}} {
		_, err := d.Deserialize(ctx, "t", in)
		assert.ErrorIs(t, err, sr.ErrInvalidWireFormat, "%x", in)
	}
	id, err := c.Register(ctx, "avro", sr.Schema{Schema: `"string"`}, false)
	require.NoError(t, err)
	_, err = d.Deserialize(ctx, "t", append(sr.AppendHeader(nil, id), 0))
	assert.ErrorContains(t, err, "not PROTOBUF")
}

func TestAppendSerializeAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	ser, err := protobuf.NewSerializer[*testpb.Flat](ctx, c, sr.SerializerConfig{Topics: []string{"flat"}})
	require.NoError(t, err)
	m := &testpb.Flat{Id: 1, Customer: "someone", Amount: 3.5, Paid: true, Sku: "x"}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		if buf, err = ser.AppendSerialize(buf[:0], "flat", m); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
