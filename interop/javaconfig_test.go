package interop

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// idempotenceCase is one properties file: its keys besides
// bootstrap.servers (and, for Java, the serializers).
type idempotenceCase struct {
	name  string
	props [][2]string
}

// idempotenceCases is enable.idempotence (unset, true, false) × acks
// (unset, all, -1, 1, 0) × max.in.flight.requests.per.connection (unset,
// 1, 5, 6) × retries (unset, 0, 3), then transactional.id with each of
// enable.idempotence's three states and each conflicting setting.
func idempotenceCases() []idempotenceCase {
	var cases []idempotenceCase
	add := func(kv ...string) {
		c := idempotenceCase{}
		var name []string
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				continue // unset
			}
			c.props = append(c.props, [2]string{kv[i], kv[i+1]})
			name = append(name, kv[i]+"="+kv[i+1])
		}
		c.name = strings.Join(name, " ")
		if c.name == "" {
			c.name = "(defaults)"
		}
		cases = append(cases, c)
	}
	for _, idem := range []string{"", "true", "false"} {
		for _, acks := range []string{"", "all", "-1", "1", "0"} {
			for _, mif := range []string{"", "1", "5", "6"} {
				for _, retries := range []string{"", "0", "3"} {
					add("enable.idempotence", idem, "acks", acks,
						"max.in.flight.requests.per.connection", mif, "retries", retries)
				}
			}
		}
	}
	for _, idem := range []string{"", "true", "false"} {
		for _, conflict := range [][2]string{{"", ""}, {"acks", "1"}, {"max.in.flight.requests.per.connection", "6"}, {"retries", "0"}} {
			add("transactional.id", "t1", "enable.idempotence", idem, conflict[0], conflict[1])
		}
	}
	return cases
}

// TestIdempotenceConflictsMatchJava loads the same properties into
// kafka-clients 4.4's ProducerConfig (JavaIdempotenceConfig.java, one JVM
// for every case) and into producer.ConfigFromProperties, and compares
// case by case. Where Java accepts, samsa accepts (ConfigFromProperties
// and New) with the same effective enable.idempotence, acks and
// max.in.flight.requests.per.connection (retries is not compared: samsa
// has no retry count, it retries until DeliveryTimeout; retries=0 only
// turns idempotence off, which is compared). Where Java throws a
// ConfigException, ConfigFromProperties returns ErrInvalidConfig whose
// text contains Java's message word for word: "the same reason". It skips
// without java, javac or mvn unless CI is set.
func TestIdempotenceConflictsMatchJava(t *testing.T) {
	cases := idempotenceCases()
	java := runJavaIdempotenceConfig(t, cases)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := java[tc.name]
			require.True(t, ok, "Java printed no line for the case")
			props := map[string]string{"bootstrap.servers": "127.0.0.1:9092"}
			for _, kv := range tc.props {
				props[kv[0]] = kv[1]
			}
			cfg, err := producer.ConfigFromProperties(props)
			if jerr, refused := strings.CutPrefix(want, "ERR "); refused {
				require.Error(t, err, "Java refuses: %s", jerr)
				assert.ErrorIs(t, err, producer.ErrInvalidConfig)
				assert.Contains(t, err.Error(), jerr, "samsa refuses for another reason than Java")
				return
			}
			require.NoError(t, err, "Java accepts: %s", want)
			cfg.DisableMetricsPush = true
			p, err := producer.New(cfg)
			require.NoError(t, err, "New refuses what Java accepts (%s)", want)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, p.Close(ctx))
			mif := cfg.MaxInFlight
			if mif == 0 {
				mif = 5 // Config's 0: the default, Java's
			}
			got := fmt.Sprintf("OK enable.idempotence=%v acks=%d max.in.flight.requests.per.connection=%d",
				!cfg.DisableIdempotence, cfg.Acks.Wire(), mif)
			assert.Equal(t, want[:strings.Index(want, " retries=")], got)
		})
	}
}

// runJavaIdempotenceConfig runs JavaIdempotenceConfig on cases and returns
// its line per case name: "OK ..." or "ERR " and Java's message.
func runJavaIdempotenceConfig(t *testing.T, cases []idempotenceCase) map[string]string {
	t.Helper()
	cmd := javaCommand(t, "javapartitioner", "JavaIdempotenceConfig", "the comparison with kafka-clients' ProducerConfig")
	var in strings.Builder
	for _, c := range cases {
		in.WriteString(c.name)
		for _, kv := range c.props {
			in.WriteString("\t" + kv[0] + "=" + kv[1])
		}
		in.WriteString("\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	run.Stdin = strings.NewReader(in.String())
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	require.NoError(t, err, "JavaIdempotenceConfig:\n%s", stderr.String())
	lines := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, res, ok := strings.Cut(line, "\t")
		require.True(t, ok, "JavaIdempotenceConfig printed %q", line)
		lines[name] = res
	}
	require.Len(t, lines, len(cases), "one line per case")
	return lines
}
