package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	crashChildEnv = "SAMSA_SPOOL_CRASH_CHILD"
	lockChildEnv  = "SAMSA_SPOOL_LOCK_CHILD"
	// crashRoundsEnv asks TestCrashKeepsEveryPersistedRecord for more
	// kills than CI's (SAMSA_SPOOL_CRASH_ROUNDS=300 go test -run TestCrash ./spool/).
	crashRoundsEnv = "SAMSA_SPOOL_CRASH_ROUNDS"
)

func runLockChild(dir string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	return cmd.CombinedOutput()
}

// lockChild is the child process of TestLockRefusesASecondOpen.
func lockChild() int {
	s, err := Open(Options{Dir: os.Getenv(lockChildEnv)})
	if errors.Is(err, ErrLocked) {
		fmt.Println("locked")
		return 3
	}
	if err != nil {
		fmt.Println(err)
		return 2
	}
	s.Close()
	return 0
}

func crashRec(i int) *Record {
	return &Record{
		Topic:     "crash",
		Partition: int32(i % 7),
		Timestamp: time.UnixMilli(int64(i)),
		Key:       []byte(strconv.Itoa(i)),
		Value:     bytes.Repeat([]byte{byte(i)}, 50+i%700),
	}
}

func crashOptions(dir string, policy SyncPolicy) Options {
	return Options{Dir: dir, Sync: policy, SegmentBytes: 16 << 10, MaxBytes: 8 << 20, SyncInterval: 5 * time.Millisecond}
}

// crashChild replays (acking some records), then appends until it is
// killed: "P seq i" once Append returned for record i, or once Persisted
// covered it after Write, "A seq" before acknowledging seq.
func crashChild() int {
	policy, _ := ParseSyncPolicy(os.Getenv("SAMSA_SPOOL_CRASH_POLICY"))
	start, _ := strconv.Atoi(os.Getenv("SAMSA_SPOOL_CRASH_START"))
	s, err := Open(crashOptions(os.Getenv(crashChildEnv), policy))
	if err != nil {
		fmt.Println("open:", err)
		return 2
	}
	say := func(format string, args ...any) { os.Stdout.WriteString(fmt.Sprintf(format, args...)) }
	for e, err := range s.Unacked() {
		if err != nil {
			say("error %v\n", err)
			return 2
		}
		if rand.IntN(20) != 0 {
			say("A %d\n", e.Seq)
			s.Ack(e.Seq)
		}
	}
	// Acks mostly oldest first, some out of order, so that the contiguous
	// position moves, position files are written and segments deleted
	// while the child may be killed.
	var persisted []uint64
	for i := start; ; i++ {
		if rand.IntN(3) == 0 {
			// A group of Writes, reported persisted as soon as Persisted
			// (polled, or Sync's bound under SyncAlways) covers each: a
			// kill right after must find them (Persisted is never ahead
			// of the file). Some are acknowledged while still buffered.
			n := 1 + rand.IntN(40)
			first := i
			var seqs []uint64
			acked := map[uint64]bool{}
			for ; i < first+n; i++ {
				seq, err := s.Write(context.Background(), crashRec(i))
				if err != nil {
					say("error %v\n", err)
					return 2
				}
				seqs = append(seqs, seq)
				if rand.IntN(10) == 0 {
					say("A %d\n", seq)
					s.Ack(seq)
					acked[seq] = true
				}
			}
			i--
			for k := 0; k < len(seqs); {
				bound := s.Persisted()
				if policy == SyncAlways && bound <= seqs[k] {
					var err error
					if bound, err = s.Sync(); err != nil {
						say("error %v\n", err)
						return 2
					}
				}
				for ; k < len(seqs) && seqs[k] < bound; k++ {
					if !acked[seqs[k]] {
						say("P %d %d\n", seqs[k], first+k)
						persisted = append(persisted, seqs[k])
					}
				}
				runtime.Gosched()
			}
		} else {
			seq, err := s.Append(context.Background(), crashRec(i))
			if err != nil {
				say("error %v\n", err)
				return 2
			}
			say("P %d %d\n", seq, i)
			persisted = append(persisted, seq)
		}
		if len(persisted) > 20 && rand.IntN(2) == 0 {
			k := 0
			if rand.IntN(4) == 0 {
				k = rand.IntN(len(persisted))
			}
			say("A %d\n", persisted[k])
			s.Ack(persisted[k])
			persisted = append(persisted[:k], persisted[k+1:]...)
		}
	}
}

