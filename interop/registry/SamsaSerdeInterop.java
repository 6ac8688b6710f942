import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.util.JsonFormat;
import com.squareup.wire.schema.Location;
import com.squareup.wire.schema.internal.parser.MessageElement;
import com.squareup.wire.schema.internal.parser.ProtoFileElement;
import com.squareup.wire.schema.internal.parser.ProtoParser;
import io.apicurio.registry.utils.protobuf.schema.FileDescriptorUtils;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java side of samsa's Schema Registry interop tests (interop/realregistry_test.go).
 *
 * <pre>
 * SamsaSerdeInterop consume-avro|consume-json|consume-protobuf BOOTSTRAP CCOMPAT_URL TOPIC COUNT
 * SamsaSerdeInterop produce-avro BOOTSTRAP CCOMPAT_URL TOPIC COUNT
 * </pre>
 *
 * Avro and JSON Schema go through Apicurio's serdes in Confluent mode
 * (apicurio.registry.as-confluent=true, use-id=contentId, no headers), the
 * Java serializers' wire format. Apicurio's Protobuf deserializer reads its
 * own framing, not Confluent's message-index array, so consume-protobuf
 * decodes by hand: the schema id, the writer's .proto source (and its
 * references) from the registry's Confluent API, the message-index array,
 * then DynamicMessage. Each consumed value is printed as one line of JSON.
 */
