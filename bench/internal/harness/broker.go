package harness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// The brokers Options.Broker may name.
const (
	// BrokerTestbroker is this repository's internal/testbroker as a
	// process: in sink mode (every batch's framing and CRC checked,
	// acknowledged, not stored) unless Options.BrokerStore.
	BrokerTestbroker = "testbroker"
	// BrokerKfake is franz-go's kfake as a process (cmd/kfakebroker): in
	// blackhole mode (kfake.BlackholeProduce: acknowledged, not stored)
	// unless Options.BrokerStore.
	BrokerKfake = "kfake"
	// BrokerKafka is Apache Kafka, one KRaft node started by
	// interop/kafka/start.sh (or the cluster at Options.KafkaBootstrap);
	// it always stores.
	BrokerKafka = "kafka"
)

// Brokers lists the brokers Options.Broker may name, the default first.
var Brokers = []string{BrokerTestbroker, BrokerKfake, BrokerKafka}

// brokerProc is one broker serving one workload's runs.
type brokerProc interface {
	// bootstrap is the address the clients connect to.
	bootstrap() string
	// tlsBootstrap is the address of the broker's TLS listener, trusting
	// the CA in caFile; "" when it serves none.
	tlsBootstrap() string
	// stats returns the broker's cumulative counters.
	stats() (brokerStats, error)
	// stop stops the broker and waits for it.
	stop() error
}

// describeBroker says in words which broker o runs, for the report.
func describeBroker(o Options) string {
	switch o.Broker {
	case BrokerKfake:
		if o.BrokerStore {
			return "kfake (franz-go pkg/kfake, one broker in its own process, storing in memory)" + describeTLS(o)
		}
		return "kfake (franz-go pkg/kfake, one broker in its own process, blackhole: acknowledged, not stored)" + describeTLS(o)
	case BrokerKafka:
		if o.KafkaBootstrap != "" {
			return "Apache Kafka at " + o.KafkaBootstrap + " (started outside the harness)"
		}
		return "Apache Kafka 4.4.0 (one KRaft broker+controller started by interop/kafka/start.sh, storing)"
	default:
		if o.BrokerStore {
			return "testbroker (internal/testbroker in its own process, storing)" + describeTLS(o)
		}
		return "testbroker (internal/testbroker in its own process, sink: checked, acknowledged, not stored)" + describeTLS(o)
	}
}

// describeTLS says in words how the clients reach the broker under
// Options.TLS, or "" without it.
func describeTLS(o Options) string {
	switch {
	case o.TLSCompare:
		return "; every client runs over its plaintext listener (rows without +tls) and over its TLS listener (rows +tls, crypto/tls, ECDSA P-256 certificate from a CA the broker generates) in the same rounds"
	case o.TLS && o.Broker == BrokerKfake:
		return "; its one listener is TLS (kfake.TLS, crypto/tls, ECDSA P-256 certificate from a CA the broker generates)"
	case o.TLS:
		return "; the clients connect to its TLS listener (crypto/tls, ECDSA P-256 certificate from a CA the broker generates)"
	}
	return ""
}

// caFile is where the broker of spec writes its CA certificate under
// Options.TLS, for the clients' -tls-ca.
func caFile(o Options, spec workload.Spec) string {
	return filepath.Join(o.BinDir, "tls-"+spec.Name, "ca.pem")
}

