package interop

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
)

// TestRealKafkaCompressionNoWorseThanJava compares the bytes a real Kafka
// broker stores for the same records produced by samsa and by the Java
// client (kafka-clients 4.4.0 with its own codecs: java.util.zip,
// snappy-java, lz4-java, zstd-jni), with every codec at its default level,
// on three payloads of 1 KiB values: random uppercase letters (the Java
// ProducerPerformance payload), JSON-like events and random bytes. samsa
// must store at most 2 % more than the Java client.
//
// Both send exactly the same batches: 16 records each, to partitions in
// turn, flushed after every round, with a long linger and a large
// batch.size so that nothing else closes a batch. (With their defaults the
// two clients would cut batches differently: the Java client counts
// batch.size in estimated compressed bytes, so its batches of compressible
// records hold more of them; that compares batching, not codecs.) The
// broker keeps each batch as it was sent; DescribeLogDirs gives the size of
// each partition's log.
//
// It needs the real cluster (SAMSA_KAFKA_BROKERS), java and javac, and the
// jars interop/kafka/start.sh copies into interop/kafka/target/lib; the Java
// side is kafka/JavaCompressionProducer.java, compiled once into
// kafka/target/java-compression.
func TestRealKafkaCompressionNoWorseThanJava(t *testing.T) {
	c := realKafka(t)
	java := javaCompressionProducer(t)
	ctx := realContext(t, 3*time.Minute)
	const batch, partitions = 16, 4
	n := recordCount(4096, 2048) // a multiple of batch × partitions
	compared := []compression.Type{compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd}

	type run struct {
		codec       compression.Type
		payload     string
		values      [][]byte
		java, samsa string // topics
	}
	dir := t.TempDir()
	var runs []*run
	var topics, specs []string
	for _, payload := range []string{"letters", "json", "random"} {
		values := compressionPayload(payload, n)
		file := filepath.Join(dir, payload)
		require.NoError(t, os.WriteFile(file, bytes.Join(values, nil), 0o600))
		for _, codec := range compared {
			r := &run{codec: codec, payload: payload, values: values,
				java:  uniqueTopic(fmt.Sprintf("java-%v-%s", codec, payload)),
				samsa: uniqueTopic(fmt.Sprintf("samsa-%v-%s", codec, payload))}
			runs = append(runs, r)
			topics = append(topics, r.java, r.samsa)
			specs = append(specs, r.java+"="+codec.String()+"="+file)
		}
	}
	c.createTopics(t, topics, partitions)

	// The Java client produces in its own process while samsa produces
	// here.
	start := time.Now()
	var javaOut, javaErr bytes.Buffer
	cmd := exec.CommandContext(ctx, java[0], append(java[1:],
		strings.Join(c.addrs, ","), strconv.Itoa(batch), strconv.Itoa(partitions))...)
	cmd.Args = append(cmd.Args, specs...)
	cmd.Stdout, cmd.Stderr = &javaOut, &javaErr
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	javaDone := make(chan error, 1)
	var javaTime time.Duration
	go func() {
		err := cmd.Wait()
		javaTime = time.Since(start)
		javaDone <- err
	}()

	for _, codec := range compared {
		p := newSamsaProducer(t, c.addrs, producer.Config{
			Compression: codec,
			Linger:      20 * time.Second,
			BatchSize:   256 << 10,
		})
		for _, r := range runs {
			if r.codec != codec {
				continue
			}
			futs := make([]*producer.Future, len(r.values))
			for i, v := range r.values {
				futs[i] = p.Send(ctx, &producer.Record{Topic: r.samsa, Value: v,
					Partition: int32((i / batch) % partitions), ExplicitPartition: true})
				if (i+1)%(batch*partitions) == 0 {
					require.NoError(t, p.Flush(ctx))
				}
			}
			waitAll(t, p, futs)
		}
		require.NoError(t, p.Close(ctx))
	}
	samsaTime := time.Since(start)
	require.NoError(t, <-javaDone, "java JavaCompressionProducer:\n%s%s", javaOut.String(), javaErr.String())
	t.Logf("samsa produced in %v, the Java client in %v (with its JVM start), side by side",
		samsaTime.Round(time.Millisecond), javaTime.Round(time.Millisecond))

	sizes := c.logSizes(ctx, t, topics, partitions)
	var table strings.Builder
	fmt.Fprintf(&table, "%d records of 1 KiB in batches of %d: bytes stored\n%-7s %-8s %12s %12s %7s\n", n, batch, "codec", "payload", "samsa", "java", "ratio")
	for _, r := range runs {
		javaBytes, samsaBytes := sizes[r.java], sizes[r.samsa]
		ratio := float64(samsaBytes) / float64(javaBytes)
		fmt.Fprintf(&table, "%-7v %-8s %12d %12d %7.3f\n", r.codec, r.payload, samsaBytes, javaBytes, ratio)
		if javaBytes <= 0 || samsaBytes <= 0 {
			t.Errorf("%v %s: no log size (samsa %d, java %d)", r.codec, r.payload, samsaBytes, javaBytes)
			continue
		}
		if samsaBytes*100 > javaBytes*102 {
			t.Errorf("%v %s: samsa's batches take %d bytes on the broker, %.1f %% more than the Java client's %d",
				r.codec, r.payload, samsaBytes, 100*(ratio-1), javaBytes)
		}
	}
	t.Log(table.String())
}

