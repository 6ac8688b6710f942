package avro_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/avro"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
)

const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"amount","type":"double"},
	{"name":"paid","type":"boolean"}]}`

type Order struct {
	ID       int64   `avro:"id"`
	Customer string  `avro:"customer"`
	Amount   float64 `avro:"amount"`
	Paid     bool    `avro:"paid"`
}

var (
	_ producer.Serializer[Order]       = (*avro.Serializer[Order])(nil)
	_ producer.AppendSerializer[Order] = (*avro.Serializer[Order])(nil)
)

// backward is the registry's BACKWARD check: the new schema reads data
// written with each existing one.
func backward(_, _ string, existing []fakeregistry.Schema, candidate fakeregistry.Schema) bool {
	reader, err := hamba.ParseWithCache(candidate.Schema, "", &hamba.SchemaCache{})
	if err != nil {
		return false
	}
	for _, e := range existing {
		writer, err := hamba.ParseWithCache(e.Schema, "", &hamba.SchemaCache{})
		if err != nil || hamba.NewSchemaCompatibility().Compatible(reader, writer) != nil {
			return false
		}
	}
	return true
}

func setup(t *testing.T) (*fakeregistry.Registry, *sr.Client) {
	t.Helper()
	fake, c := fakeregistry.Setup(t)
	fake.Compatible = backward
	return fake, c
}

func TestWireBytes(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	fake.SetNextID(0x0102)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	got, err := ser.Serialize("orders", Order{ID: 1, Customer: "ab", Amount: 0.5, Paid: true})
	require.NoError(t, err)
	want := []byte{0, 0, 0, 1, 2, // magic byte, id 0x0102
		2,           // id 1, zig-zag
		4, 'a', 'b', // "ab"
		0, 0, 0, 0, 0, 0, 0xe0, 0x3f, // 0.5, little-endian IEEE 754
		1} // true
	assert.Equal(t, want, got)
	assert.Equal(t, []fakeregistry.Schema{{Schema: orderSchema}}, fake.Versions("orders-value"))
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	t.Run("struct", func(t *testing.T) {
		ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
		require.NoError(t, err)
		in := Order{ID: 42, Customer: "ada", Amount: 9.75, Paid: true}
		b, err := ser.AppendSerialize([]byte("prefix"), "orders", in)
		require.NoError(t, err)
		out, err := avro.NewDeserializer[Order](c).Deserialize(ctx, "orders", b[len("prefix"):])
		require.NoError(t, err)
		assert.Equal(t, in, out)
	})
	t.Run("generic map", func(t *testing.T) {
		ser, err := avro.NewSerializer[map[string]any](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"generic"}})
		require.NoError(t, err)
		in := map[string]any{"id": int64(7), "customer": "bo", "amount": 1.5, "paid": false}
		b, err := ser.Serialize("generic", in)
		require.NoError(t, err)
		out, err := avro.NewDeserializer[map[string]any](c).Deserialize(ctx, "generic", b)
		require.NoError(t, err)
		assert.Equal(t, in, out)
		// A struct reader of the same bytes.
		typed, err := avro.NewDeserializer[Order](c).Deserialize(ctx, "generic", b)
		require.NoError(t, err)
		assert.Equal(t, Order{ID: 7, Customer: "bo", Amount: 1.5}, typed)
	})
	t.Run("primitive", func(t *testing.T) {
		ser, err := avro.NewSerializer[string](ctx, c, `"string"`, sr.SerializerConfig{IsKey: true, Topics: []string{"orders"}})
		require.NoError(t, err)
		b, err := ser.Serialize("orders", "key-1")
		require.NoError(t, err)
		out, err := avro.NewDeserializer[string](c).Deserialize(ctx, "orders", b)
		require.NoError(t, err)
		assert.Equal(t, "key-1", out)
	})
	t.Run("any", func(t *testing.T) {
		ser, err := avro.NewSerializer[any](ctx, c, `"long"`, sr.SerializerConfig{Topics: []string{"any"}})
		require.NoError(t, err)
		b, err := ser.Serialize("any", int64(5))
		require.NoError(t, err)
		out, err := avro.NewDeserializer[int64](c).Deserialize(ctx, "any", b)
		require.NoError(t, err)
		assert.EqualValues(t, 5, out)
	})
}

// TestIncompatibleSchemaFailsConstruction: the registry's 409 and its
// message come back from the constructor.
func TestIncompatibleSchemaFailsConstruction(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	_, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	// A new field without a default cannot read the old records.
	v2 := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"region","type":"string"}]}`
	_, err = avro.NewSerializer[map[string]any](ctx, c, v2, sr.SerializerConfig{Topics: []string{"orders"}})
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.StatusCode)
	assert.Equal(t, sr.CodeIncompatibleSchema, se.Code)
	assert.Contains(t, err.Error(), "incompatible with an earlier schema")
}