public class SamsaSerdeInterop {
    static final String ORDER_AVRO = "{\"type\":\"record\",\"name\":\"Order\",\"namespace\":\"shop\",\"fields\":["
            + "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"customer\",\"type\":\"string\"},"
            + "{\"name\":\"amount\",\"type\":\"double\"},{\"name\":\"paid\",\"type\":\"boolean\"}]}";

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: SamsaSerdeInterop consume-avro|consume-json|consume-protobuf|produce-avro BOOTSTRAP CCOMPAT_URL TOPIC COUNT");
            System.exit(2);
        }
        String cmd = args[0], bootstrap = args[1], ccompat = args[2], topic = args[3];
        int count = Integer.parseInt(args[4]);
        switch (cmd) {
            case "consume-avro" -> consume(bootstrap, topic, count, serde(ccompat, "io.apicurio.registry.serde.avro.AvroKafkaDeserializer"), v -> v.toString());
            case "consume-json" -> consume(bootstrap, topic, count, serde(ccompat, "io.apicurio.registry.serde.jsonschema.JsonSchemaKafkaDeserializer"), v -> v.toString());
            case "consume-protobuf" -> {
                Protobuf p = new Protobuf(ccompat);
                Properties props = new Properties();
                props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
                consume(bootstrap, topic, count, props, v -> p.decode((byte[]) v));
            }
            case "produce-avro" -> produceAvro(bootstrap, ccompat, topic, count);
            default -> {
                System.err.println("unknown command " + cmd);
                System.exit(2);
            }
        }
    }

    /** Properties of an Apicurio serde in Confluent mode. */
    static Properties serde(String ccompat, String valueClass) {
        Properties p = new Properties();
        p.put("apicurio.registry.url", ccompat.replace("/apis/ccompat/v7", "/apis/registry/v2"));
        p.put("apicurio.registry.as-confluent", "true");
        p.put("apicurio.registry.use-id", "contentId");
        p.put("apicurio.registry.headers.enabled", "false");
        p.put("value.deserializer", valueClass);
        p.put("value.serializer", valueClass.replace("Deserializer", "Serializer"));
        return p;
    }

    interface Render {
        String apply(Object v) throws Exception;
    }

    static void consume(String bootstrap, String topic, int count, Properties props, Render render) throws Exception {
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], Object> c = new KafkaConsumer<>(props)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], Object> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println(render.apply(r.value()));
                    seen++;
                }
            }
            if (seen < count) {
                throw new IllegalStateException("read " + seen + " of " + count + " records");
            }
        }
    }

    static void produceAvro(String bootstrap, String ccompat, String topic, int count) throws Exception {
        Properties props = serde(ccompat, "io.apicurio.registry.serde.avro.AvroKafkaDeserializer");
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("apicurio.registry.auto-register", "true");
        props.put("apicurio.registry.find-latest", "true");
        Schema schema = new Schema.Parser().parse(ORDER_AVRO);
        try (KafkaProducer<String, GenericRecord> p = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                GenericRecord r = new GenericData.Record(schema);
                r.put("id", (long) i);
                r.put("customer", "java-" + i);
                r.put("amount", i * 1.5);
                r.put("paid", i % 2 == 0);
                p.send(new ProducerRecord<>(topic, "k" + i, r)).get();
            }
        }
    }

    /** Decodes Confluent's Protobuf format by hand, with the registry's schema. */
    static class Protobuf {
        final String ccompat;
        final HttpClient http = HttpClient.newHttpClient();
        final ObjectMapper json = new ObjectMapper();
        final Map<Integer, Descriptors.FileDescriptor> byId = new HashMap<>();

        Protobuf(String ccompat) {
            this.ccompat = ccompat;
        }

        JsonNode get(String path) throws Exception {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(ccompat + path)).build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IllegalStateException("GET " + path + ": " + r.statusCode() + " " + r.body());
            }
            return json.readTree(r.body());
        }

        /** Adds every reference of node, parsed, depth first, to deps (by import path). */
        void references(JsonNode node, Map<String, ProtoFileElement> deps) throws Exception {
            if (!node.has("references")) {
                return;
            }
            for (JsonNode ref : node.get("references")) {
                String subject = URLEncoder.encode(ref.get("subject").asText(), StandardCharsets.UTF_8).replace("+", "%20");
                JsonNode dep = get("/subjects/" + subject + "/versions/" + ref.get("version").asInt());
                references(dep, deps);
                String name = ref.get("name").asText();
                deps.put(name, ProtoParser.Companion.parse(Location.get(name), dep.get("schema").asText()));
            }
        }

        /** The writer's file: its first message's descriptor, built with the references, gives it. */
        Descriptors.FileDescriptor file(int id) throws Exception {
            Descriptors.FileDescriptor fd = byId.get(id);
            if (fd == null) {
                JsonNode s = get("/schemas/ids/" + id);
                Map<String, ProtoFileElement> deps = new HashMap<>();
                // The well-known files are not references (registries know them).
                for (Descriptors.FileDescriptor base : FileDescriptorUtils.baseDependencies()) {
                    deps.put(base.getName(), FileDescriptorUtils.fileDescriptorToProtoFile(base.toProto()));
                }
                references(s, deps);
                ProtoFileElement main = ProtoParser.Companion.parse(Location.get("schema" + id + ".proto"), s.get("schema").asText());
                String first = main.getTypes().stream().filter(t -> t instanceof MessageElement).findFirst().orElseThrow().getName();
                fd = FileDescriptorUtils.toDescriptor(first, main, deps).getFile();
                byId.put(id, fd);
            }
            return fd;
        }

        String decode(byte[] data) throws Exception {
            ByteBuffer b = ByteBuffer.wrap(data);
            if (b.get() != 0) {
                throw new IllegalStateException("magic byte is not 0");
            }
            int id = b.getInt();
            CodedInputStream in = CodedInputStream.newInstance(data, 5, data.length - 5);
            int n = in.readSInt32();
            List<Integer> idx = new ArrayList<>();
            if (n == 0) {
                idx.add(0);
            }
            for (int i = 0; i < n; i++) {
                idx.add(in.readSInt32());
            }
            // Walk the index array; map entries are not counted, as .proto source has none.
            List<Descriptors.Descriptor> level = file(id).getMessageTypes();
            Descriptors.Descriptor d = null;
            for (int i : idx) {
                List<Descriptors.Descriptor> shown = new ArrayList<>();
                for (Descriptors.Descriptor m : level) {
                    if (!m.getOptions().getMapEntry()) {
                        shown.add(m);
                    }
                }
                d = shown.get(i);
                level = d.getNestedTypes();
            }
            DynamicMessage m = DynamicMessage.parseFrom(d, in);
            return "{\"type\":\"" + d.getFullName() + "\",\"value\":" + JsonFormat.printer().omittingInsignificantWhitespace().print(m) + "}";
        }
    }
}
