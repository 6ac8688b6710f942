// BenchProducer is the peer benchmark's client for Apache Kafka's Java
// producer (org.apache.kafka:kafka-clients). The harness (cmd/peerbench)
// compiles it with javac and runs it like the Go clients: the same flags,
// one warm-up record, the timed phase from the first send to the last
// acknowledgment, and one JSON result line on stdout (the fields of Go's
// workload.Result).
//
// The keys and values come from a payload file the harness writes from
// Go's workload.Payload (-payload), so that every client sends the same
// bytes; its header also names the topic and the compression.

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BenchProducer {
    // The shared knobs of Go's package workload.
    static final int LINGER_MS = 5;
    static final int BATCH_BYTES = 1 << 20;
    // buffer.memory when -buffer-memory is not given (workload.DefaultBufferMemory).
    static final long DEFAULT_BUFFER_BYTES = 64L << 20;

    static final String NOTES = "idempotent (default since Kafka 3.0); murmur2 for keys, "
            + "built-in uniform sticky partitioning for null keys (default); "
            + "send with one Callback object for every record, then flush; JVM defaults (heap, GC)";

    /** The payload file of Go's workload.Payload.WriteFile. */
    static final class Payload {
        String workload, topic, compression;
        int keyStride;
        byte[][] values, keys;
        int[] keyOrder; // the key of each draw (zipf); empty: keyStride

        byte[] key(long i) {
            if (keys.length == 0) return null;
            if (keyOrder.length > 0) return keys[keyOrder[(int) (i % keyOrder.length)]];
            return keys[(int) ((i * keyStride) % keys.length)];
        }

        byte[] value(long i) {
            return values[(int) (i % values.length)];
        }

        static String line(DataInputStream in) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            for (int c; (c = in.read()) != '\n'; ) {
                if (c < 0) throw new IOException("payload file: unexpected end");
                b.write(c);
            }
            return b.toString(StandardCharsets.UTF_8);
        }

        static byte[][] list(DataInputStream in, String want) throws IOException {
            String[] f = line(in).split(" ", 2);
            if (f.length != 2 || !f[0].equals(want)) throw new IOException("payload file: want " + want);
            byte[][] out = new byte[Integer.parseInt(f[1])][];
            for (int i = 0; i < out.length; i++) {
                out[i] = new byte[in.readInt()]; // big-endian, as written
                in.readFully(out[i]);
            }
            return out;
        }

        static Payload read(String path) throws IOException {
            try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(path)))) {
                if (!line(in).equals("samsa-bench-payload 2")) throw new IOException(path + ": not a payload file");
                Payload p = new Payload();
                Map<String, String> h = new HashMap<>();
                for (int i = 0; i < 5; i++) {
                    String[] f = line(in).split(" ", 2);
                    h.put(f[0], f.length > 1 ? f[1] : "");
                }
                p.workload = h.get("workload");
                p.topic = h.get("topic");
                p.compression = h.get("compression");
                p.keyStride = Integer.parseInt(h.get("key-stride"));
                p.values = list(in, "values");
                p.keys = list(in, "keys");
                String[] f = line(in).split(" ", 2);
                if (f.length != 2 || !f[0].equals("key-order")) throw new IOException("payload file: want key-order");
                p.keyOrder = new int[Integer.parseInt(f[1])];
                for (int i = 0; i < p.keyOrder.length; i++) {
                    p.keyOrder[i] = in.readInt(); // big-endian, as written
                }
                return p;
            }
        }
    }

    /** Parses a Go duration as the harness passes it ("10m0s", "90s", "1h2m3.5s", "500ms"). */
    static long durationNanos(String s) {
        Matcher m = Pattern.compile("(\\d+(?:\\.\\d+)?)(h|ms|us|µs|ns|m|s)").matcher(s);
        double ns = 0;
        int end = 0;
        while (m.find()) {
            if (m.start() != end) break;
            end = m.end();
            double v = Double.parseDouble(m.group(1));
            switch (m.group(2)) {
                case "h": ns += v * 3600e9; break;
                case "m": ns += v * 60e9; break;
                case "s": ns += v * 1e9; break;
                case "ms": ns += v * 1e6; break;
                case "us": case "µs": ns += v * 1e3; break;
                default: ns += v;
            }
        }
        if (end == 0 || end != s.length()) throw new IllegalArgumentException("bad duration " + s);
        return (long) ns;
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** The process's user+system time over every thread (GC and JIT threads included), in ns. */
    static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }

    static void fail(String msg) {
        System.err.println("java: " + msg);
        System.exit(1);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("-")) fail("unexpected argument " + a);
            a = a.replaceFirst("^--?", "");
            int eq = a.indexOf('=');
            if (eq >= 0) {
                flags.put(a.substring(0, eq), a.substring(eq + 1));
            } else if (i + 1 < args.length) {
                flags.put(a, args[++i]);
            } else {
                fail("flag -" + a + " needs a value");
            }
        }
        String brokers = flags.get("brokers");
        String workload = flags.get("workload");
        String payloadPath = flags.get("payload");
        if (brokers == null || workload == null || payloadPath == null) {
            fail("-brokers, -workload and -payload are required");
        }
        long records = Long.parseLong(flags.getOrDefault("records", "1000000"));
        long timeoutNanos = durationNanos(flags.getOrDefault("timeout", "10m"));
        long bufferMemory = Long.parseLong(flags.getOrDefault("buffer-memory", Long.toString(DEFAULT_BUFFER_BYTES)));
        if (flags.containsKey("cpuprofile") || flags.containsKey("memprofile")) {
            System.err.println("java: -cpuprofile and -memprofile are ignored (Go clients only)");
        }
        Payload p = Payload.read(payloadPath);
        if (!workload.equals(p.workload)) fail("payload file is for workload " + p.workload + ", not " + workload);

        // A run that outlives -timeout fails, as a Go client's context would.
        Thread watchdog = new Thread(() -> {
            try {
                TimeUnit.NANOSECONDS.sleep(timeoutNanos);
                fail("timed out after " + flags.getOrDefault("timeout", "10m"));
            } catch (InterruptedException e) {
                // done in time
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, LINGER_MS);
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, BATCH_BYTES);
        props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, bufferMemory);
        String tlsCA = flags.get("tls-ca");
        if (tlsCA != null) {
            // TLS trusting only that CA; the host name is checked (Java's default).
            props.put("security.protocol", "SSL");
            props.put("ssl.truststore.type", "PEM");
            props.put("ssl.truststore.location", tlsCA);
        }
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, p.compression);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // Everything else is Java's default: idempotence, partitioner,
        // in-flight requests, max.request.size.

        long setupStart = System.nanoTime();
        AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        long wall, produceCpu, setup;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            try {
                producer.send(new ProducerRecord<>(p.topic, p.key(0), p.value(0))).get();
            } catch (Exception e) {
                fail("open: warm-up record: " + e);
            }
            setup = System.nanoTime() - setupStart;

            Callback done = (RecordMetadata md, Exception e) -> {
                if (e != null) {
                    failed.incrementAndGet();
                    firstError.compareAndSet(null, e.toString());
                } else {
                    acked.incrementAndGet();
                }
            };
            long cpu0 = processCpuNanos();
            long start = System.nanoTime();
            for (long i = 0; i < records; i++) {
                try {
                    producer.send(new ProducerRecord<>(p.topic, p.key(i), p.value(i)), done);
                } catch (Exception e) { // send itself failed: no callback runs
                    failed.incrementAndGet();
                    firstError.compareAndSet(null, e.toString());
                }
            }
            producer.flush();
            // flush returns once every send completed; the callbacks run
            // before a send counts as complete, but wait for the counts to
            // be sure.
            while (acked.get() + failed.get() < records) {
                Thread.onSpinWait();
            }
            wall = System.nanoTime() - start;
            long cpu1 = processCpuNanos();
            produceCpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : 0;
        }
        watchdog.interrupt();

        StringBuilder out = new StringBuilder("{");
        out.append("\"client\":\"java\"");
        out.append(",\"workload\":").append(json(p.workload));
        out.append(",\"records\":").append(records);
        out.append(",\"acked\":").append(acked.get());
        out.append(",\"errors\":").append(failed.get());
        if (firstError.get() != null) out.append(",\"first_error\":").append(json(firstError.get()));
        out.append(",\"wall_ns\":").append(wall);
        out.append(",\"setup_ns\":").append(setup);
        if (produceCpu > 0) out.append(",\"produce_cpu_ns\":").append(produceCpu);
        out.append(",\"notes\":").append(json(NOTES));
        out.append("}");
        System.out.println(out);
        System.out.flush();
    }
}