func TestRegistryDownFailsConstructionWithinItsContext(t *testing.T) {
	fakeregistry.RequireBoundedByContext(t, func(ctx context.Context, c *sr.Client) error {
		_, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
		return err
	})
}

// TestSendsKeepGoingWithRegistryDown: once constructed, a serializer never
// calls the registry, so Sends succeed while it is down.
func TestSendsKeepGoingWithRegistryDown(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	var in []Order
	for i := range 50 {
		in = append(in, Order{ID: int64(i), Customer: fmt.Sprint("c", i), Amount: float64(i) / 4})
	}
	values := fakeregistry.SendWithRegistryDown(t, fake, ser, "orders", in)
	require.Len(t, values, len(in))
	// The deserializer has the schema cached from the serializer's
	// registration: it reads back without the registry too.
	d := avro.NewDeserializer[Order](c)
	for i, v := range values {
		out, err := d.Deserialize(ctx, "orders", v)
		require.NoError(t, err)
		assert.Equal(t, in[i], out)
	}
}

func TestTopicsMustBeRegisteredFirst(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	before := len(fake.Requests())
	dst, err := ser.AppendSerialize([]byte("x"), "refunds", Order{})
	require.ErrorIs(t, err, sr.ErrTopicNotRegistered)
	assert.Equal(t, []byte("x"), dst)
	assert.Len(t, fake.Requests(), before, "Serialize never calls the registry")

	require.NoError(t, ser.Register(ctx, "refunds"))
	_, err = ser.Serialize("refunds", Order{})
	require.NoError(t, err)
	id1, err := ser.SchemaID("orders")
	require.NoError(t, err)
	id2, err := ser.SchemaID("refunds")
	require.NoError(t, err)
	assert.Equal(t, id1, id2)
	assert.Len(t, fake.Versions("refunds-value"), 1)
}

func TestRecordNameStrategyServesEveryTopic(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{SubjectNameStrategy: sr.RecordNameStrategy})
	require.NoError(t, err)
	for _, topic := range []string{"a", "b"} {
		_, err := ser.Serialize(topic, Order{})
		require.NoError(t, err)
	}
	assert.Len(t, fake.Versions("shop.Order"), 1)
}

func TestLookupWithoutAutoRegister(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	cfg := sr.SerializerConfig{Topics: []string{"orders"}, DisableAutoRegister: true}
	_, err := avro.NewSerializer[Order](ctx, c, orderSchema, cfg)
	require.True(t, sr.IsNotFound(err), "%v", err)
	assert.Empty(t, fake.Versions("orders-value"), "nothing registered")

	_, err = c.Register(ctx, "orders-value", sr.Schema{Schema: orderSchema}, false)
	require.NoError(t, err)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, cfg)
	require.NoError(t, err)
	_, err = ser.Serialize("orders", Order{})
	require.NoError(t, err)
}

