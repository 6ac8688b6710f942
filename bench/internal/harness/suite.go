package harness

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/samsa-go/samsa/bench/internal/workload"
)

// Suite is the outcome of RunSuite: one Report per broker, in the order
// the brokers were named.
type Suite struct {
	Reports []*Report `json:"reports"`
}

// javaOnlyOnKafka is why the Java client is left out of the other brokers'
// runs when several brokers are named, one of them BrokerKafka.
const javaOnlyOnKafka = "runs on kafka only when several brokers are named"

// RunSuite runs Run once per broker of brokers (each one of Brokers, each
// named once), with o otherwise the same: the same workloads, key orders,
// values, records and runs. With several brokers, one of them
// BrokerKafka, the Java client runs on Kafka only (Report.Skipped says so
// for the others), o.KafkaBootstrap applies to BrokerKafka only, and the
// profiles of each broker go to a directory of its own under
// o.ProfileDir. It stops at the first Run that fails (bad options, a
// build that fails, ctx done) and returns the reports so far.
func RunSuite(ctx context.Context, o Options, brokers []string) (*Suite, error) {
	if len(brokers) == 0 {
		brokers = []string{BrokerTestbroker}
	}
	for i, b := range brokers {
		if !slices.Contains(Brokers, b) {
			return nil, fmt.Errorf("unknown broker %q (want one of %s)", b, strings.Join(Brokers, ", "))
		}
		if slices.Contains(brokers[:i], b) {
			return nil, fmt.Errorf("broker %s named twice", b)
		}
	}
	s := &Suite{}
	for _, b := range brokers {
		bo, skipJava := suiteOptions(o, brokers, b)
		if skipJava && bo.Log != nil {
			fmt.Fprintf(bo.Log, "broker %s: the Java client %s\n", b, javaOnlyOnKafka)
		}
		rep, err := Run(ctx, bo)
		if rep != nil {
			if skipJava {
				rep.Skipped[Java] = javaOnlyOnKafka
			}
			s.Reports = append(s.Reports, rep)
		}
		if err != nil {
			return s, fmt.Errorf("broker %s: %w", b, err)
		}
	}
	return s, nil
}

// suiteOptions returns o for broker b of brokers (see RunSuite), and
// whether the Java client was left out of it.
func suiteOptions(o Options, brokers []string, b string) (Options, bool) {
	several := len(brokers) > 1
	bo := o
	bo.Broker = b
	bo.Clients = slices.Clone(o.Clients)
	if len(bo.Clients) == 0 {
		bo.Clients = slices.Clone(Clients)
	}
	if b != BrokerKafka {
		bo.KafkaBootstrap = ""
	}
	skipJava := several && slices.Contains(brokers, BrokerKafka) && b != BrokerKafka && slices.Contains(bo.Clients, Java)
	if skipJava {
		bo.Clients = slices.DeleteFunc(bo.Clients, func(c string) bool { return c == Java })
	}
	if several && o.ProfileDir != "" {
		bo.ProfileDir = filepath.Join(o.ProfileDir, b)
	}
	return bo, skipJava
}

// Checks evaluates issue 26's targets on every report.
func (s *Suite) Checks() []Check {
	var out []Check
	for _, r := range s.Reports {
		out = append(out, r.Checks()...)
	}
	return out
}

// WriteMarkdown writes the summary (WriteSummary), issue 26's targets on
// every broker (WriteChecks), then each broker's report in full.
func (s *Suite) WriteMarkdown(w io.Writer) error {
	if err := s.WriteSummary(w); err != nil {
		return err
	}
	if err := s.WriteChecks(w); err != nil {
		return err
	}
	for _, r := range s.Reports {
		name := r.BrokerName
		if name == "" {
			name = BrokerTestbroker
		}
		if _, err := fmt.Fprintf(w, "\n## On %s\n\n", name); err != nil {
			return err
		}
		if err := r.writeMarkdown(w, false); err != nil {
			return err
		}
	}
	return nil
}

// WriteChecks writes issue 26's targets on every report, met or not, as
// a list.
func (s *Suite) WriteChecks(w io.Writer) error {
	var b strings.Builder
	writeChecks(&b, s.Checks())
	_, err := io.WriteString(w, b.String())
	return err
}

// workloadLabel is a workload's cell in the summary table: its ID and its
// name, "W2c `100B-json-lz4`".
func workloadLabel(s workload.Spec) string {
	if s.ID == "" {
		return "`" + s.Name + "`"
	}
	return s.ID + " `" + s.Name + "`"
}

// WriteSummary writes a line that says how the runs were made, the
// README's table (WriteReadmeTable), and the table of every variant and
// client (WriteVariants).
func (s *Suite) WriteSummary(w io.Writer) error {
	var b strings.Builder
	var brokers []string
	for _, r := range s.Reports {
		brokers = append(brokers, r.BrokerName)
	}
	if len(s.Reports) > 0 {
		r := s.Reports[0]
		fmt.Fprintf(&b, "Summary, %s, %d CPUs, %s: median of %d runs of %d records per client, workload and broker (%s); "+
			"acks=all, linger 5 ms, batch 1 MiB, %s of buffer memory for every client with such a bound, everything else each client's default; "+
			"one callback, promise or delivery channel for every record%s. Ratios are samsa/client: throughput > 1 and CPU < 1 favour samsa.\n\n",
			r.Started.Format("2006-01-02"), r.CPUs, r.GoVersion, r.Runs, r.Records, strings.Join(brokers, ", "), mib(r.BufferMemory), freshNote(r.FreshValues))
	}
	b.WriteString("samsa against kgo, each workload as its base runs it (its own values, scattered keys):\n\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := s.WriteReadmeTable(w); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\nEvery workload variant and client:\n\n"); err != nil {
		return err
	}
	return s.WriteVariants(w)
}

