package harness

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// Issue 6's targets against Baseline on every workload (issue 17's,
// stricter and per workload, are in targets.go).
const (
	// TargetCPURatio is the highest acceptable ours/kgo CPU per record.
	TargetCPURatio = 0.7
	// TargetThroughputRatio is the lowest acceptable ours/kgo records/s.
	TargetThroughputRatio = 1.3
)

func numCPU() int { return runtime.NumCPU() }

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize sets the medians from the successful runs.
func (s *Summary) summarize() {
	var rps, cpu, pcpu, rss, perBatch, wire, codec []float64
	for _, r := range s.Runs {
		if !r.OK() {
			continue
		}
		rps = append(rps, r.RecordsPerSec)
		cpu = append(cpu, r.CPUNsPerRecord)
		pcpu = append(pcpu, r.ProcessCPUNsPerRecord)
		rss = append(rss, float64(r.PeakRSSBytes))
		if r.ProfileCPU > 0 {
			codec = append(codec, float64(r.CodecCPU)/float64(r.ProfileCPU))
		}
		if r.Batches > 0 && r.BrokerRecords > 0 {
			perBatch = append(perBatch, r.RecordsPerBatch())
		}
		if r.BrokerRecords > 0 && r.WireBytes > 0 { // real Kafka: no batch count
			wire = append(wire, r.WireBytesPerRecord())
		}
	}
	s.OK = len(rps)
	s.RecordsPerSec, s.CPUNsPerRecord, s.PeakRSSBytes = median(rps), median(cpu), int64(median(rss))
	s.RecordsPerBatch, s.WireBytesPerRecord = median(perBatch), median(wire)
	s.ProcessCPUNsPerRecord = median(pcpu)
	s.ProfiledRuns = len(codec)
	if len(codec) > 0 {
		s.CodecShare = median(codec)
		s.CodecNsPerRecord = s.CodecShare * s.CPUNsPerRecord
		s.RestNsPerRecord = s.CPUNsPerRecord - s.CodecNsPerRecord
	}
}

// MedianRSSRun returns the successful run whose peak RSS is the summary's
// median (the closest one), for its RSS series; nil without one.
func (s *Summary) MedianRSSRun() *RunResult {
	var best *RunResult
	for i := range s.Runs {
		r := &s.Runs[i]
		if !r.OK() || len(r.RSSKiB) == 0 {
			continue
		}
		if best == nil || abs64(r.PeakRSSBytes-s.PeakRSSBytes) < abs64(best.PeakRSSBytes-s.PeakRSSBytes) {
			best = r
		}
	}
	return best
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// ratios sets every summary's ratios to ours.
func (w *WorkloadReport) ratios() {
	for i := range w.Clients {
		s := &w.Clients[i]
		ours := w.summary(Ours)
		if strings.HasSuffix(s.Client, TLSSuffix) {
			ours = w.summary(Ours + TLSSuffix) // TLS rows compare with ours over TLS
		}
		if ours == nil || ours.OK == 0 || s.OK == 0 {
			continue
		}
		s.ThroughputRatio = ours.RecordsPerSec / s.RecordsPerSec
		s.CPURatio = ours.CPUNsPerRecord / s.CPUNsPerRecord
		if ours.RestNsPerRecord > 0 && s.RestNsPerRecord > 0 {
			s.RestRatio = ours.RestNsPerRecord / s.RestNsPerRecord
		}
	}
}

func (w *WorkloadReport) summary(client string) *Summary {
	for i := range w.Clients {
		if w.Clients[i].Client == client {
			return &w.Clients[i]
		}
	}
	return nil
}

// Target reports whether ours meets issue 6's targets against Baseline on
// this workload, and says why in words. ok is false when either has no
// successful run.
func (w *WorkloadReport) Target() (ok bool, verdict string) {
	base := w.summary(Baseline)
	if base == nil || base.OK == 0 || w.summary(Ours) == nil || w.summary(Ours).OK == 0 {
		return false, fmt.Sprintf("no comparison with %s (a client has no successful run)", Baseline)
	}
	cpuOK := base.CPURatio <= TargetCPURatio
	rpsOK := base.ThroughputRatio >= TargetThroughputRatio
	word := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT met"
	}
	return cpuOK && rpsOK, fmt.Sprintf("throughput %.2f× %s (issue 6's target ≥ %.1f: %s), CPU/record %.2f× %s (issue 6's target ≤ %.1f: %s)",
		base.ThroughputRatio, Baseline, TargetThroughputRatio, word(rpsOK),
		base.CPURatio, Baseline, TargetCPURatio, word(cpuOK))
}

