package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-go/samsa/internal/spoolfault"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/spool"
)

const (
	// spoolKafkaKillsEnv sets how many times TestRealKafkaSpoolCrash
	// kills its child (default 24, 12 in CI):
	// SAMSA_SPOOL_KAFKA_KILLS=200 go test -run TestRealKafkaSpoolCrash ./ (in interop/, with SAMSA_KAFKA_BROKERS set).
	spoolKafkaKillsEnv = "SAMSA_SPOOL_KAFKA_KILLS"
	spoolKafkaChildEnv = "SAMSA_SPOOL_KAFKA_CHILD" // the spool directory
	spoolKafkaParts    = 4
	// spoolKafkaTimePoint is the kill point that is no file operation: the
	// parent's SIGKILL after a random time.
	spoolKafkaTimePoint = "time"
)

// spoolKafkaConfig is the child's (and the drain's) producer: acks=all and
// idempotent (the defaults), a write-ahead spool whose segments roll every
// 32 KiB and whose position is written (and acknowledged segments deleted)
// every 5 ms.
func spoolKafkaConfig(brokers []string, dir, progressTopic string) producer.Config {
	cfg := producer.Config{
		Brokers:         brokers,
		Acks:            producer.AcksAll,
		Linger:          2 * time.Millisecond,
		RetryBackoff:    20 * time.Millisecond,
		RetryBackoffMax: 200 * time.Millisecond,
		RequestTimeout:  10 * time.Second,
		Spool: &producer.SpoolConfig{
			Dir:          dir,
			SyncInterval: 5 * time.Millisecond,
			SegmentBytes: 32 << 10,
			MaxBytes:     64 << 20,
		},
	}
	if progressTopic != "" {
		// Exactly once: transactions with a progress record each, a
		// commit every 20 ms so that kills fall inside transactions,
		// between them, and between a commit and its acks.
		cfg.Spool.ExactlyOnce = true
		cfg.Spool.ProgressTopic = progressTopic
		cfg.Spool.CommitInterval = 20 * time.Millisecond
	}
	return cfg
}

// spoolKafkaPoint is where a round kills the child, and the range its
// occurrence count N is drawn from (1..maxN): small enough that the child
// gets there within the round's time.
type spoolKafkaPoint struct {
	op   string
	maxN int
}

var spoolKafkaPoints = []spoolKafkaPoint{
	{spoolKafkaTimePoint, 0},
	{string(spoolfault.SegmentWrite), 3000}, // inside an append (half the entry written)
	{string(spoolfault.SegmentCreate), 8},   // a roll's new segment created (or Open's)
	{string(spoolfault.PositionWrite), 60},  // position.tmp half written
	{string(spoolfault.PositionRename), 60}, // position.tmp written, not renamed
	{string(spoolfault.SegmentRemove), 6},   // an acknowledged segment just deleted
	{string(spoolfault.SegmentScan), 1},     // New's replay: Open's first read of a segment
	{string(spoolfault.SegmentRead), 1},     // New's replay: Unacked reading the backlog back (there is one if a record was in flight)
}

// TestSpoolKafkaChild is the child process of TestRealKafkaSpoolCrash: it
// registers a hook that SIGKILLs the process at the Nth occurrence of the
// file operation the parent chose (printing "K op" first), opens a
// producer on the spool (replaying its backlog), then sends until it is
// killed, printing "P value" once a record's Persisted is closed.
func TestSpoolKafkaChild(t *testing.T) {
	dir := os.Getenv(spoolKafkaChildEnv)
	if dir == "" {
		t.Skip("the child of TestRealKafkaSpoolCrash")
	}
	if op, n := os.Getenv("SAMSA_SPOOL_KAFKA_POINT"), os.Getenv("SAMSA_SPOOL_KAFKA_N"); op != spoolKafkaTimePoint {
		at, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			fmt.Println("bad N:", err)
			os.Exit(2)
		}
		faults, _ := spoolfault.Register(dir)
		var seen atomic.Int64
		faults.SetHook(func(got spoolfault.Op, _ string) {
			if string(got) != op || seen.Add(1) != at {
				return
			}
			os.Stdout.WriteString("K " + op + "\n")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // this operation goes no further
		})
	}
	round := os.Getenv("SAMSA_SPOOL_KAFKA_ROUND")
	topic := os.Getenv("SAMSA_SPOOL_KAFKA_TOPIC")
	p, err := producer.New(spoolKafkaConfig(strings.Split(os.Getenv("SAMSA_SPOOL_KAFKA_BROKERS"), ","), dir, os.Getenv("SAMSA_SPOOL_KAFKA_PROGRESS")))
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	type sent struct {
		v string
		f *producer.Future
	}
	var waiting []sent
	for i := 0; ; i++ {
		v := round + "-" + strconv.Itoa(i)
		f := p.Send(context.Background(), &producer.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 13)), Value: []byte(v)})
		// Persisted closes once the spool's writer has the record in
		// the file (grouped writes), after Send returns, in sequence
		// order: report the records at the head whose outcome is known
		// (the producer package's crash child does the same).
		waiting = append(waiting, sent{v, f})
		for len(waiting) > 0 && reportSent(waiting[0].v, waiting[0].f) {
			waiting = waiting[1:]
		}
		if i%16 == 15 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestRealKafkaSpoolCrash (issue 34's crash proof): a child process sends
// into a write-ahead spool on real Kafka (acks=all, idempotent, 4
// partitions, segments rolling every 32 KiB, the position written every
// 5 ms) and is SIGKILLed, round after round, at a point the parent draws:
// inside an append, at a segment roll, inside the position file's write,
// before its rename, after a segment's deletion, during New's replay
// (Open's scan, or Unacked reading the backlog back), or
// after a random time. Each round restarts the child on the same spool
// (it replays), and a copy of the spool as the kill left it must open
// with no damage but a torn tail. Then a producer drains the spool, and a
// read_committed consumer checks that every record a child reported
// persisted is in the topic, that each partition's records (duplicates
// dropped by spool.Deduper, fed the samsa-spool header) come in the
// order sent, and counts the duplicates: in exactly-once mode
// (SpoolConfig.ExactlyOnce, a subtest of its own) there must be none.
func TestRealKafkaSpoolCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	c := realKafka(t)
	for _, eos := range []bool{false, true} {
		name := "at-least-once"
		if eos {
			name = "exactly-once"
		}
		t.Run(name, func(t *testing.T) { spoolKafkaCrash(t, c, eos) })
	}
}