// WriteVariants writes one row per workload (each variant), broker and
// client, in the order of the workloads, then of the brokers, then of
// Clients, with the medians (records/s, CPU ns per record, wire bytes per
// record, peak RSS) and samsa's ratios to the client.
func (s *Suite) WriteVariants(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| workload | values | keys | broker | client | records/s | CPU ns/record | wire B/record | peak RSS | throughput samsa/client | CPU samsa/client |\n")
	b.WriteString("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range s.workloadNames() {
		for _, r := range s.Reports {
			for _, wr := range r.Workloads {
				if wr.Spec.Name != name {
					continue
				}
				keys := wr.Spec.KeyOrder
				if keys == "" {
					keys = "–"
				}
				for _, sum := range wr.Clients {
					lead := fmt.Sprintf("| %s | %s | %s | %s | %s |", workloadLabel(wr.Spec), wr.Spec.Values, keys, brokerLabel(r, &wr), sum.Client)
					if sum.OK == 0 {
						fmt.Fprintf(&b, "%s failed | | | | | |\n", lead)
						continue
					}
					fmt.Fprintf(&b, "%s %s | %s | %s | %.1f MiB | %s | %s |\n", lead,
						thousands(sum.RecordsPerSec), thousands(sum.CPUNsPerRecord), orDash("%.1f", sum.WireBytesPerRecord),
						float64(sum.PeakRSSBytes)/(1<<20), orDash("%.2f", sum.ThroughputRatio), orDash("%.2f", sum.CPURatio))
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteReadmeTable writes the table the repository README's Benchmarks
// section takes: samsa against kgo, one row per workload of issue 26 (W1,
// W2, W2c, W3, W3c, W4, each as its base runs it: its own values,
// scattered keys) and broker, with both clients' records/s, CPU ns per
// record, wire bytes per record and peak RSS, and the ratios. Workloads
// that did not run in their base form have no row (WriteSummary has every
// variant and every client).
func (s *Suite) WriteReadmeTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| workload | broker | samsa records/s | kgo records/s | throughput samsa/kgo | samsa CPU ns/rec | kgo CPU ns/rec | CPU samsa/kgo " +
		"| samsa wire B/rec | kgo wire B/rec | samsa peak RSS | kgo peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cell := func(sum *Summary, f func(*Summary) string) string {
		if sum == nil || sum.OK == 0 {
			return "–"
		}
		return f(sum)
	}
	rps := func(x *Summary) string { return thousands(x.RecordsPerSec) }
	cpu := func(x *Summary) string { return thousands(x.CPUNsPerRecord) }
	wire := func(x *Summary) string { return orDash("%.1f", x.WireBytesPerRecord) }
	rss := func(x *Summary) string { return fmt.Sprintf("%.1f MiB", float64(x.PeakRSSBytes)/(1<<20)) }
	for _, id := range targetIDs {
		for _, r := range s.Reports {
			for i := range r.Workloads {
				wr := &r.Workloads[i]
				base, err := workload.ByName(id, wr.Spec.Records)
				if err != nil || wr.Spec.Name != base.Name {
					continue
				}
				ours, kgo := wr.summary(Ours), wr.summary(Baseline)
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", workloadLabel(wr.Spec), brokerLabel(r, wr),
					cell(ours, rps), cell(kgo, rps), cell(kgo, func(x *Summary) string { return orDash("%.2f", x.ThroughputRatio) }),
					cell(ours, cpu), cell(kgo, cpu), cell(kgo, func(x *Summary) string { return orDash("%.2f", x.CPURatio) }),
					cell(ours, wire), cell(kgo, wire), cell(ours, rss), cell(kgo, rss))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// brokerLabel names r's broker in a row of wr, with wr's records per run
// when they are not r's (Options.KafkaManyPartitionRecords): "kafka
// (100,000 records)".
func brokerLabel(r *Report, wr *WorkloadReport) string {
	if wr.Spec.Records == r.Records || wr.Spec.Records == 0 || r.Records == 0 {
		return r.BrokerName
	}
	return fmt.Sprintf("%s (%s records)", r.BrokerName, thousands(float64(wr.Spec.Records)))
}

// workloadNames returns the names of the workloads of every report, each
// once, in the order they first appear.
func (s *Suite) workloadNames() []string {
	var out []string
	for _, r := range s.Reports {
		for _, wr := range r.Workloads {
			if !slices.Contains(out, wr.Spec.Name) {
				out = append(out, wr.Spec.Name)
			}
		}
	}
	return out
}

// freshNote is what the summary's header says of Report.FreshValues.
func freshNote(fresh bool) string {
	if !fresh {
		return ""
	}
	return "; every record of the Go clients has a newly allocated value (-fresh-values)"
}
