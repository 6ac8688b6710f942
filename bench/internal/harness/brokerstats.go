package harness

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// statsPrefixes start the lines the broker commands print to stderr on
// SIGUSR1:
//
//	testbroker stats: requests=N produce=N batches=N records=N bytes=N
//	kfakebroker stats: produce=N batches=N records=N bytes=N
var statsPrefixes = []string{"testbroker stats:", "kfakebroker stats:"}

// cutStatsPrefix returns line without its stats prefix, and whether it has
// one.
func cutStatsPrefix(line []byte) ([]byte, bool) {
	for _, p := range statsPrefixes {
		if rest, ok := bytes.CutPrefix(line, []byte(p)); ok {
			return rest, true
		}
	}
	return nil, false
}

// statsTimeout bounds the wait for the broker's answer to SIGUSR1.
const statsTimeout = 2 * time.Second

// brokerStats is the part of the broker's counters the report uses. The
// broker's counters are cumulative since it started.
type brokerStats struct {
	// Batches, Records and Bytes are the record batches the broker
	// appended, their records, and their length as produced (headers
	// included, compressed records as sent).
	Batches, Records, Bytes int64
}

// parseStatsLine parses a line of statsPrefixes. Fields are key=value; unknown
// keys are ignored (the broker may add some), and batches, records and
// bytes are required.
func parseStatsLine(line string) (brokerStats, error) {
	restb, ok := cutStatsPrefix([]byte(strings.TrimSpace(line)))
	rest := string(restb)
	if !ok {
		return brokerStats{}, fmt.Errorf("not a stats line: %q", line)
	}
	var st brokerStats
	var seen uint8 // a bit per required field
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return brokerStats{}, fmt.Errorf("stats line %q: field %q is not key=value", line, f)
		}
		var dst *int64
		var bit uint8
		switch k {
		case "batches":
			dst, bit = &st.Batches, 1
		case "records":
			dst, bit = &st.Records, 2
		case "bytes":
			dst, bit = &st.Bytes, 4
		default:
			continue
		}
		if seen&bit != 0 {
			return brokerStats{}, fmt.Errorf("stats line %q: want batches, records and bytes once each", line)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return brokerStats{}, fmt.Errorf("stats line %q: bad %s %q", line, k, v)
		}
		*dst = n
		seen |= bit
	}
	if seen != 7 {
		return brokerStats{}, fmt.Errorf("stats line %q: want batches, records and bytes once each", line)
	}
	return st, nil
}

// since returns the counts between the snapshots prev and s, taken in that
// order by the same broker process. ok is false when a counter went
// backwards (not the same process, or a misread line).
func (s brokerStats) since(prev brokerStats) (d brokerStats, ok bool) {
	d = brokerStats{Batches: s.Batches - prev.Batches, Records: s.Records - prev.Records, Bytes: s.Bytes - prev.Bytes}
	if d.Batches < 0 || d.Records < 0 || d.Bytes < 0 {
		return brokerStats{}, false
	}
	return d, true
}

// brokerStderr is the broker process's stderr: it keeps the tail of the
// other lines for error messages and hands the stats lines to stats.
// Write is called from the exec package's copying goroutine; String from
// any goroutine.
type brokerStderr struct {
	mu      sync.Mutex
	partial []byte     // an unfinished line
	tail    tailBuffer // every line but the stats ones
	stats   chan string
	// tlsAddrs receives the comma-separated addresses of the first
	// tlsListenersPrefix line.
	tlsAddrs chan string
}

// tlsListenersPrefix starts the line the testbroker command prints to
// stderr with -secure-protocol SSL, before its comma-separated addresses.
const tlsListenersPrefix = "testbroker: SSL listeners: "

func newBrokerStderr() *brokerStderr {
	return &brokerStderr{tail: tailBuffer{max: 4096}, stats: make(chan string, 4), tlsAddrs: make(chan string, 1)}
}