// A child appending under each sync policy is SIGKILLed at random
// points (appending, rolling, writing the position, deleting segments,
// replaying); after each kill the spool reopens with every record the
// child was told was persisted and did not acknowledge, in sequence order
// and intact.
func TestCrashKeepsEveryPersistedRecord(t *testing.T) {
	rounds := 9
	if v, err := strconv.Atoi(os.Getenv(crashRoundsEnv)); err == nil && v > 0 {
		rounds = v
	}
	dir := t.TempDir()
	next := 0
	persisted := map[uint64]int{} // seq → record number, not acknowledged
	var kills, records, acked int
	var deleted int
	seen := map[string]bool{}
	ackedSeqs := map[uint64]bool{} // acknowledged by a child: a replay of one is a duplicate
	var dups int
	var truncated int64
	for round := range rounds {
		policy := []SyncPolicy{SyncAlways, SyncInterval, SyncNone}[round%3]
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir,
			"SAMSA_SPOOL_CRASH_POLICY="+policy.String(), "SAMSA_SPOOL_CRASH_START="+strconv.Itoa(next))
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(30+rand.IntN(200)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		kills++
		text := out.String()
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i]
		} else {
			text = ""
		}
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "P":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				i, _ := strconv.Atoi(f[2])
				persisted[seq] = i
				next = max(next, i+1)
				records++
			case len(f) == 2 && f[0] == "A":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				delete(persisted, seq)
				ackedSeqs[seq] = true
				acked++
			case line == "":
			default:
				t.Fatalf("round %d: the child said %q", round, line)
			}
		}

		s, err := Open(crashOptions(dir, policy))
		if err != nil {
			t.Fatalf("round %d: Open after the kill: %v", round, err)
		}
		found := map[uint64]bool{}
		var last uint64
		for e, err := range s.Unacked() {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if len(found) > 0 && e.Seq <= last {
				t.Fatalf("round %d: sequence %d after %d", round, e.Seq, last)
			}
			last = e.Seq
			found[e.Seq] = true
			if ackedSeqs[e.Seq] {
				dups++
				delete(ackedSeqs, e.Seq)
			}
			i, err := strconv.Atoi(string(e.Key))
			if err != nil {
				t.Fatalf("round %d: entry %d has key %q", round, e.Seq, e.Key)
			}
			sameRecord(t, crashRec(i), e.Record)
			if want, ok := persisted[e.Seq]; ok && want != i {
				t.Fatalf("round %d: sequence %d holds record %d, want %d", round, e.Seq, i, want)
			}
			next = max(next, i+1)
		}
		for seq, i := range persisted {
			if !found[seq] {
				t.Fatalf("round %d (%s): record %d (sequence %d) reported persisted is missing; recovery %+v",
					round, policy, i, seq, s.Recovery())
			}
		}
		if r := s.Recovery(); r.DamagedRegions != 0 || r.SkippedRecords != 0 {
			t.Fatalf("round %d: a kill left damage inside a segment: %+v", round, r)
		}
		truncated += s.Recovery().TruncatedBytes
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		names, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
		now := map[string]bool{}
		for _, n := range names {
			now[n] = true
			seen[n] = true
		}
		for n := range seen {
			if !now[n] {
				deleted++
				delete(seen, n)
			}
		}
	}
	t.Logf("%d kills, %d records reported persisted, %d acks, 0 lost, %d acknowledged records replayed (their acks died with the child: duplicates a producer would send); %d segments deleted, %d bytes of torn tails truncated",
		kills, records, acked, dups, deleted, truncated)
}
