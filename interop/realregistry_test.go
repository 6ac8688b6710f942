package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/samsa-go/samsa/interop/internal/serdepb"
	"github.com/samsa-go/samsa/producer"
	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/avro"
	"github.com/samsa-go/samsa/serde/schemaregistry/jsonschema"
	"github.com/samsa-go/samsa/serde/schemaregistry/protobuf"
)

// The realregistry_* tests run samsa's Schema Registry serializers against
// a real Apicurio Registry (its Confluent API, /apis/ccompat/v7) and a real
// Kafka cluster, and check what they write against Java: Apicurio's serdes
// in Confluent mode (as-confluent=true, use-id=contentId, no headers) for
// Avro and JSON Schema, and, since Apicurio's Protobuf deserializer reads
// its own framing, a hand decoder in Java (the registry's .proto source,
// the message-index array, DynamicMessage). interop/registry/start.sh
// starts the registry and compiles the Java side; make test does it when
// java, javac, mvn and curl are present:
//
//	SAMSA_SCHEMA_REGISTRY_URL      the Confluent API's URL
//	SAMSA_SCHEMA_REGISTRY_JAVA_CP  the Java side's class path
//
// Without them a test is skipped, and fails when CI is set.

// realRegistry returns a Client of the real registry, or skips the test
// (fails it in CI).
func realRegistry(t *testing.T) (*sr.Client, string) {
	t.Helper()
	u := os.Getenv("SAMSA_SCHEMA_REGISTRY_URL")
	if u == "" {
		msg := "SAMSA_SCHEMA_REGISTRY_URL is not set: no real Schema Registry (interop/registry/start.sh; make test starts one when java, mvn and curl are present)"
		if inCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c, err := sr.NewClient(sr.Config{URLs: []string{u}, RetryBackoff: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, u
}

// realRegistryKafka returns the registry and the 1-node Kafka cluster.
func realRegistryKafka(t *testing.T) (*sr.Client, string, *realCluster) {
	t.Helper()
	if os.Getenv("SAMSA_KAFKA_BROKERS") == "" && inCI() {
		t.Fatal("SAMSA_KAFKA_BROKERS is not set, in CI")
	}
	// Kafka first: its goroutine-leak check then runs after the
	// registry client's cleanup.
	kafka := realKafka(t)
	c, u := realRegistry(t)
	return c, u, kafka
}

// java runs the Java side (SamsaSerdeInterop) and returns its stdout
// lines.
func java(t *testing.T, args ...string) []string {
	t.Helper()
	cp := os.Getenv("SAMSA_SCHEMA_REGISTRY_JAVA_CP")
	if cp == "" {
		if inCI() {
			t.Fatal("SAMSA_SCHEMA_REGISTRY_JAVA_CP is not set, in CI")
		}
		t.Skip("SAMSA_SCHEMA_REGISTRY_JAVA_CP is not set: no Java side (interop/registry/start.sh)")
	}
	ctx, cancel := context.WithTimeout(testContext(t), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, "SamsaSerdeInterop"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "java %v: %s", args, stderr.String())
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// sendTyped sends values through a TypedProducer with ser to topic and waits
// for every one.
func sendTyped[V any](t *testing.T, brokers []string, ser producer.Serializer[V], topic string, values []V) {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: brokers})
	require.NoError(t, err)
	ctx := testContext(t)
	defer func() { require.NoError(t, p.Close(ctx)) }()
	typed := producer.NewTyped(p, producer.StringSerializer{}, ser)
	futures := make([]*producer.Future, len(values))
	for i, v := range values {
		futures[i] = typed.Send(ctx, topic, fmt.Sprint("k", i), v)
	}
	for i, f := range futures {
		_, err := f.Wait(ctx)
		require.NoError(t, err, "record %d", i)
	}
}

const realOrderAvro = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},{"name":"paid","type":"boolean"}]}`

type realOrder struct {
	ID       int64   `avro:"id" json:"id"`
	Customer string  `avro:"customer" json:"customer"`
	Amount   float64 `avro:"amount" json:"amount"`
	Paid     bool    `avro:"paid" json:"paid"`
}

func realOrders(n int) []realOrder {
	out := make([]realOrder, n)
	for i := range out {
		out[i] = realOrder{ID: int64(i), Customer: fmt.Sprint("go-", i), Amount: float64(i) + 0.25, Paid: i%2 == 1}
	}
	return out
}

// TestRealRegistryAvro: samsa's Avro records, read back by samsa and
// decoded by Apicurio's Java deserializer in Confluent mode.
func TestRealRegistryAvro(t *testing.T) {
	reg, u, kafka := realRegistryKafka(t)
	ctx := testContext(t)
	topic := uniqueTopic("sr-avro")
	kafka.createTopic(t, topic, 1, 1, nil)
	ser, err := avro.NewSerializer[realOrder](ctx, reg, realOrderAvro, sr.SerializerConfig{Topics: []string{topic}})
	require.NoError(t, err)
	in := realOrders(recordCount(20, 5))
	sendTyped(t, kafka.addrs, ser, topic, in)

	d := avro.NewDeserializer[realOrder](reg)
	for i, r := range consumeAll(t, kafka.addrs, topic, 1, len(in)) {
		out, err := d.Deserialize(ctx, topic, r.Value)
		require.NoError(t, err)
		assert.Equal(t, in[i], out)
	}
	lines := java(t, "consume-avro", strings.Join(kafka.addrs, ","), u, topic, fmt.Sprint(len(in)))
	require.Len(t, lines, len(in))
	for i, line := range lines {
		var got realOrder
		require.NoError(t, json.Unmarshal([]byte(line), &got), line)
		assert.Equal(t, in[i], got)
	}
}

// TestRealRegistryJavaAvroReadBySamsa: records written by Apicurio's Java
// serializer in Confluent mode are read by samsa's deserializer.
func TestRealRegistryJavaAvroReadBySamsa(t *testing.T) {
	reg, u, kafka := realRegistryKafka(t)
	ctx := testContext(t)
	topic := uniqueTopic("sr-java-avro")
	kafka.createTopic(t, topic, 1, 1, nil)
	n := recordCount(10, 3)
	java(t, "produce-avro", strings.Join(kafka.addrs, ","), u, topic, fmt.Sprint(n))
	generic := avro.NewDeserializer[map[string]any](reg)
	typed := avro.NewDeserializer[realOrder](reg)
	for i, r := range consumeAll(t, kafka.addrs, topic, 1, n) {
		m, err := generic.Deserialize(ctx, topic, r.Value)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"id": int64(i), "customer": fmt.Sprint("java-", i), "amount": float64(i) * 1.5, "paid": i%2 == 0}, m)
		o, err := typed.Deserialize(ctx, topic, r.Value)
		require.NoError(t, err)
		assert.Equal(t, int64(i), o.ID)
	}
}

func realProtoOrder(i int) *serdepb.Order {
	note := fmt.Sprint("note ", i)
	return &serdepb.Order{
		Id: int64(i), Customer: fmt.Sprint("go-", i), Amount: 2.5, Paid: true,
		Price:   &serdepb.Money{Cents: int64(100 + i), Currency: "EUR"},
		Tags:    []string{"a", "b"},
		Counts:  map[string]int32{"x": int32(i)},
		Status:  serdepb.Status_STATUS_OPEN,
		Created: timestamppb.New(time.Unix(1700000000, 0)),
		Payment: &serdepb.Order_Iban{Iban: "DE00"},
		Note:    &note,
		Lines:   []*serdepb.Order_Line{{Sku: "s", Quantity: 1}},
	}
}

// TestRealRegistryProtobuf: samsa's Protobuf records (a message with an
// import registered as a reference, and a nested message), read back by
// samsa and decoded in Java from the registry's own copy of the schema.
func TestRealRegistryProtobuf(t *testing.T) {
	reg, u, kafka := realRegistryKafka(t)
	ctx := testContext(t)
	topic := uniqueTopic("sr-proto")
	kafka.createTopic(t, topic, 1, 1, nil)
	ser, err := protobuf.NewSerializer[*serdepb.Order](ctx, reg, sr.SerializerConfig{Topics: []string{topic}})
	require.NoError(t, err)
	n := recordCount(10, 3)
	in := make([]*serdepb.Order, n)
	for i := range in {
		in[i] = realProtoOrder(i)
	}
	sendTyped(t, kafka.addrs, ser, topic, in)

	d := protobuf.NewDeserializer[*serdepb.Order](reg)
	for i, r := range consumeAll(t, kafka.addrs, topic, 1, n) {
		out, err := d.Deserialize(ctx, topic, r.Value)
		require.NoError(t, err)
		assert.True(t, proto.Equal(in[i], out), "%v", out)
	}
	lines := java(t, "consume-protobuf", strings.Join(kafka.addrs, ","), u, topic, fmt.Sprint(n))
	require.Len(t, lines, n)
	for i, line := range lines {
		var got struct {
			Type  string         `json:"type"`
			Value map[string]any `json:"value"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &got), line)
		assert.Equal(t, "samsa.test.Order", got.Type)
		if i > 0 { // proto3 JSON leaves out a zero; an int64 is a string
			assert.Equal(t, fmt.Sprint(i), got.Value["id"], line)
		}
		assert.Equal(t, fmt.Sprint("go-", i), got.Value["customer"])
		assert.Equal(t, map[string]any{"cents": fmt.Sprint(100 + i), "currency": "EUR"}, got.Value["price"])
		assert.Equal(t, "STATUS_OPEN", got.Value["status"])
		assert.Equal(t, "DE00", got.Value["iban"])
		assert.Equal(t, "2023-11-14T22:13:20Z", got.Value["created"])
	}

	// A message nested three deep: index array [2, 0, 0].
	deepTopic := uniqueTopic("sr-proto-deep")
	kafka.createTopic(t, deepTopic, 1, 1, nil)
	deep, err := protobuf.NewSerializer[*serdepb.Envelope_Inner_Deep](ctx, reg, sr.SerializerConfig{Topics: []string{deepTopic}})
	require.NoError(t, err)
	sendTyped(t, kafka.addrs, deep, deepTopic, []*serdepb.Envelope_Inner_Deep{{Text: "deep"}})
	lines = java(t, "consume-protobuf", strings.Join(kafka.addrs, ","), u, deepTopic, "1")
	assert.Equal(t, []string{`{"type":"samsa.test.Envelope.Inner.Deep","value":{"text":"deep"}}`}, lines)
}

const realOrderJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object",
"properties":{"id":{"type":"integer"},"customer":{"type":"string"},"amount":{"type":"number"},"paid":{"type":"boolean"}},
"required":["id","customer"]}`

// TestRealRegistryJSONSchema: samsa's JSON Schema records, validated,
// read back by samsa and by Apicurio's Java deserializer.
func TestRealRegistryJSONSchema(t *testing.T) {
	reg, u, kafka := realRegistryKafka(t)
	ctx := testContext(t)
	topic := uniqueTopic("sr-json")
	kafka.createTopic(t, topic, 1, 1, nil)
	ser, err := jsonschema.NewSerializer[realOrder](ctx, reg, realOrderJSONSchema, sr.SerializerConfig{Topics: []string{topic}, Validate: true})
	require.NoError(t, err)
	in := realOrders(recordCount(10, 3))
	sendTyped(t, kafka.addrs, ser, topic, in)

	d := jsonschema.NewDeserializer[realOrder](reg, jsonschema.DeserializerConfig{Validate: true})
	for i, r := range consumeAll(t, kafka.addrs, topic, 1, len(in)) {
		out, err := d.Deserialize(ctx, topic, r.Value)
		require.NoError(t, err)
		assert.Equal(t, in[i], out)
	}
	lines := java(t, "consume-json", strings.Join(kafka.addrs, ","), u, topic, fmt.Sprint(len(in)))
	require.Len(t, lines, len(in))
	for i, line := range lines {
		var got realOrder
		require.NoError(t, json.Unmarshal([]byte(line), &got), line)
		assert.Equal(t, in[i], got)
	}
}

// TestRealRegistryIncompatibleSchemaFailsConstruction: under BACKWARD, a
// schema that cannot read the subject's data fails the constructor with
// the registry's 409 and its message.
func TestRealRegistryIncompatibleSchemaFailsConstruction(t *testing.T) {
	reg, _ := realRegistry(t)
	ctx := testContext(t)
	topic := uniqueTopic("sr-compat")
	_, err := avro.NewSerializer[realOrder](ctx, reg, realOrderAvro, sr.SerializerConfig{Topics: []string{topic}})
	require.NoError(t, err)
	require.NoError(t, reg.SetConfig(ctx, topic+"-value", sr.SubjectConfig{Compatibility: sr.CompatibilityBackward}))
	got, err := reg.GetConfig(ctx, topic+"-value")
	require.NoError(t, err)
	assert.Equal(t, sr.CompatibilityBackward, got.Compatibility)

	// A new field without a default cannot read the old records.
	v2 := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"region","type":"string"}]}`
	compat, err := reg.CheckCompatibility(ctx, topic+"-value", 0, sr.Schema{Schema: v2})
	require.NoError(t, err)
	assert.False(t, compat.IsCompatible)
	_, err = avro.NewSerializer[map[string]any](ctx, reg, v2, sr.SerializerConfig{Topics: []string{topic}})
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.StatusCode)
	assert.NotEmpty(t, se.Message)
	t.Logf("the registry said: %v", err)
}

