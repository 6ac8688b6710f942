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
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
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

    /**
     * Java's ThroughputThrottler (org.apache.kafka.tools, in kafka-tools, not
     * on this client's class path), logic for logic, as Go's
     * workload.Throttler: ProducerPerformance's --throughput. A rate of 0
     * (a wait for wakeup there) is refused by the flags.
     */
    static final class Throttler {
        static final long NS_PER_MS = 1000000L;
        static final long NS_PER_SEC = 1000 * NS_PER_MS;
        static final long MIN_SLEEP_NS = 2 * NS_PER_MS;

        final long startMs, sleepTimeNs, targetThroughput;
        long sleepDeficitNs = 0;

        Throttler(long targetThroughput, long startMs) {
            this.startMs = startMs;
            this.targetThroughput = targetThroughput;
            this.sleepTimeNs = targetThroughput > 0 ? NS_PER_SEC / targetThroughput : Long.MAX_VALUE;
        }

        boolean shouldThrottle(long amountSoFar, long sendStartMs) {
            if (targetThroughput < 0) return false;
            float elapsedSec = (sendStartMs - startMs) / 1000.f;
            return elapsedSec > 0 && (amountSoFar / elapsedSec) > targetThroughput;
        }

        void throttle() throws InterruptedException {
            sleepDeficitNs += sleepTimeNs;
            if (sleepDeficitNs < MIN_SLEEP_NS) return;
            long sleepStartNs = System.nanoTime();
            synchronized (this) {
                long remaining = sleepDeficitNs;
                while (remaining > 0) {
                    long sleepMs = remaining / NS_PER_MS;
                    long sleepNs = remaining - sleepMs * NS_PER_MS;
                    this.wait(sleepMs, (int) sleepNs);
                    remaining = sleepDeficitNs - (System.nanoTime() - sleepStartNs);
                }
            }
            sleepDeficitNs = 0;
        }
    }

    /**
     * Go's workload.Histogram: latencies in ns, exact below 256, then 128
     * buckets per power of two; the harness reads the quantiles from the
     * reported counts with the Go code.
     */
    static final class Histogram {
        static final int SUB_BITS = 7, SUB = 1 << SUB_BITS;
        static final int BUCKETS = 2 * SUB + (63 - SUB_BITS - 1) * SUB;
        final AtomicLongArray counts = new AtomicLongArray(BUCKETS);

        static int bucket(long v) {
            if (v < 2 * SUB) return (int) Math.max(v, 0);
            int e = (64 - Long.numberOfLeadingZeros(v)) - (SUB_BITS + 1);
            return 2 * SUB + (e - 1) * SUB + (int) (v >>> e) - SUB;
        }

        void record(long ns) {
            counts.incrementAndGet(bucket(ns));
        }

        String json() {
            StringBuilder b = new StringBuilder("[");
            for (int i = 0; i < BUCKETS; i++) {
                long n = counts.get(i);
                if (n == 0) continue;
                if (b.length() > 1) b.append(',');
                b.append('[').append(i).append(',').append(n).append(']');
            }
            return b.append(']').toString();
        }
    }

    /** Slots of the fixed-rate mode, as Go's workload.Slots. */
    static final int RATE_SLOTS = 1 << 17;

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
        long rate = Long.parseLong(flags.getOrDefault("rate", "0"));
        long rateWarmup = Long.parseLong(flags.getOrDefault("rate-warmup", "0"));
        if (rate < 0 || rateWarmup < 0 || (rate == 0 && rateWarmup > 0)) {
            fail("-rate " + rate + ", -rate-warmup " + rateWarmup + ": want a rate > 0 for a warm-up, neither negative");
        }
        String linger = flags.getOrDefault("linger", "");
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
        if (linger.isEmpty()) {
            props.put(ProducerConfig.LINGER_MS_CONFIG, LINGER_MS);
        } else if (!linger.equals("default")) { // "default": Java's own linger.ms
            long ns = durationNanos(linger);
            if (ns <= 0 || ns % 1000000 != 0) fail("-linger " + linger + ": linger.ms takes whole milliseconds");
            props.put(ProducerConfig.LINGER_MS_CONFIG, (int) (ns / 1000000));
        }
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
        String rateJson = "";
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
            if (rate > 0) {
                // The fixed-rate mode: Java's Callback is told the partition,
                // offset and a millisecond timestamp, not which send it
                // answers, so each slot has one Callback, made before the loop.
                long[] starts = new long[RATE_SLOTS];
                AtomicIntegerArray busy = new AtomicIntegerArray(RATE_SLOTS);
                Histogram hist = new Histogram();
                long[] steadyNs = {Long.MAX_VALUE}; // written before the first steady send
                Callback[] slotDone = new Callback[RATE_SLOTS];
                for (int k = 0; k < RATE_SLOTS; k++) {
                    final int slot = k;
                    slotDone[k] = (RecordMetadata md, Exception e) -> {
                        long start = starts[slot];
                        if (start >= steadyNs[0]) hist.record(System.nanoTime() - start);
                        busy.set(slot, 0);
                        done.onCompletion(md, e);
                    };
                }
                Throttler throttler = new Throttler(rate, System.currentTimeMillis());
                long cpu0 = -1, steadyStart = 0, slotWaits = 0;
                for (long i = 0; i < records; i++) {
                    int slot = (int) (i % RATE_SLOTS);
                    while (busy.get(slot) != 0) {
                        slotWaits++;
                        Thread.sleep(0, 100000);
                    }
                    if (i == rateWarmup) {
                        cpu0 = processCpuNanos();
                        steadyStart = System.nanoTime();
                        steadyNs[0] = steadyStart;
                    }
                    long sendStartMs = System.currentTimeMillis();
                    starts[slot] = System.nanoTime();
                    busy.set(slot, 1);
                    try {
                        producer.send(new ProducerRecord<>(p.topic, p.key(i), p.value(i)), slotDone[slot]);
                    } catch (Exception e) { // send itself failed: no callback runs
                        busy.set(slot, 0);
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e.toString());
                    }
                    if (throttler.shouldThrottle(i, sendStartMs)) {
                        throttler.throttle();
                    }
                }
                long sendEnd = System.nanoTime();
                producer.flush();
                while (acked.get() + failed.get() < records) {
                    Thread.onSpinWait();
                }
                long end = System.nanoTime();
                long cpu1 = processCpuNanos();
                long steady = Math.max(0, records - rateWarmup);
                rateJson = ",\"rate\":" + rate + ",\"steady_records\":" + steady
                        + (cpu0 >= 0 ? ",\"steady_send_ns\":" + (sendEnd - steadyStart) : "")
                        + ",\"latency_buckets\":" + hist.json()
                        + (slotWaits > 0 ? ",\"slot_waits\":" + slotWaits : "");
                wall = cpu0 >= 0 ? end - steadyStart : 0;
                produceCpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : 0;
            } else {
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
        out.append(rateJson);
        out.append(",\"notes\":").append(json(NOTES));
        out.append("}");
        System.out.println(out);
        System.out.flush();
    }
}