// Describe returns the workload in words: "W1, 1000000 × 100 B text,
// unkeyed, no compression, 8 partitions".
func Describe(s workload.Spec) string {
	keys := "unkeyed"
	if s.Keys > 0 {
		keys = fmt.Sprintf("%d keys %s", s.Keys, s.KeyOrder)
	}
	comp := s.Compression
	if comp == "none" {
		comp = "no compression"
	}
	size := fmt.Sprintf("%d B", s.ValueSize)
	if s.ValueSize%1024 == 0 {
		size = fmt.Sprintf("%d KiB", s.ValueSize/1024)
	}
	id := ""
	if s.ID != "" {
		id = s.ID + ", "
	}
	return fmt.Sprintf("%s%d × %s %s, %s, %s, %d partitions", id, s.Records, size, s.Values, keys, comp, s.Partitions)
}

// mib formats n bytes as "32 MiB".
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// BufferNote says in words what each client buffers under buffer memory
// n: the bound each has, or that it has none.
func BufferNote(n int64) string {
	return fmt.Sprintf("Buffer memory: %s for every client with such a bound (samsa Config.BufferMemory: batch buffers at their allocated size "+
		"and a completion per record; kgo MaxBufferedBytes: keys, values and headers, with its default MaxBufferedRecords 50 000 besides; "+
		"Java buffer.memory: batch buffers of batch.size; librdkafka queue.buffering.max.kbytes: queued messages, with its default "+
		"queue.buffering.max.messages 100 000 besides; kafka-go: keys and values written and not completed, bounded by the client, as "+
		"kafka-go has no bound); sarama has no bound on bytes (its channels hold ChannelBufferSize, 256, messages each, and each "+
		"broker's producer collects a request's worth while up to MaxOpenRequests, 5, are in flight).", mib(n))
}

// rssPoints is how many values of a run's RSS series the Markdown shows.
const rssPoints = 12

// WriteMarkdown writes the report as Markdown: one table of medians for all
// workloads, the codec split when the runs were profiled, the RSS series,
// issue 26's targets, the verdict on issue 6's targets per workload,
// failures, and the clients' notes.
func (r *Report) WriteMarkdown(w io.Writer) error { return r.writeMarkdown(w, true) }