// TestRealRegistryDownFailsConstructionWithinItsContext: with the registry
// unreachable, the constructor returns when its context ends.
func TestRealRegistryDownFailsConstructionWithinItsContext(t *testing.T) {
	realRegistry(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String() + "/apis/ccompat/v7"
	require.NoError(t, l.Close()) // nothing listens there now
	c, err := sr.NewClient(sr.Config{URLs: []string{down}, MaxRetries: 1000, RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err = avro.NewSerializer[realOrder](ctx, c, realOrderAvro, sr.SerializerConfig{Topics: []string{"t"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestRealRegistrySendsKeepGoingWithRegistryDown: a serializer built
// through a proxy of the real registry keeps serving Sends to real Kafka
// once the proxy is gone.
func TestRealRegistrySendsKeepGoingWithRegistryDown(t *testing.T) {
	_, u, kafka := realRegistryKafka(t)
	ctx := testContext(t)
	target, err := url.Parse(u)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	rp.Transport = tr
	proxy := httptest.NewServer(http.StripPrefix("/proxied", rp))
	defer proxy.Close()
	c, err := sr.NewClient(sr.Config{URLs: []string{proxy.URL + "/proxied"}, MaxRetries: sr.NoRetries})
	require.NoError(t, err)
	defer c.Close()
	topic := uniqueTopic("sr-down")
	kafka.createTopic(t, topic, 1, 1, nil)
	ser, err := avro.NewSerializer[realOrder](ctx, c, realOrderAvro, sr.SerializerConfig{Topics: []string{topic}})
	require.NoError(t, err)

	proxy.Close() // the registry is unreachable from now on
	c.Close()
	_, err = c.Subjects(ctx)
	require.Error(t, err, "the registry is down")
	in := realOrders(recordCount(50, 10))
	sendTyped(t, kafka.addrs, ser, topic, in)
	assert.Len(t, consumeAll(t, kafka.addrs, topic, 1, len(in)), len(in))
}
