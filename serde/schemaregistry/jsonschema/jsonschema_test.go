package jsonschema_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/jsonschema"
)

const orderSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object",
"properties":{"id":{"type":"integer"},"customer":{"type":"string","minLength":1},"note":{"type":"string"}},
"required":["id","customer"]}`

type Order struct {
	ID       int64  `json:"id"`
	Customer string `json:"customer"`
	Note     string `json:"note,omitempty"`
}

var (
	_ producer.Serializer[Order]       = (*jsonschema.Serializer[Order])(nil)
	_ producer.AppendSerializer[Order] = (*jsonschema.Serializer[Order])(nil)
)

func setup(t *testing.T) (*fakeregistry.Registry, *sr.Client) { return fakeregistry.Setup(t) }

func TestWireBytesAndRoundTrip(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	fake.SetNextID(3)
	ser, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	got, err := ser.Serialize("orders", Order{ID: 1, Customer: "a<b"})
	require.NoError(t, err)
	assert.Equal(t, append([]byte{0, 0, 0, 0, 3}, `{"id":1,"customer":"a<b"}`...), got)
	assert.Equal(t, []fakeregistry.Schema{{Schema: orderSchema, SchemaType: "JSON"}}, fake.Versions("orders-value"))

	for _, validate := range []bool{false, true} {
		out, err := jsonschema.NewDeserializer[Order](c, jsonschema.DeserializerConfig{Validate: validate}).Deserialize(ctx, "orders", got)
		require.NoError(t, err)
		assert.Equal(t, Order{ID: 1, Customer: "a<b"}, out)
	}
	generic, err := jsonschema.NewDeserializer[map[string]any](c, jsonschema.DeserializerConfig{}).Deserialize(ctx, "orders", got)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"id": 1.0, "customer": "a<b"}, generic)
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	cases := []struct {
		name     string
		validate bool
		v        Order
		wantErr  bool
	}{
		{"valid", true, Order{ID: 1, Customer: "x"}, false},
		{"refused by the schema", true, Order{ID: 1}, true},
		{"not validated", false, Order{ID: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ser, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}, Validate: tc.validate})
			require.NoError(t, err)
			dst, err := ser.AppendSerialize([]byte("x"), "orders", tc.v)
			if tc.wantErr {
				require.ErrorIs(t, err, jsonschema.ErrInvalid)
				assert.Contains(t, err.Error(), "minLength")
				assert.Equal(t, []byte("x"), dst)
				return
			}
			require.NoError(t, err)
		})
	}

	// A reader that validates refuses what the schema refuses.
	ser, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	b, err := ser.Serialize("orders", Order{ID: 2})
	require.NoError(t, err)
	_, err = jsonschema.NewDeserializer[Order](c, jsonschema.DeserializerConfig{Validate: true}).Deserialize(ctx, "orders", b)
	require.ErrorIs(t, err, jsonschema.ErrInvalid)
}

func TestReferences(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	customer := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	_, err := c.Register(ctx, "customer", sr.Schema{Schema: customer, Type: sr.JSON}, false)
	require.NoError(t, err)
	order := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"customer":{"$ref":"customer.json"}},"required":["customer"]}`
	type Customer struct {
		Name string `json:"name"`
	}
	type Order struct {
		Customer *Customer `json:"customer,omitempty"`
	}
	ser, err := jsonschema.NewSerializer[Order](ctx, c, order, sr.SerializerConfig{
		Topics: []string{"orders"}, Validate: true,
		References: []sr.Reference{{Name: "customer.json", Subject: "customer", Version: 1}},
	})
	require.NoError(t, err)
	b, err := ser.Serialize("orders", Order{Customer: &Customer{Name: "ada"}})
	require.NoError(t, err)
	_, err = ser.Serialize("orders", Order{Customer: &Customer{}})
	require.NoError(t, err, "an empty name is still a string")
	_, err = ser.Serialize("orders", Order{})
	require.ErrorIs(t, err, jsonschema.ErrInvalid)

	fresh, err := sr.NewClient(sr.Config{URLs: []string{fake.URL()}})
	require.NoError(t, err)
	defer fresh.Close()
	out, err := jsonschema.NewDeserializer[Order](fresh, jsonschema.DeserializerConfig{Validate: true}).Deserialize(ctx, "orders", b)
	require.NoError(t, err)
	assert.Equal(t, "ada", out.Customer.Name)
}