// startBroker starts the broker o names with spec's topic.
func startBroker(ctx context.Context, o Options, spec workload.Spec) (brokerProc, error) {
	switch o.Broker {
	case BrokerKfake:
		args := []string{"-partitions", strconv.Itoa(spec.Partitions), "-topic", spec.Topic()}
		if o.BrokerStore {
			args = append(args, "-store")
		}
		if o.TLS {
			args = append(args, "-tls-dir", filepath.Dir(caFile(o, spec)))
		}
		b, err := startProcBroker(ctx, filepath.Join(o.BinDir, "kfakebroker"), args, false)
		if err == nil && o.TLS {
			b.tlsAddr = b.addr // kfake.TLS: its one listener is TLS
		}
		return b, err
	case BrokerKafka:
		return startKafka(ctx, o, spec, o.launchedKafka)
	default:
		args := []string{"-brokers", "1", "-no-auto-create",
			"-partitions", strconv.Itoa(spec.Partitions), "-topic", spec.Topic()}
		if !o.BrokerStore {
			args = append(args, "-sink")
		}
		if o.TLS {
			args = append(args, "-secure-protocol", "SSL", "-tls-dir", filepath.Dir(caFile(o, spec)))
		}
		return startProcBroker(ctx, filepath.Join(o.BinDir, "testbroker"), args, o.TLS)
	}
}

// procBroker is a broker process that prints its address as the first
// line of stdout and a stats line on SIGUSR1: the testbroker and
// kfakebroker commands.
type procBroker struct {
	cmd     *exec.Cmd
	addr    string
	tlsAddr string
	stderr  *brokerStderr
}

func (b *procBroker) bootstrap() string    { return b.addr }
func (b *procBroker) tlsBootstrap() string { return b.tlsAddr }

// startProcBroker starts bin with args and returns once it listens. With
// waitTLS it also waits for the testbroker command's line naming its SSL
// listeners on stderr, for tlsBootstrap.
func startProcBroker(ctx context.Context, bin string, args []string, waitTLS bool) (*procBroker, error) {
	if i := slices.Index(args, "-tls-dir"); i >= 0 && i+1 < len(args) {
		if err := os.MkdirAll(args[i+1], 0o755); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &procBroker{cmd: cmd, stderr: newBrokerStderr()}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			addr <- sc.Text()
		}
		close(addr)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case a, ok := <-addr:
		if ok {
			b.addr = a
			if !waitTLS {
				return b, nil
			}
			select {
			case line := <-b.stderr.tlsAddrs:
				b.tlsAddr, _, _ = strings.Cut(line, ",") // one broker
				return b, nil
			case <-time.After(30 * time.Second):
				err = errors.New("the broker did not name its SSL listener within 30s")
			case <-ctx.Done():
				err = ctx.Err()
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, err
		}
		_ = cmd.Wait()
		return nil, fmt.Errorf("the broker exited before listening: %s", strings.TrimSpace(b.stderr.String()))
	case <-time.After(30 * time.Second):
		err = errors.New("the broker did not print its address within 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, err
}

// stop interrupts the broker and waits for it, killing it after 10s.
func (b *procBroker) stop() error {
	_ = b.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("broker: %w: %s", err, strings.TrimSpace(b.stderr.String()))
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
		return errors.New("broker: did not stop within 10s of SIGINT; killed")
	}
}

// kafkaBroker is a real Kafka cluster: started by interop/kafka/start.sh
// into dir and stopped by stop.sh, or (dir empty) one started outside the
// harness, which stop leaves running. Its counters are the topic's log
// sizes and end offsets (logStats).
type kafkaBroker struct {
	scripts     string // interop/kafka
	dir         string
	addr        string
	log         *logStats // nil until the topic exists
	deleteTopic string    // deleted by stop when set
	progress    io.Writer // where stop says a deletion failed
}

func (k *kafkaBroker) bootstrap() string    { return k.addr }
func (k *kafkaBroker) tlsBootstrap() string { return "" }

func (k *kafkaBroker) stats() (brokerStats, error) {
	if k.log == nil {
		return brokerStats{}, errors.New("no topic yet")
	}
	return k.log.stats()
}

func (k *kafkaBroker) stop() error {
	if k.log != nil {
		if k.deleteTopic != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TopicNames = []string{k.deleteTopic}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(k.deleteTopic)
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 60_000
			resp, err := req.RequestWith(ctx, k.log.cl)
			cancel()
			if err == nil {
				for _, rt := range resp.Topics {
					err = cmp.Or(err, kerr.ErrorForCode(rt.ErrorCode))
				}
			}
			if err != nil && k.progress != nil {
				// The workload's runs are done and counted: a topic left
				// behind costs disk, not the results.
				fmt.Fprintf(k.progress, "deleting topic %s: %v (left on the broker)\n", k.deleteTopic, err)
			}
			if err == nil {
				// The next workload's topic is made once the broker has
				// dropped this one's logs (see waitLogs).
				if err := k.log.waitLogs(context.Background(), false, topicLogsTimeout); err != nil && k.progress != nil {
					fmt.Fprintf(k.progress, "deleted topic %s: %v\n", k.deleteTopic, err)
				}
			}
			k.deleteTopic = ""
		}
		k.log.close()
		k.log = nil
	}
	if k.dir == "" {
		return nil
	}
	out, err := exec.Command("bash", filepath.Join(k.scripts, "stop.sh"), "-dir", k.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("interop/kafka/stop.sh: %w: %s", err, strings.TrimSpace(string(out)))
	}
	_ = os.RemoveAll(k.dir)
	return nil
}