func spoolKafkaCrash(t *testing.T, c *realCluster, eos bool) {
	kills := recordCount(24, 12)
	if s := os.Getenv(spoolKafkaKillsEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		kills = n
	}
	start := time.Now()
	topic := uniqueTopic("spool-crash")
	c.createTopic(t, topic, spoolKafkaParts, 1, nil)
	progress := ""
	if eos {
		progress = topic + "-progress" // created compacted by the first child
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "spool")

	persisted := map[string]bool{}
	killsAt := map[string]int{}   // the point each kill happened at
	unreached := map[string]int{} // rounds whose point did not come: killed by the timer
	var tornBytes int64
	for round := range kills {
		pt := spoolKafkaPoints[round%len(spoolKafkaPoints)]
		n := 0
		if pt.maxN > 0 {
			n = 1 + rand.IntN(pt.maxN)
		}
		out := filepath.Join(tmp, fmt.Sprintf("round-%d.out", round))
		f, err := os.Create(out)
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolKafkaChild$")
		cmd.Env = append(os.Environ(),
			spoolKafkaChildEnv+"="+dir,
			"SAMSA_SPOOL_KAFKA_POINT="+pt.op,
			"SAMSA_SPOOL_KAFKA_N="+strconv.Itoa(n),
			"SAMSA_SPOOL_KAFKA_ROUND="+strconv.Itoa(round),
			"SAMSA_SPOOL_KAFKA_TOPIC="+topic,
			"SAMSA_SPOOL_KAFKA_PROGRESS="+progress,
			"SAMSA_SPOOL_KAFKA_BROKERS="+strings.Join(c.addrs, ","))
		cmd.Stdout, cmd.Stderr = f, f
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		wait := time.Duration(50+rand.IntN(500)) * time.Millisecond
		switch spoolfault.Op(pt.op) {
		case spoolKafkaTimePoint:
		case spoolfault.SegmentScan, spoolfault.SegmentRead:
			wait = 1500 * time.Millisecond // New's replay is over by then
		default:
			wait = 4 * time.Second // the hook kills it long before, if its point comes
		}
		select {
		case err = <-exited:
		case <-time.After(wait):
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			err = <-exited
		}
		f.Close()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "round %d: the child ended with %v", round, err)
		lines := readSpoolCrashLines(t, out)
		killed := ""
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "P "):
				persisted[l[2:]] = true
			case strings.HasPrefix(l, "K "):
				killed = l[2:]
			case strings.HasPrefix(l, "E "), strings.HasPrefix(l, "new:"), strings.HasPrefix(l, "bad N:"):
				t.Fatalf("round %d: %s", round, l)
			}
		}
		switch {
		case killed != "":
			require.Equal(t, pt.op, killed, "round %d", round)
			killsAt[killed]++
		case pt.op == spoolKafkaTimePoint:
			killsAt[spoolKafkaTimePoint]++
		default:
			unreached[pt.op]++
			killsAt[spoolKafkaTimePoint]++
		}
		tornBytes += checkSpoolCopy(t, dir, filepath.Join(tmp, "copy"), round)
	}
	require.NotEmpty(t, persisted)

	// Drain: a producer in this process replays what is left.
	sp, err := spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	backlog := sp.Recovery().Unacked
	require.NoError(t, sp.Close())
	var replayed atomic.Int64
	cfg := spoolKafkaConfig(c.addrs, dir, progress)
	cfg.Spool.RecoveryHook = func(seq uint64, md producer.RecordMetadata, err error) {
		assert.NoError(t, err, "replayed sequence %d", seq)
		replayed.Add(1)
	}
	p, err := producer.New(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return replayed.Load() >= backlog }, 60*time.Second, 10*time.Millisecond,
		"the drain replayed %d of %d records", replayed.Load(), backlog)
	ctx := realContext(t, 30*time.Second)
	require.NoError(t, p.Close(ctx))
	sp, err = spool.Open(spool.Options{Dir: dir})
	require.NoError(t, err)
	assert.Zero(t, sp.Recovery().Unacked, "the drain left records in the spool")
	require.NoError(t, sp.Close())

	// Verify with a read_committed consumer.
	recs := readSpoolTopic(t, c.addrs, topic)
	var dd spool.Deduper
	found := map[string]bool{}
	dups, total := 0, 0
	for part := range int32(spoolKafkaParts) {
		lastRound, lastI := -1, -1
		for _, r := range recs[part] {
			total++
			i := slices.IndexFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == spool.HeaderKey })
			require.GreaterOrEqual(t, i, 0, "record without the %s header", spool.HeaderKey)
			dup, err := dd.Duplicate(topic, part, r.Headers[i].Value)
			require.NoError(t, err)
			v := string(r.Value)
			if dup {
				dups++
				assert.True(t, found[v], "partition %d: %s dropped as a duplicate but never seen", part, v)
				continue
			}
			assert.False(t, found[v], "partition %d: %s kept twice by the Deduper", part, v)
			found[v] = true
			var rd, n int
			_, err = fmt.Sscanf(v, "%d-%d", &rd, &n)
			require.NoError(t, err, "value %q", v)
			assert.True(t, rd > lastRound || rd == lastRound && n > lastI,
				"partition %d: %s after %d-%d: out of send order", part, v, lastRound, lastI)
			lastRound, lastI = rd, n
		}
	}
	lost := 0
	for v := range persisted {
		if !found[v] {
			lost++
			if lost <= 10 {
				t.Errorf("record %s was reported persisted and is not in the topic", v)
			}
		}
	}
	if eos {
		assert.Zero(t, dups, "exactly once: a read_committed consumer saw duplicates")
	}
	var points []string
	for _, pt := range spoolKafkaPoints {
		points = append(points, fmt.Sprintf("%s %d", pt.op, killsAt[pt.op]))
	}
	t.Logf("%d kills (%s; rounds whose point did not come, killed by the timer instead: %v) in %v: %d records reported persisted, "+
		"%d stored (%d distinct records sent), %d lost, %d duplicates dropped by the Deduper, %d replayed by the drain, %d torn-tail bytes truncated (exactly once: %v)",
		kills, strings.Join(points, ", "), unreached, time.Since(start).Round(time.Second), len(persisted),
		total, len(found), lost, dups, backlog, tornBytes, eos)
}