// writeMarkdown is WriteMarkdown, with issue 26's targets only if checks
// (a Suite writes them once for all its reports).
func (r *Report) writeMarkdown(w io.Writer, checks bool) error {
	var b strings.Builder
	broker := r.Broker
	if broker == "" {
		broker = "testbroker"
	}
	fmt.Fprintf(&b, "Peer benchmark, %s, %d CPUs, %s: median of %d runs per client, %d records per run (acks=all, linger 5 ms, batch 1 MiB). Took %s.\n\n",
		r.Started.Format("2006-01-02"), r.CPUs, r.GoVersion, r.Runs, r.Records, r.Duration.Round(1e9))
	fmt.Fprintf(&b, "Broker: %s, one per workload.\n\n", broker)
	if r.BufferMemory > 0 {
		b.WriteString(BufferNote(r.BufferMemory) + "\n\n")
	}
	if r.JavaVersion != "" {
		fmt.Fprintf(&b, "Java: %s, kafka-clients 4.4.0.\n\n", r.JavaVersion)
	}
	if r.LoadStart != "" {
		fmt.Fprintf(&b, "Load average (1, 5, 15 min) %s at the start, %s at the end.\n\n", r.LoadStart, r.LoadEnd)
	}
	b.WriteString("| workload | client | records/s | CPU ns/record | process CPU ns/record | peak RSS | throughput ours/peer | CPU ours/peer | records/batch | wire B/record | ok runs |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, wr := range r.Workloads {
		for _, s := range wr.Clients {
			if s.OK == 0 {
				fmt.Fprintf(&b, "| %s | %s | failed | | | | | | | | 0/%d |\n", wr.Spec.Name, s.Client, len(s.Runs))
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f MiB | %s | %s | %s | %s | %d/%d |\n",
				wr.Spec.Name, s.Client, thousands(s.RecordsPerSec), thousands(s.CPUNsPerRecord), thousands(s.ProcessCPUNsPerRecord),
				float64(s.PeakRSSBytes)/(1<<20), orDash("%.2f", s.ThroughputRatio), orDash("%.2f", s.CPURatio),
				orDash("%.1f", s.RecordsPerBatch), orDash("%.1f", s.WireBytesPerRecord), s.OK, len(s.Runs))
		}
	}
	r.writeTLS(&b)
	r.writeCodec(&b)
	r.writeRSS(&b)
	if checks {
		writeChecks(&b, r.Checks())
	}
	b.WriteString("\nWorkloads:\n\n")
	for _, wr := range r.Workloads {
		_, verdict := wr.Target()
		fmt.Fprintf(&b, "- %s: %s. Against %s: %s.\n", wr.Spec.Name, Describe(wr.Spec), Baseline, verdict)
	}
	b.WriteString("\nrecords/s is records / (first send to last ack), timed inside each client after a warm-up record. " +
		"CPU ns/record is the user+system time of every thread of the client process during that timed phase, as the client measures it " +
		"(getrusage in the Go clients, the JVM's process CPU time in Java: GC and JIT threads included, JVM start-up excluded); " +
		"process CPU ns/record is the whole process's (getrusage of the child: start-up, connection setup, warm-up and close included). " +
		"Peak RSS is the process's maxrss. Ratios are ours/peer: throughput > 1 and CPU < 1 favour samsa. " +
		"records/batch and wire B/record are counted by the broker during each run (the warm-up record included): " +
		"records / batches appended, and the bytes of those batches as sent (61-byte batch headers included, compressed) / records; " +
		"on real Kafka the bytes are the growth of the topic's logs (DescribeLogDirs) and the records that of its end offsets (ListOffsets), " +
		"and batches are not counted; – where a count could not be read.\n")
	var fails []string
	for _, wr := range r.Workloads {
		if wr.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s: %s", wr.Spec.Name, wr.Error))
		}
		for _, s := range wr.Clients {
			for _, run := range s.Runs {
				if !run.OK() {
					fails = append(fails, fmt.Sprintf("- %s, %s, run %d: %s", wr.Spec.Name, s.Client, run.Run, oneLine(run.Error)))
				}
			}
		}
	}
	if len(fails) > 0 {
		b.WriteString("\nFailures:\n\n" + strings.Join(fails, "\n") + "\n")
	}
	for _, c := range Clients {
		if why, ok := r.Skipped[c]; ok {
			fmt.Fprintf(&b, "\nSkipped: %s (%s).\n", c, why)
		}
	}
	for _, wr := range r.Workloads {
		for _, c := range Clients {
			if why, ok := wr.Skipped[c]; ok {
				fmt.Fprintf(&b, "\nSkipped on %s: %s (%s).\n", wr.Spec.Name, c, why)
			}
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nClients:\n\n")
		for _, c := range Clients {
			if n, ok := r.Notes[c]; ok {
				fmt.Fprintf(&b, "- %s: %s.\n", c, n)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TLSOverhead is what TLS costs one client on one workload, from an
// Options.TLSCompare report.
type TLSOverhead struct {
	Client string
	// CPUNsPerRecord is the median, over the rounds where both runs
	// succeeded, of the TLS run's CPU ns/record minus the plaintext
	// run's: each pair ran back to back, so machine load shifts both.
	CPUNsPerRecord float64
	// CPUShare is CPUNsPerRecord over the plaintext median CPU ns/record.
	CPUShare float64
	// ThroughputRatio is the TLS median records/s over the plaintext one.
	ThroughputRatio float64
	// Pairs counts the rounds the median is over.
	Pairs int
}

// TLSOverheads returns the TLS overhead of every client with plaintext
// and TLS runs (an Options.TLSCompare report), in table order.
func (w *WorkloadReport) TLSOverheads() []TLSOverhead {
	var out []TLSOverhead
	for _, plain := range w.Clients {
		if strings.HasSuffix(plain.Client, TLSSuffix) {
			continue
		}
		tls := w.summary(plain.Client + TLSSuffix)
		if tls == nil || plain.OK == 0 || tls.OK == 0 {
			continue
		}
		byRun := map[int]float64{}
		for _, r := range plain.Runs {
			if r.OK() {
				byRun[r.Run] = r.CPUNsPerRecord
			}
		}
		var diffs []float64
		for _, r := range tls.Runs {
			if p, ok := byRun[r.Run]; ok && r.OK() {
				diffs = append(diffs, r.CPUNsPerRecord-p)
			}
		}
		if len(diffs) == 0 {
			continue
		}
		o := TLSOverhead{Client: plain.Client, CPUNsPerRecord: median(diffs), Pairs: len(diffs),
			ThroughputRatio: tls.RecordsPerSec / plain.RecordsPerSec}
		o.CPUShare = o.CPUNsPerRecord / plain.CPUNsPerRecord
		out = append(out, o)
	}
	return out
}

// writeTLS writes the TLS overhead table of a TLSCompare report.
func (r *Report) writeTLS(b *strings.Builder) {
	if !r.TLSCompare {
		return
	}
	b.WriteString("\nTLS overhead: each client ran over the plaintext and the TLS listener of the same broker in every round, back to back; " +
		"CPU ns/record is the median over the rounds of (TLS run − plaintext run), its share is of the plaintext median; " +
		"records/s TLS/plaintext is the ratio of the medians:\n\n")
	b.WriteString("| workload | client | TLS CPU ns/record | TLS CPU share | records/s TLS/plaintext | rounds |\n|---|---|---:|---:|---:|---:|\n")
	for _, wr := range r.Workloads {
		for _, o := range wr.TLSOverheads() {
			fmt.Fprintf(b, "| %s | %s | %s | %+.1f%% | %.2f | %d |\n", wr.Spec.Name, o.Client,
				thousands(o.CPUNsPerRecord), 100*o.CPUShare, o.ThroughputRatio, o.Pairs)
		}
	}
}

// writeCodec writes the codec split of the profiled clients, if any.
func (r *Report) writeCodec(b *strings.Builder) {
	any := false
	for _, wr := range r.Workloads {
		for _, s := range wr.Clients {
			any = any || s.ProfiledRuns > 0
		}
	}
	if !any {
		return
	}
	b.WriteString("\nCPU in compression against the rest, from the CPU profiles of the timed phase (runtime/pprof; a sample counts as codec when " +
		"a klauspost/compress, pierrec/lz4, compress/gzip, compress/flate or golang/snappy function is anywhere on its stack); " +
		"codec and rest ns/record split CPU ns/record by the median share:\n\n")
	b.WriteString("| workload | client | profiled runs | codec share | codec ns/record | rest ns/record | rest ours/peer |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, wr := range r.Workloads {
		for _, s := range wr.Clients {
			if s.ProfiledRuns == 0 {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %d | %.1f%% | %s | %s | %s |\n", wr.Spec.Name, s.Client, s.ProfiledRuns,
				100*s.CodecShare, thousands(s.CodecNsPerRecord), thousands(s.RestNsPerRecord), orDash("%.2f", s.RestRatio))
		}
	}
}

// writeRSS writes each client's RSS over time, from the run with the
// median peak.
func (r *Report) writeRSS(b *strings.Builder) {
	var rows []string
	for _, wr := range r.Workloads {
		for _, s := range wr.Clients {
			run := s.MedianRSSRun()
			if run == nil {
				continue
			}
			var pts []string
			for _, v := range rssDigest(run.RSSKiB, rssPoints) {
				pts = append(pts, fmt.Sprintf("%.0f", v))
			}
			span := time.Duration(len(run.RSSKiB)) * r.RSSIntervalNanos
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s |", wr.Spec.Name, s.Client, run.Run,
				span.Round(100*time.Millisecond), strings.Join(pts, " ")))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\nRSS over time (VmRSS sampled every %s over the whole process life; the run with the median peak; "+
		"MiB, each value the maximum of one of up to %d equal slices; every sample is in the JSON report):\n\n", r.RSSIntervalNanos, rssPoints)
	b.WriteString("| workload | client | run | process life | RSS MiB over time |\n|---|---|---:|---:|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// orDash formats x with format, or returns "–" for 0: no figure.
func orDash(format string, x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf(format, x)
}

// thousands formats x rounded to an integer with thin separators:
// 1234567 → "1,234,567".
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