// topicLogsTimeout bounds the wait for the broker to make (or drop) the
// logs of a workload's topic: W4's 10 000 took it about 15 s on
// 2026-12-05.
const topicLogsTimeout = 3 * time.Minute

// kafkaStartTimeout bounds start.sh, which may fetch the jars first.
const kafkaStartTimeout = 5 * time.Minute

// launchKafka starts a one-node cluster with interop/kafka/start.sh (auto
// creation off) for a whole Run: one JVM, whose JIT warms up once for
// every workload (Run stops it at the end).
func launchKafka(ctx context.Context, o Options) (*kafkaBroker, error) {
	k := &kafkaBroker{scripts: filepath.Join(o.modDir, "..", "interop", "kafka")}
	start := filepath.Join(k.scripts, "start.sh")
	if _, err := os.Stat(start); err != nil {
		return nil, fmt.Errorf("-broker kafka needs interop/kafka/start.sh (or -kafka-bootstrap): %w", err)
	}
	dir, err := os.MkdirTemp("", "peerbench-kafka-")
	if err != nil {
		return nil, err
	}
	k.dir = dir
	sctx, cancel := context.WithTimeout(ctx, kafkaStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, "bash", start, "-brokers", "1", "-dir", dir, "-no-auto-create")
	// Unless SAMSA_KAFKA_JVM_OPTS is set: Kafka's own JVM options
	// (kafkaJVMOpts), not the interop tests' (whose 384 MiB heap W4's
	// 10 000 partitions do not fit in).
	if _, set := os.LookupEnv("SAMSA_KAFKA_JVM_OPTS"); !set { // the user's choice wins (interop/kafka/lib.sh)
		cmd.Env = append(os.Environ(), "SAMSA_KAFKA_JVM_OPTS="+kafkaJVMOpts)
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Run(); err != nil {
		_ = k.stop()
		return nil, fmt.Errorf("interop/kafka/start.sh: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	k.addr = strings.TrimSpace(string(lastLine(stdout.Bytes())))
	if k.addr == "" {
		_ = k.stop()
		return nil, errors.New("interop/kafka/start.sh printed no bootstrap address")
	}
	return k, nil
}

// startKafka creates spec's topic, with spec's partition count, on the
// cluster at o.KafkaBootstrap (the one Run launched, or the user's). With
// deleteTopic its stop deletes the topic again (a cluster the harness
// launched: every workload's log would otherwise stay on disk until the
// end).
func startKafka(ctx context.Context, o Options, spec workload.Spec, deleteTopic bool) (brokerProc, error) {
	k := &kafkaBroker{addr: o.KafkaBootstrap}
	if err := createTopic(ctx, k.addr, spec.Topic(), spec.Partitions); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.addr, ",")...))
	if err != nil {
		return nil, err
	}
	k.log = &logStats{cl: cl, topic: spec.Topic(), partitions: spec.Partitions}
	if deleteTopic {
		k.deleteTopic, k.progress = spec.Topic(), o.Log
	}
	if err := k.log.waitLogs(ctx, true, topicLogsTimeout); err != nil {
		_ = k.stop() // deletes the topic: the next workload does not share the broker with it
		return nil, err
	}
	return k, nil
}