// checkSpoolCopy copies the spool directory as a kill left it and opens
// the copy: no damage may show but a torn tail (a write the kill cut),
// whose bytes it returns. The child then recovers the original itself.
func checkSpoolCopy(t *testing.T, dir, cp string, round int) int64 {
	t.Helper()
	require.NoError(t, os.RemoveAll(cp))
	require.NoError(t, os.MkdirAll(cp, 0o755))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0 // killed before New made it
	}
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		src, err := os.Open(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		dst, err := os.Create(filepath.Join(cp, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(dst, src)
		require.NoError(t, err)
		src.Close()
		require.NoError(t, dst.Close())
	}
	sp, err := spool.Open(spool.Options{Dir: cp})
	require.NoError(t, err, "round %d: open a copy of the spool", round)
	rec := sp.Recovery()
	require.NoError(t, sp.Close())
	assert.Zero(t, rec.DamagedRegions, "round %d: damaged regions", round)
	assert.Zero(t, rec.SkippedRecords, "round %d: records lost to damage", round)
	assert.False(t, rec.PositionLost, "round %d: position file lost", round)
	return rec.TruncatedBytes
}

// readSpoolTopic reads every record of topic's partitions, up to their end
// offsets (or, for a transactional topic, until nothing more comes), with a
// read_committed consumer.
func readSpoolTopic(t *testing.T, addrs []string, topic string) map[int32][]*kgo.Record {
	t.Helper()
	ctx := realContext(t, 120*time.Second)
	cl := newKgoClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	// A transactional topic ends with control records (commit and abort
	// markers) that a consumer never gets, and aborted records it skips:
	// there the read ends once nothing new came for 3 s. Stopping early
	// can only make the caller find a record missing, never hide one.
	progress := time.Now()
	for !done() && time.Since(progress) < 3*time.Second {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		require.NoError(t, ctx.Err(), "read %v of %v", next, want)
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("partition %d: %v", p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			next[r.Partition] = r.Offset + 1
			progress = time.Now()
		})
	}
	return out
}

// readSpoolCrashLines returns a child's complete lines (its last may have
// been cut by the kill).
func readSpoolCrashLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	s := string(b)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(s[:i], "\n")
}

// reportSent prints "P value" if f's record is persisted, "E value error"
// if it failed first; false while neither is known.
func reportSent(v string, f *producer.Future) bool {
	select {
	case <-f.Persisted():
		os.Stdout.WriteString("P " + v + "\n")
		return true
	default:
	}
	_, done, err := f.Result()
	if !done || err == nil {
		return false
	}
	fmt.Println("E", v, err)
	return true
}
