package producer

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

const (
	spoolCrashChildEnv = "SAMSA_PRODUCER_SPOOL_CRASH_CHILD"
	// spoolCrashRoundsEnv asks TestSpoolCrashKeepsEveryPersistedRecord
	// for more kills than the default 6
	// (SAMSA_PRODUCER_SPOOL_CRASH_ROUNDS=200 go test -run TestSpoolCrash ./producer/).
	spoolCrashRoundsEnv = "SAMSA_PRODUCER_SPOOL_CRASH_ROUNDS"
	spoolCrashTopic     = "crash"
	spoolCrashParts     = 4
)

func spoolCrashConfig(brokers []string, dir string) Config {
	return Config{
		Brokers:         brokers,
		Linger:          2 * time.Millisecond,
		RetryBackoff:    10 * time.Millisecond,
		RetryBackoffMax: 100 * time.Millisecond,
		Spool: &SpoolConfig{
			Dir:          dir,
			SyncInterval: 5 * time.Millisecond, // position writes and deletions often
			SegmentBytes: 32 << 10,             // rolls often
			MaxBytes:     64 << 20,
		},
	}
}

// TestSpoolCrashChild is the child process of
// TestSpoolCrashKeepsEveryPersistedRecord: it opens a producer on the
// spool (replaying its backlog), then sends until it is killed, writing
// "P value" to stdout once a record's Persisted is closed.
func TestSpoolCrashChild(t *testing.T) {
	dir := os.Getenv(spoolCrashChildEnv)
	if dir == "" {
		t.Skip("the child of TestSpoolCrashKeepsEveryPersistedRecord")
	}
	round := os.Getenv("SAMSA_PRODUCER_SPOOL_CRASH_ROUND")
	p, err := New(spoolCrashConfig(strings.Split(os.Getenv("SAMSA_PRODUCER_SPOOL_CRASH_BROKERS"), ","), dir))
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	var rep persistedReporter
	for i := 0; ; i++ {
		v := round + "-" + strconv.Itoa(i)
		f := p.Send(context.Background(), &Record{Topic: spoolCrashTopic, Key: []byte(strconv.Itoa(i % 13)), Value: []byte(v)})
		rep.add(v, f)
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSpoolCrashKeepsEveryPersistedRecord: a child process sending into a
// write-ahead spool (against a test broker in this process) is SIGKILLed
// at random points (appending, rolling a segment, writing the position,
// deleting segments, replaying the previous round's backlog), and
// restarted on the same directory; a last producer drains the spool.
// Then every record a child reported persisted is in the topic, each
// partition's records (duplicates dropped by spool.Deduper, which the
// samsa-spool header feeds) are in the order they were sent, and the
// duplicates are counted.
func TestSpoolCrashKeepsEveryPersistedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	rounds := envInt(t, spoolCrashRoundsEnv, 6)
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic(spoolCrashTopic, spoolCrashParts))
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "spool")
	persisted := map[string]bool{}
	for round := range rounds {
		out := filepath.Join(tmp, fmt.Sprintf("round-%d.out", round))
		f, err := os.Create(out)
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolCrashChild$")
		cmd.Env = append(os.Environ(),
			spoolCrashChildEnv+"="+dir,
			"SAMSA_PRODUCER_SPOOL_CRASH_ROUND="+strconv.Itoa(round),
			"SAMSA_PRODUCER_SPOOL_CRASH_BROKERS="+strings.Join(c.Addrs(), ","))
		cmd.Stdout, cmd.Stderr = f, f
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(20+rand.IntN(400)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		f.Close()
		lines := readSpoolCrashLines(t, out)
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "P "):
				persisted[l[2:]] = true
			case strings.HasPrefix(l, "E "), strings.HasPrefix(l, "new:"):
				t.Fatalf("round %d: %s", round, l)
			}
		}
	}
	require.NotEmpty(t, persisted)

	// Drain: a producer in this process replays what is left.
	var replayed atomic.Int64
	cfg := spoolCrashConfig(c.Addrs(), dir)
	cfg.Spool.RecoveryHook = func(seq uint64, md RecordMetadata, err error) {
		assert.NoError(t, err, "replayed sequence %d", seq)
		replayed.Add(1)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	backlog := p.spool.Recovery().Unacked
	require.Eventually(t, func() bool { return replayed.Load() >= backlog }, 60*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Close(context.Background()))
	assert.Empty(t, reopenUnacked(t, dir), "the drain left records in the spool")

	var dd spool.Deduper
	found := map[string]bool{}
	dups, total := 0, 0
	for part := range int32(spoolCrashParts) {
		recs, err := c.Records(spoolCrashTopic, part)
		require.NoError(t, err)
		lastRound, lastI := -1, -1
		for _, r := range recs {
			total++
			var hdr []byte
			for _, h := range r.Headers {
				if h.Key == spool.HeaderKey {
					hdr = h.Value
				}
			}
			require.NotNil(t, hdr, "record without %s header", spool.HeaderKey)
			dup, err := dd.Duplicate(spoolCrashTopic, part, hdr)
			require.NoError(t, err)
			v := string(r.Value)
			if dup {
				dups++
				assert.True(t, found[v], "partition %d: %s dropped as a duplicate but never seen", part, v)
				continue
			}
			assert.False(t, found[v], "partition %d: %s kept twice by the Deduper", part, v)
			found[v] = true
			var rd, i int
			_, err = fmt.Sscanf(v, "%d-%d", &rd, &i)
			require.NoError(t, err, "value %q", v)
			assert.True(t, rd > lastRound || rd == lastRound && i > lastI,
				"partition %d: %s after %d-%d: out of send order", part, v, lastRound, lastI)
			lastRound, lastI = rd, i
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
	t.Logf("%d kills, %d records reported persisted, %d stored, %d duplicates dropped by the Deduper, %d lost, %d replayed by the drain",
		rounds, len(persisted), total, dups, lost, backlog)
}

// readSpoolCrashLines returns a child's complete lines (its last may have
// been cut by the kill).
func readSpoolCrashLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// envInt is the integer in the environment variable name (a test's size,
// for a long run), def when it is unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// persistedReporter is how a crash test's child tells its parent what it
// sent: "P value" once a record's Persisted closed, "E value error" for a
// record that failed before. Persisted closes after Send returns (the
// spool's writer groups the writes), in sequence order, so add reports
// the records at the head of what it holds, as far as their outcome is
// known.
type persistedReporter struct {
	waiting []reportedRecord
}

type reportedRecord struct {
	v string
	f *Future
}

// add holds f (the record of value v) and reports what it can; it returns
// how many records it reported persisted.
func (r *persistedReporter) add(v string, f *Future) (persisted int) {
	r.waiting = append(r.waiting, reportedRecord{v, f})
	for len(r.waiting) > 0 {
		w := r.waiting[0]
		select {
		case <-w.f.Persisted():
			os.Stdout.WriteString("P " + w.v + "\n")
			persisted++
		default:
			_, done, err := w.f.Result()
			if !done || err == nil {
				return persisted // neither persisted nor failed yet
			}
			fmt.Println("E", w.v, err)
		}
		r.waiting = r.waiting[1:]
	}
	return persisted
}
