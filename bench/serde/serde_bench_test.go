// Package serde benchmarks samsa's Schema Registry serializers beside
// confluent-kafka-go's (schemaregistry/serde/avrov2 and .../protobuf) and
// franz-go's sr.Serde, with the same codecs (github.com/hamba/avro/v2 and
// google.golang.org/protobuf) and the same values: an Avro record of ten
// fields and a Protobuf message of the same shape (benchpb.Flat). Each
// serializer is ready before the timer starts (its schema registered with
// an in-process registry, or confluent's mock); the loop measures the
// serialization of one record into Confluent's wire format, as a producer
// calls it per record.
//
//	cd bench && go test -run '^$' -bench . -benchmem ./serde/
package serde

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	cserde "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	cavro "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
	cproto "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-go/samsa/bench/serde/benchpb"
	samsasr "github.com/samsa-go/samsa/serde/schemaregistry"
	samsaavro "github.com/samsa-go/samsa/serde/schemaregistry/avro"
	samsaproto "github.com/samsa-go/samsa/serde/schemaregistry/protobuf"
)

const flatSchema = `{"type":"record","name":"Flat","namespace":"samsa.test","fields":[
{"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},
{"name":"paid","type":"boolean"},{"name":"quantity","type":"int"},{"name":"sku","type":"string"},
{"name":"created_ms","type":"long"},{"name":"discount","type":"float"},{"name":"region","type":"string"},
{"name":"token","type":"bytes"}]}`

// Flat is the Avro record: ten fields, the shape of benchpb.Flat.
type Flat struct {
	ID        int64   `avro:"id"`
	Customer  string  `avro:"customer"`
	Amount    float64 `avro:"amount"`
	Paid      bool    `avro:"paid"`
	Quantity  int32   `avro:"quantity"`
	SKU       string  `avro:"sku"`
	CreatedMs int64   `avro:"created_ms"`
	Discount  float32 `avro:"discount"`
	Region    string  `avro:"region"`
	Token     []byte  `avro:"token"`
}

var parsedFlat = hamba.MustParse(flatSchema)

// Schema gives confluent's avrov2 serializer the schema (instead of
// deriving one from the struct per call).
func (*Flat) Schema() hamba.Schema { return parsedFlat }

var (
	flat = Flat{ID: 123456789, Customer: "customer-0042", Amount: 199.99, Paid: true, Quantity: 3,
		SKU: "SKU-000123", CreatedMs: 1700000000000, Discount: 0.15, Region: "eu-west-1", Token: []byte("0123456789abcdef")}
	flatPB = &benchpb.Flat{Id: flat.ID, Customer: flat.Customer, Amount: flat.Amount, Paid: flat.Paid, Quantity: flat.Quantity,
		Sku: flat.SKU, CreatedMs: flat.CreatedMs, Discount: flat.Discount, Region: flat.Region, Token: flat.Token}
)

const topic = "bench"

// registry is a minimal Confluent API for samsa's constructors: every
// registration gets id 1, every lookup finds version 1.
func registry(b *testing.B) *samsasr.Client {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/versions") {
			_, _ = w.Write([]byte(`{"id":1}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":1,"version":1}`))
	}))
	b.Cleanup(srv.Close)
	c, err := samsasr.NewClient(samsasr.Config{URLs: []string{srv.URL}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

func confluentClient(b *testing.B) schemaregistry.Client {
	b.Helper()
	c, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://bench"))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// run times enc, which appends one record to the buffer it is given.
func run(b *testing.B, enc func([]byte) ([]byte, error)) {
	b.Helper()
	buf := make([]byte, 0, 512)
	out, err := enc(buf)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if buf, err = enc(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvro(b *testing.B) {
	ctx := context.Background()
	b.Run("samsa", func(b *testing.B) {
		ser, err := samsaavro.NewSerializer[Flat](ctx, registry(b), flatSchema, samsasr.SerializerConfig{Topics: []string{topic}})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(dst []byte) ([]byte, error) { return ser.AppendSerialize(dst, topic, flat) })
	})
	b.Run("confluent", func(b *testing.B) {
		ser, err := cavro.NewSerializer(confluentClient(b), cserde.ValueSerde, cavro.NewSerializerConfig())
		if err != nil {
			b.Fatal(err)
		}
		v := flat
		run(b, func([]byte) ([]byte, error) { return ser.Serialize(topic, &v) })
	})
	b.Run("franz-go", func(b *testing.B) {
		var s sr.Serde
		s.Register(1, Flat{}, sr.EncodeFn(func(v any) ([]byte, error) { return hamba.Marshal(parsedFlat, v) }))
		run(b, func(dst []byte) ([]byte, error) { return s.AppendEncode(dst, flat) })
	})
}

func BenchmarkProtobuf(b *testing.B) {
	ctx := context.Background()
	b.Run("samsa", func(b *testing.B) {
		ser, err := samsaproto.NewSerializer[*benchpb.Flat](ctx, registry(b), samsasr.SerializerConfig{Topics: []string{topic}})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(dst []byte) ([]byte, error) { return ser.AppendSerialize(dst, topic, flatPB) })
	})
	b.Run("confluent", func(b *testing.B) {
		ser, err := cproto.NewSerializer(confluentClient(b), cserde.ValueSerde, cproto.NewSerializerConfig())
		if err != nil {
			b.Fatal(err)
		}
		run(b, func([]byte) ([]byte, error) { return ser.Serialize(topic, flatPB) })
	})
	b.Run("franz-go", func(b *testing.B) {
		var s sr.Serde
		s.Register(1, &benchpb.Flat{},
			sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }),
			sr.AppendEncodeFn(func(dst []byte, v any) ([]byte, error) {
				return proto.MarshalOptions{}.MarshalAppend(dst, v.(proto.Message))
			}),
			sr.Index(samsaproto.MessageIndexes(flatPB.ProtoReflect().Descriptor())...))
		run(b, func(dst []byte) ([]byte, error) { return s.AppendEncode(dst, flatPB) })
	})
}