// compressionPayload returns n values of 1 KiB of the named payload, from a
// fixed seed.
func compressionPayload(name string, n int) [][]byte {
	rnd := rand.New(rand.NewPCG(23, 10))
	statuses := []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "RETURNED"}
	values := make([][]byte, n)
	for i := range values {
		v := make([]byte, 0, 1024+256)
		switch name {
		case "letters": // ProducerPerformance: random.nextInt(26) + 65
			for len(v) < 1024 {
				v = append(v, byte('A'+rnd.IntN(26)))
			}
		case "json":
			for len(v) < 1024 {
				v = fmt.Appendf(v, `{"order":%d,"customer":"c%06d","status":%q,"amount":%d.%02d,"currency":"EUR","created":"2025-11-%02dT%02d:%02d:%02dZ","sku":"SKU-%05d","qty":%d}`,
					rnd.Uint32(), rnd.IntN(50000), statuses[rnd.IntN(len(statuses))], rnd.IntN(1000), rnd.IntN(100),
					1+rnd.IntN(28), rnd.IntN(24), rnd.IntN(60), rnd.IntN(60), rnd.IntN(20000), 1+rnd.IntN(9))
			}
		case "random":
			for len(v) < 1024 {
				v = append(v, byte(rnd.Uint32()))
			}
		default:
			panic("unknown payload " + name)
		}
		values[i] = v[:1024]
	}
	return values
}

// javaCompressionProducer returns the command that runs
// kafka/JavaCompressionProducer.java, compiling it first if its class is
// missing or older than the source. It skips the test without java, javac
// or Kafka's jars.
func javaCompressionProducer(t *testing.T) []string {
	t.Helper()
	javaBin, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java not found: cannot run the Java client")
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Skip("javac not found: cannot compile kafka/JavaCompressionProducer.java")
	}
	lib := filepath.Join("kafka", "target", "lib")
	if jars, _ := filepath.Glob(filepath.Join(lib, "kafka-clients-*.jar")); len(jars) == 0 {
		t.Skipf("no kafka-clients jar in %s (interop/kafka/start.sh fetches it)", lib)
	}
	cp := filepath.Join(lib, "*")
	src := filepath.Join("kafka", "JavaCompressionProducer.java")
	classes := filepath.Join("kafka", "target", "java-compression")
	class := filepath.Join(classes, "JavaCompressionProducer.class")
	srcInfo, err := os.Stat(src)
	require.NoError(t, err)
	if ci, err := os.Stat(class); err != nil || ci.ModTime().Before(srcInfo.ModTime()) {
		// Compile aside and rename, so that a concurrent run never sees
		// half a class file.
		tmp, err := os.MkdirTemp(filepath.Join("kafka", "target"), "java-compression-")
		require.NoError(t, err)
		defer os.RemoveAll(tmp)
		out, err := exec.Command(javac, "-nowarn", "-d", tmp, "-cp", cp, src).CombinedOutput()
		require.NoError(t, err, "javac %s:\n%s", src, out)
		require.NoError(t, os.MkdirAll(classes, 0o755))
		require.NoError(t, os.Rename(filepath.Join(tmp, "JavaCompressionProducer.class"), class))
	}
	// A small heap, the serial collector and C1 only, as the scripts run
	// their tools: the codecs are native code either way.
	return []string{javaBin, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", cp + string(os.PathListSeparator) + classes, "JavaCompressionProducer"}
}

// createTopics creates topics, each with partitions partitions and one
// replica, in one CreateTopics request, and waits until every one has a
// leader for each partition.
func (c *realCluster) createTopics(t *testing.T, topics []string, partitions int32) {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	for _, topic := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testContext(t), cl)
	require.NoError(t, err)
	for _, rt := range resp.Topics {
		require.NoError(t, kerr.ErrorForCode(rt.ErrorCode), "CreateTopics %s: %s", rt.Topic, deref(rt.ErrorMessage))
	}
	for _, topic := range topics {
		c.waitTopic(t, topic, partitions)
	}
}

// logSizes returns the size in bytes of each topic's log on the broker,
// its partitions 0 to partitions-1 together, from DescribeLogDirs.
func (c *realCluster) logSizes(ctx context.Context, t *testing.T, topics []string, partitions int32) map[string]int64 {
	t.Helper()
	cl := newKgoClient(t, c.addrs)
	defer cl.Close()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, topic := range topics {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic = topic
		for p := range partitions {
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode), "DescribeLogDirs")
	sizes := make(map[string]int64, len(topics))
	for _, d := range resp.Dirs {
		require.NoError(t, kerr.ErrorForCode(d.ErrorCode), "DescribeLogDirs %s", d.Dir)
		for _, rt := range d.Topics {
			for _, p := range rt.Partitions {
				if !p.IsFuture {
					sizes[rt.Topic] += p.Size
				}
			}
		}
	}
	return sizes
}
