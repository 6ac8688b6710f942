package producer

import (
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
)

const (
	spoolEOSChildEnv = "SAMSA_PRODUCER_SPOOL_EOS_CHILD"
	// spoolEOSRoundsEnv asks TestSpoolExactlyOnceCrash's random case for
	// more kills than the default 6.
	spoolEOSRoundsEnv = "SAMSA_PRODUCER_SPOOL_EOS_ROUNDS"
)

func spoolEOSConfig(brokers []string, dir string) Config {
	cfg := spoolCrashConfig(brokers, dir)
	cfg.Spool.ExactlyOnce = true
	cfg.Spool.CommitInterval = 5 * time.Millisecond
	return cfg
}

// TestSpoolEOSCrashChild is the child process of
// TestSpoolExactlyOnceCrash: it opens an exactly-once producer on the
// spool (skipping what was committed, sending the rest of the backlog),
// then sends until it is killed, writing "P value" once a record's
// Persisted is closed and "S n" when the count of duplicates skipped
// changes. With a stage (appended, committed) it kills itself there, at
// the first transaction that carries one of its own records.
func TestSpoolEOSCrashChild(t *testing.T) {
	dir := os.Getenv(spoolEOSChildEnv)
	if dir == "" {
		t.Skip("the child of TestSpoolExactlyOnceCrash")
	}
	round := os.Getenv("SAMSA_PRODUCER_SPOOL_EOS_ROUND")
	var armed atomic.Bool
	if stage := os.Getenv("SAMSA_PRODUCER_SPOOL_EOS_STAGE"); stage != "" {
		eosTestHook = func(s string) {
			if s == stage && armed.Load() {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}
	p, err := New(spoolEOSConfig(strings.Split(os.Getenv("SAMSA_PRODUCER_SPOOL_EOS_BROKERS"), ","), dir))
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	skipped := int64(0)
	var rep persistedReporter
	for i := 0; ; i++ {
		v := round + "-" + strconv.Itoa(i)
		f := p.Send(context.Background(), &Record{Topic: spoolCrashTopic, Key: []byte(strconv.Itoa(i % 13)), Value: []byte(v)})
		if rep.add(v, f) > 0 {
			armed.Store(true)
		}
		if n := p.SpoolExactlyOnceMetrics().DuplicatesSkipped; n != skipped {
			skipped = n
			fmt.Println("S", n)
		}
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSpoolExactlyOnceCrash: a child process sending into an exactly-once
// spool (against a test broker in this process) is SIGKILLed in the
// middle of a transaction (its records appended, not committed), right
// after a commit (before the acks reach the position file), or at random
// points (during the previous round's replay too), and restarted on the
// same directory; a last producer drains the spool. Then a read_committed
// reader finds every record a child reported persisted exactly once, in
// send order per partition: 0 duplicates. After the crash past a commit,
// the restart reports the committed records as duplicates skipped.
func TestSpoolExactlyOnceCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	rounds := envInt(t, spoolEOSRoundsEnv, 6)
	cases := []struct {
		name        string
		stage       string // where the child kills itself; "" at random
		rounds      int
		wantSkipped bool
	}{
		{name: "after commit", stage: "committed", rounds: 1, wantSkipped: true},
		{name: "mid transaction", stage: "appended", rounds: 1},
		{name: "random", rounds: rounds},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic(spoolCrashTopic, spoolCrashParts))
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "spool")
			persisted := map[string]bool{}
			var childSkipped int64
			for round := range tc.rounds {
				out := filepath.Join(tmp, fmt.Sprintf("round-%d.out", round))
				f, err := os.Create(out)
				require.NoError(t, err)
				cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolEOSCrashChild$")
				cmd.Env = append(os.Environ(),
					spoolEOSChildEnv+"="+dir,
					"SAMSA_PRODUCER_SPOOL_EOS_ROUND="+strconv.Itoa(round),
					"SAMSA_PRODUCER_SPOOL_EOS_STAGE="+tc.stage,
					"SAMSA_PRODUCER_SPOOL_EOS_BROKERS="+strings.Join(c.Addrs(), ","))
				cmd.Stdout, cmd.Stderr = f, f
				require.NoError(t, cmd.Start())
				if tc.stage == "" {
					time.Sleep(time.Duration(20+rand.IntN(400)) * time.Millisecond)
					require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				} else {
					done := make(chan struct{})
					go func() {
						select {
						case <-done:
						case <-time.After(30 * time.Second):
							cmd.Process.Signal(syscall.SIGKILL) // did not kill itself
						}
					}()
					_ = cmd.Wait()
					close(done)
				}
				_ = cmd.Wait()
				f.Close()
				var roundSkipped int64 // the child prints its running count
				for _, l := range readSpoolCrashLines(t, out) {
					switch {
					case strings.HasPrefix(l, "P "):
						persisted[l[2:]] = true
					case strings.HasPrefix(l, "S "):
						n, err := strconv.ParseInt(l[2:], 10, 64)
						require.NoError(t, err)
						roundSkipped = n
					case strings.HasPrefix(l, "E "), strings.HasPrefix(l, "new:"):
						t.Fatalf("round %d: %s", round, l)
					}
				}
				childSkipped += roundSkipped
				if tc.stage != "" {
					require.Equal(t, -1, cmd.ProcessState.ExitCode(), "the child killed itself at %s", tc.stage)
				}
			}
			require.NotEmpty(t, persisted)

			// Drain: a producer in this process sends what is left.
			var recovered atomic.Int64
			cfg := spoolEOSConfig(c.Addrs(), dir)
			cfg.Spool.RecoveryHook = func(seq uint64, md RecordMetadata, err error) {
				assert.NoError(t, err, "backlog sequence %d", seq)
				recovered.Add(1)
			}
			p, err := New(cfg)
			require.NoError(t, err)
			backlog := p.spool.Recovery().Unacked
			require.Eventually(t, func() bool { return recovered.Load() >= backlog }, 60*time.Second, 10*time.Millisecond)
			skipped := p.SpoolExactlyOnceMetrics().DuplicatesSkipped
			require.NoError(t, p.Close(context.Background()))
			assert.Empty(t, reopenUnacked(t, dir), "the drain left records in the spool")
			if tc.wantSkipped {
				assert.Positive(t, skipped, "the records committed before the kill are skipped, not sent again")
			}

			found := map[string]int{}
			dups, total := 0, 0
			for part := range int32(spoolCrashParts) {
				values, _ := committedRecords(t, c, spoolCrashTopic, part)
				lastRound, lastI := -1, -1
				for _, v := range values {
					total++
					found[v]++
					if found[v] > 1 {
						dups++
						continue
					}
					var rd, i int
					_, err := fmt.Sscanf(v, "%d-%d", &rd, &i)
					require.NoError(t, err, "value %q", v)
					assert.True(t, rd > lastRound || rd == lastRound && i > lastI,
						"partition %d: %s after %d-%d: out of send order", part, v, lastRound, lastI)
					lastRound, lastI = rd, i
				}
			}
			lost := 0
			for v := range persisted {
				if found[v] == 0 {
					lost++
					if lost <= 10 {
						t.Errorf("record %s was reported persisted and is not committed", v)
					}
				}
			}
			assert.Zero(t, dups, "read_committed sees each record once")
			stored := 0
			for part := range int32(spoolCrashParts) {
				recs, err := c.Records(spoolCrashTopic, part)
				require.NoError(t, err)
				stored += len(recs)
			}
			t.Logf("%d kills, %d records reported persisted, %d committed (%d in the log, aborted ones included), %d duplicates, %d lost, %d backlog at the drain, %d duplicates skipped by the drain, %d by the children",
				tc.rounds, len(persisted), total, stored, dups, lost, backlog, skipped, childSkipped)
		})
	}
}