func (e *brokerStderr) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.partial = append(e.partial, p...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			break
		}
		line := e.partial[:i+1]
		if _, ok := cutStatsPrefix(line); ok {
			select {
			case e.stats <- string(line):
			default: // nobody asked for it: drop it rather than block the broker
			}
		} else {
			if addrs, ok := bytes.CutPrefix(line, []byte(tlsListenersPrefix)); ok {
				select {
				case e.tlsAddrs <- strings.TrimSpace(string(addrs)):
				default: // a second one: the first stands
				}
			}
			_, _ = e.tail.Write(line)
		}
		e.partial = e.partial[i+1:]
	}
	if len(e.partial) > 64<<10 { // a runaway line: keep its end only
		_, _ = e.tail.Write(e.partial)
		e.partial = e.partial[:0]
	}
	e.partial = append([]byte(nil), e.partial...)
	return len(p), nil
}

func (e *brokerStderr) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tail.String() + string(e.partial)
}

// stats asks the broker for its counters (SIGUSR1) and waits up to
// statsTimeout for its line.
func (b *procBroker) stats() (brokerStats, error) {
	// A line that came too late for an earlier call must not answer this one.
	for len(b.stderr.stats) > 0 {
		<-b.stderr.stats
	}
	if err := b.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return brokerStats{}, fmt.Errorf("signalling the broker: %w", err)
	}
	t := time.NewTimer(statsTimeout)
	defer t.Stop()
	select {
	case line := <-b.stderr.stats:
		return parseStatsLine(line)
	case <-t.C:
		return brokerStats{}, errors.New("the broker printed no stats line within " + statsTimeout.String())
	}
}

// runStats turns successive snapshots of one broker into per-run counts:
// after each client run, next takes a snapshot and returns the counts since
// the previous one. A snapshot that fails breaks the chain until the next
// one that works, so no run is credited with another's batches.
type runStats struct {
	snap func() (brokerStats, error)
	prev brokerStats
	ok   bool // prev is a valid snapshot
}

// start takes the first snapshot, before any client runs.
func (r *runStats) start() error {
	var err error
	r.prev, err = r.snap()
	r.ok = err == nil
	return err
}

// next returns the counts since the previous snapshot; ok is false when
// either snapshot failed or the counters went backwards.
func (r *runStats) next() (d brokerStats, ok bool, err error) {
	cur, err := r.snap()
	if err != nil {
		r.ok = false
		return brokerStats{}, false, err
	}
	if r.ok {
		d, ok = cur.since(r.prev)
	}
	r.prev, r.ok = cur, true
	return d, ok, nil
}

// logStats reads a topic's counters from a broker that stores it (real
// Kafka): Bytes is the sum of its partitions' log sizes (DescribeLogDirs:
// the record batches as the producers sent them, 61-byte headers
// included, compressed; Kafka keeps a producer's batches as they come
// with compression.type=producer, its default), Records the sum of their
// end offsets (ListOffsets, latest: with acks=all on one replica every
// acknowledged record is below it). Batches stays 0: Kafka does not count
// them.
type logStats struct {
	cl         *kgo.Client
	topic      string
	partitions int
}

// statsRequestTimeout bounds each of logStats's requests.
const statsRequestTimeout = 30 * time.Second

// stats reads the counters. Every partition's log is there: startKafka
// waited for them (waitLogs).
func (l *logStats) stats() (brokerStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statsRequestTimeout)
	defer cancel()
	return l.read(ctx)
}

