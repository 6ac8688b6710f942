// SamsaTelemetryCapture is a broker plugin for the KIP-714 tests: set as
// metric.reporters, it makes the broker advertise GetTelemetrySubscriptions
// and PushTelemetry (Kafka does only with a reporter that receives client
// telemetry) and writes every push it is handed to the directory in the
// broker config samsa.telemetry.dir, one file per push:
//
//   <millis>-<seq>-<client id>-<client instance id>[-terminating].otlp
//
// holding the push's OTLP MetricsData, decompressed by the broker. A file
// is written under a temporary name and renamed, so a reader never sees
// half of one. The client id keeps [A-Za-z0-9._-] only.

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public final class SamsaTelemetryCapture implements MetricsReporter, ClientTelemetryExporterProvider {
    private final AtomicLong seq = new AtomicLong();
    private volatile Path dir;

    @Override
    public void configure(Map<String, ?> configs) {
        Object d = configs.get("samsa.telemetry.dir");
        if (d == null) {
            throw new IllegalArgumentException("SamsaTelemetryCapture needs samsa.telemetry.dir");
        }
        dir = Paths.get(d.toString());
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::export;
    }

    private void export(ClientTelemetryContext ctx, ClientTelemetryPayload payload) {
        String client = ctx.authorizableRequestContext().clientId().replaceAll("[^A-Za-z0-9._-]", "_");
        String name = System.currentTimeMillis() + "-" + seq.incrementAndGet() + "-" + client + "-"
                + payload.clientInstanceId() + (payload.isTerminating() ? "-terminating" : "") + ".otlp";
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        try {
            Path tmp = dir.resolve("." + name + ".tmp");
            Files.write(tmp, bytes);
            Files.move(tmp, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            // The broker answers INVALID_RECORD: the test sees it.
            throw new RuntimeException("SamsaTelemetryCapture: writing " + name + ": " + e, e);
        }
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
    }
}