// TestNothingLoadedFromFiles: a $ref that is not a registered reference
// fails; the validator never reads a file or the network.
func TestNothingLoadedFromFiles(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	schema := `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"x":{"$ref":"file:///etc/hostname"}}}`
	_, err := jsonschema.NewSerializer[map[string]any](ctx, c, schema, sr.SerializerConfig{Topics: []string{"t"}, Validate: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a registered reference")
}

func TestRecordNameIsTheTitle(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	_, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{SubjectNameStrategy: sr.TopicRecordNameStrategy, Topics: []string{"t"}})
	require.NoError(t, err)
	assert.Len(t, fake.Versions("t-Order"), 1)
	_, err = jsonschema.NewSerializer[Order](ctx, c, `{"type":"object"}`, sr.SerializerConfig{SubjectNameStrategy: sr.RecordNameStrategy})
	require.ErrorIs(t, err, sr.ErrNoRecordName)
	_, err = jsonschema.NewSerializer[Order](ctx, c, `{not json`, sr.SerializerConfig{Topics: []string{"t"}})
	require.ErrorContains(t, err, "not JSON")
}

func TestIncompatibleSchemaFailsConstruction(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	_, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
	require.NoError(t, err)
	fake.Compatible = func(string, string, []fakeregistry.Schema, fakeregistry.Schema) bool { return false }
	_, err = jsonschema.NewSerializer[Order](ctx, c, `{"type":"string"}`, sr.SerializerConfig{Topics: []string{"orders"}})
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.StatusCode)
}

func TestRegistryDownFailsConstructionWithinItsContext(t *testing.T) {
	fakeregistry.RequireBoundedByContext(t, func(ctx context.Context, c *sr.Client) error {
		_, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}})
		return err
	})
}

// TestSendsKeepGoingWithRegistryDown: validation included, a ready
// serializer never calls the registry.
func TestSendsKeepGoingWithRegistryDown(t *testing.T) {
	ctx := context.Background()
	fake, c := setup(t)
	ser, err := jsonschema.NewSerializer[Order](ctx, c, orderSchema, sr.SerializerConfig{Topics: []string{"orders"}, Validate: true})
	require.NoError(t, err)
	var in []Order
	for i := range 50 {
		in = append(in, Order{ID: int64(i), Customer: fmt.Sprint("c", i)})
	}
	values := fakeregistry.SendWithRegistryDown(t, fake, ser, "orders", in)
	require.Len(t, values, len(in))
	d := jsonschema.NewDeserializer[Order](c, jsonschema.DeserializerConfig{})
	for i, v := range values {
		out, err := d.Deserialize(ctx, "orders", v)
		require.NoError(t, err)
		assert.Equal(t, in[i], out)
	}
}

func TestDeserializeErrors(t *testing.T) {
	ctx := context.Background()
	_, c := setup(t)
	d := jsonschema.NewDeserializer[Order](c, jsonschema.DeserializerConfig{})
	_, err := d.Deserialize(ctx, "t", nil)
	assert.ErrorIs(t, err, jsonschema.ErrNull)
	_, err = d.Deserialize(ctx, "t", []byte(`{"id":1}`))
	assert.ErrorIs(t, err, sr.ErrInvalidWireFormat)
	id, err := c.Register(ctx, "avro", sr.Schema{Schema: `"string"`}, false)
	require.NoError(t, err)
	_, err = d.Deserialize(ctx, "t", append(sr.AppendHeader(nil, id), `{}`...))
	assert.ErrorContains(t, err, "not JSON")
}