func (l *logStats) read(ctx context.Context) (brokerStats, error) {
	var st brokerStats
	sizes, err := l.logSizes(ctx)
	if err != nil {
		return brokerStats{}, err
	}
	if len(sizes) != l.partitions {
		return brokerStats{}, fmt.Errorf("DescribeLogDirs left partitions out: sizes of %d of %s's %d partitions", len(sizes), l.topic, l.partitions)
	}
	for _, n := range sizes {
		st.Bytes += n
	}

	oreq := kmsg.NewPtrListOffsetsRequest()
	ot := kmsg.NewListOffsetsRequestTopic()
	ot.Topic = l.topic
	for p := range l.partitions {
		op := kmsg.NewListOffsetsRequestTopicPartition()
		op.Partition, op.Timestamp = int32(p), -1 // latest
		ot.Partitions = append(ot.Partitions, op)
	}
	oreq.Topics = append(oreq.Topics, ot)
	oresp, err := oreq.RequestWith(ctx, l.cl) // kgo sends each partition to its leader
	if err != nil {
		return brokerStats{}, fmt.Errorf("ListOffsets: %w", err)
	}
	n := 0
	for _, t := range oresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return brokerStats{}, fmt.Errorf("ListOffsets %s/%d: %w", t.Topic, p.Partition, err)
			}
			st.Records += p.Offset
			n++
		}
	}
	if n != l.partitions {
		return brokerStats{}, fmt.Errorf("ListOffsets: offsets of %d of %s's %d partitions", n, l.topic, l.partitions)
	}
	return st, nil
}

// logSizes returns the size of each of the topic's partitions' logs on
// the brokers (DescribeLogDirs), the largest replica's: a partition whose
// log no broker has yet (or any more) is missing.
func (l *logStats) logSizes(ctx context.Context) (map[int32]int64, error) {
	// Every topic (no Topics): kgo sends the request to every broker, so
	// a topic being deleted, which the brokers' metadata may no longer
	// list, is still seen in the logs that remain. Each partition counts
	// once (its largest replica).
	dreq := kmsg.NewPtrDescribeLogDirsRequest()
	shards := l.cl.RequestSharded(ctx, dreq)
	sizes := map[int32]int64{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("DescribeLogDirs: %w", sh.Err)
		}
		resp := sh.Resp.(*kmsg.DescribeLogDirsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("DescribeLogDirs: %w", err)
		}
		for _, d := range resp.Dirs {
			if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
				return nil, fmt.Errorf("DescribeLogDirs %s: %w", d.Dir, err)
			}
			for _, t := range d.Topics {
				if t.Topic != l.topic {
					continue
				}
				for _, p := range t.Partitions {
					if p.IsFuture {
						continue // a replica being moved: not the log
					}
					sizes[p.Partition] = max(sizes[p.Partition], p.Size)
				}
			}
		}
	}
	return sizes, nil
}

// waitLogs waits, up to timeout, until the brokers have the logs of all
// (present) or none (!present) of the topic's partitions. Kafka answers
// Metadata with a new partition's leader before that leader has made the
// partition's log, and its Produce requests with NOT_LEADER_OR_FOLLOWER
// until it has: a client would measure the broker's set-up, or, where the
// broker never makes a log (needsOwnBroker), fail. A deleted topic's
// logs go once the broker has applied the deletion.
func (l *logStats) waitLogs(ctx context.Context, present bool, timeout time.Duration) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	have := -1 // partitions with a log at the last answer
	var lastErr error
	for {
		sizes, err := l.logSizes(tctx)
		if err == nil {
			have = len(sizes)
			if present && have == l.partitions || !present && have == 0 {
				return nil
			}
		} else if tctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-tctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("topic %s: waiting for its logs: %w", l.topic, ctx.Err())
			}
			switch {
			case have < 0:
				return fmt.Errorf("topic %s: no answer to DescribeLogDirs in %v: %w", l.topic, timeout, cmp.Or(lastErr, tctx.Err()))
			case present:
				return fmt.Errorf("topic %s: the broker made the logs of %d of its %d partitions in %v (its Produce answers NOT_LEADER_OR_FOLLOWER for the others)",
					l.topic, have, l.partitions, timeout)
			default:
				return fmt.Errorf("topic %s: %d of its partitions' logs still there %v after its deletion", l.topic, have, timeout)
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (l *logStats) close() { l.cl.Close() }