func TestUseLatestVersionWritesWithTheLatestSchema(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	v2 := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},{"name":"paid","type":"boolean"},{"name":"note","type":"string","default":"none"}]}`
	_, err := c.Register(ctx, "orders-value", sr.Schema{Schema: orderSchema}, false)
	require.NoError(t, err)
	latest, err := c.Register(ctx, "orders-value", sr.Schema{Schema: v2}, false)
	require.NoError(t, err)

	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}, UseLatestVersion: true, DisableAutoRegister: true})
	require.NoError(t, err)
	b, err := ser.Serialize("orders", Order{ID: 3, Customer: "c"})
	require.NoError(t, err)
	id, _, err := sr.ParseHeader(b)
	require.NoError(t, err)
	assert.Equal(t, latest, id)
	out, err := avro.NewDeserializer[map[string]any](c).Deserialize(ctx, "orders", b)
	require.NoError(t, err)
	assert.Equal(t, "none", out["note"], "the field Order lacks gets the latest schema's default")
}

func TestSetSchemaSwapsForEveryTopic(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	ser, err := avro.NewSerializer[map[string]any](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"a", "b"}})
	require.NoError(t, err)
	old, err := ser.SchemaID("a")
	require.NoError(t, err)
	v2 := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},{"name":"paid","type":"boolean"},{"name":"tip","type":"double","default":0}]}`
	require.NoError(t, ser.SetSchema(ctx, v2))
	for _, topic := range []string{"a", "b"} {
		id, err := ser.SchemaID(topic)
		require.NoError(t, err)
		assert.NotEqual(t, old, id)
	}
	require.Error(t, ser.SetSchema(ctx, `{"type":"record"`), "a schema that does not parse")
	_, err = ser.Serialize("a", map[string]any{"id": int64(1), "customer": "x", "amount": 1.0, "paid": true, "tip": 2.0})
	require.NoError(t, err, "the last good schema stays")
}

func TestReferences(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	money := `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"string"}]}`
	_, err := c.Register(ctx, "shop.Money", sr.Schema{Schema: money}, false)
	require.NoError(t, err)
	line := `{"type":"record","name":"Line","namespace":"shop","fields":[{"name":"sku","type":"string"},{"name":"price","type":"shop.Money"}]}`
	type Money struct {
		Cents    int64  `avro:"cents"`
		Currency string `avro:"currency"`
	}
	type Line struct {
		SKU   string `avro:"sku"`
		Price Money  `avro:"price"`
	}
	ser, err := avro.NewSerializer[Line](ctx, c, line, sr.SerializerConfig{
		Topics: []string{"lines"}, References: []sr.Reference{{Name: "shop.Money", Subject: "shop.Money", Version: 1}},
	})
	require.NoError(t, err)
	in := Line{SKU: "x-1", Price: Money{Cents: 250, Currency: "EUR"}}
	b, err := ser.Serialize("lines", in)
	require.NoError(t, err)
	// A fresh client fetches the schema by id, then its reference.
	fresh, err := sr.NewClient(sr.Config{URLs: []string{fake.URL()}})
	require.NoError(t, err)
	defer fresh.Close()
	out, err := avro.NewDeserializer[Line](fresh).Deserialize(ctx, "lines", b)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestDeserializeErrors(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	d := avro.NewDeserializer[Order](c)
	cases := []struct {
		name string
		in   []byte
		is   error
	}{
		{"null", nil, avro.ErrNull},
		{"short", []byte{0, 1}, sr.ErrInvalidWireFormat},
		{"magic", []byte{7, 0, 0, 0, 1, 2}, sr.ErrInvalidWireFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Deserialize(ctx, "t", tc.in)
			assert.ErrorIs(t, err, tc.is)
		})
	}
	_, err := d.Deserialize(ctx, "t", []byte{0, 0, 0, 0x30, 0x39, 2})
	assert.True(t, sr.IsNotFound(err), "an unknown id: %v", err)

	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"t"}})
	require.NoError(t, err)
	b, err := ser.Serialize("t", Order{Customer: "long enough"})
	require.NoError(t, err)
	_, err = d.Deserialize(ctx, "t", b[:len(b)-12])
	assert.Error(t, err, "a truncated payload")
	assert.False(t, errors.Is(err, sr.ErrInvalidWireFormat))
}

func TestAppendSerializeAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	ser, err := avro.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	buf := make([]byte, 0, 256)
	o := Order{ID: 1, Customer: "someone", Amount: 3.5, Paid: true}
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		if buf, err = ser.AppendSerialize(buf[:0], "orders", o); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