// topicPartitions returns an existing topic's partitions, as the broker
// cl asks knows them.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("topic %s: metadata: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("topic %s: metadata: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("topic %s: metadata: %w", topic, err)
	}
	return resp.Topics[0].Partitions, nil
}

// kafkaJVMOpts are the broker's JVM options: Kafka's own, as
// kafka-server-start.sh (a 1 GiB heap) and kafka-run-class.sh (G1, the
// default tiered JIT) set them, so that the broker runs as its users run
// it. The interop tests' options (C1 only, serial GC) start fast but leave
// the broker's produce path half compiled: on 2026-12-05 W1 went from 2.35
// to 2.95 M records/s for samsa and from 1.82 to 2.23 M for kgo on a
// broker run with these, warm. The JIT's compile time is kept out of the
// measured runs by a round that is not counted (Options.WarmupRecords).
const kafkaJVMOpts = "-Xms1g -Xmx1g -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 " +
	"-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError"

// maxPartitionsPerRequest is how many partitions createTopic asks for in
// one request.
const maxPartitionsPerRequest = 5000

// createTopic creates topic with partitions partitions and replication
// factor 1 (an existing topic with that many partitions will do), and waits
// until every partition has a leader.
func createTopic(ctx context.Context, bootstrap, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// Kafka's controller refuses (POLICY_VIOLATION) a request that makes
	// more than 10 000 metadata records (KAFKA-17870): a topic record and
	// its partitions. W4's 10 000 partitions are made in steps.
	created := min(partitions, maxPartitionsPerRequest)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 120_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(created), 1
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("creating topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	if err != nil {
		// It exists (an earlier run, perhaps one stopped while growing
		// it): grow it from the partitions it has.
		ps, err := topicPartitions(ctx, cl, topic)
		if err != nil {
			return err
		}
		created = len(ps)
		if created > partitions {
			return fmt.Errorf("topic %s exists with %d partitions, not %d", topic, created, partitions)
		}
	}
	for created < partitions {
		created = min(created+maxPartitionsPerRequest, partitions)
		preq := kmsg.NewPtrCreatePartitionsRequest()
		preq.TimeoutMillis = 120_000
		pt := kmsg.NewCreatePartitionsRequestTopic()
		pt.Topic, pt.Count = topic, int32(created)
		preq.Topics = append(preq.Topics, pt)
		presp, perr := preq.RequestWith(ctx, cl)
		if perr != nil {
			return fmt.Errorf("adding partitions to topic %s: %w", topic, perr)
		}
		if len(presp.Topics) != 1 {
			return fmt.Errorf("adding partitions to topic %s: %d topics in the answer", topic, len(presp.Topics))
		}
		if perr := kerr.ErrorForCode(presp.Topics[0].ErrorCode); perr != nil {
			return fmt.Errorf("adding partitions to topic %s (to %d): %w", topic, created, perr)
		}
	}
	for {
		if ps, err := topicPartitions(ctx, cl, topic); err == nil {
			// Fewer: partitions just added may not be in this broker's
			// metadata yet.
			if len(ps) > partitions {
				return fmt.Errorf("topic %s exists with %d partitions, not %d", topic, len(ps), partitions)
			}
			led := 0
			for _, p := range ps {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					led++
				}
			}
			if led == partitions {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: not all of its %d partitions have a leader: %w", topic, partitions, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
