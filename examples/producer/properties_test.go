package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/compression"
	"github.com/samsa-go/samsa/producer"
	"github.com/samsa-go/samsa/samsatest"
)

// writeProps writes a producer.properties file and returns its path.
func writeProps(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "producer.properties")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// -properties: every producer key of the file is used, a flag given on the
// command line wins over the file, and the summary says which, and lists
// the keys samsa ignores. Before, the file gave only its bootstrap and
// security keys: compression.type=zstd and linger.ms=20 were replaced by
// the flags' defaults, lz4 and 5 ms.
func TestPropertiesFileAndFlags(t *testing.T) {
	c := samsatest.Start(t, samsatest.Config{Brokers: 1})
	path := writeProps(t, "bootstrap.servers="+c.Addrs()[0]+`
compression.type=zstd
linger.ms=20
batch.size=32768
buffer.memory=16777216
delivery.timeout.ms=90000
reconnect.backoff.ms=50
metrics.num.samples=2
`)
	const file = "from producer.properties"
	cases := []struct {
		name     string
		args     []string
		check    func(t *testing.T, o options, cfg producer.Config)
		settings map[string][2]string // name -> value, source
	}{
		{"the file's values", nil, func(t *testing.T, o options, cfg producer.Config) {
			assert.Equal(t, compression.Zstd, cfg.Compression)
			assert.Equal(t, 20*time.Millisecond, cfg.Linger)
		}, map[string][2]string{
			"brokers": {c.Addrs()[0], file}, "compression": {"zstd", file}, "linger": {"20ms", file},
			"batch size": {"32768", file}, "acks": {"all", "default"}, "idempotent": {"true", "default"},
			"tls": {"disabled", "default"}, "sasl": {"none", "default"}, "transactional id": {"none", "default"},
		}},
		{"flags win", []string{"-linger", "7ms", "-compression", "gzip", "-batch-size", "4096", "-acks", "1"}, func(t *testing.T, o options, cfg producer.Config) {
			assert.Equal(t, compression.Gzip, cfg.Compression)
			assert.Equal(t, 7*time.Millisecond, cfg.Linger)
			assert.Equal(t, 4096, cfg.BatchSize)
			assert.True(t, cfg.DisableIdempotence, "acks=1 without -idempotent turns it off")
		}, map[string][2]string{
			"compression": {"gzip", "flag -compression"}, "linger": {"7ms", "flag -linger"},
			"batch size": {"4096", "flag -batch-size"}, "acks": {"leader", "flag -acks"},
			"idempotent": {"false", "off: acks is not all"},
		}},
		{"a flag set to its default still wins", []string{"-linger", "5ms", "-compression", "lz4"}, func(t *testing.T, o options, cfg producer.Config) {
			assert.Equal(t, compression.LZ4, cfg.Compression)
			assert.Equal(t, 5*time.Millisecond, cfg.Linger)
		}, map[string][2]string{"compression": {"lz4", "flag -compression"}, "linger": {"5ms", "flag -linger"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(append([]string{"-properties", path}, tc.args...), &bytes.Buffer{})
			require.NoError(t, err)
			cfg := o.config(o.brokers)
			// Keys without a flag come from the file whatever the flags.
			assert.Equal(t, int64(16<<20), cfg.BufferMemory)
			assert.Equal(t, 90*time.Second, cfg.DeliveryTimeout)
			assert.Equal(t, []string{"metrics.num.samples", "reconnect.backoff.ms"}, cfg.IgnoredProperties())
			tc.check(t, o, cfg)
			got := map[string][2]string{}
			for _, s := range o.settings {
				got[s.Name] = [2]string{s.Value, s.Source}
			}
			for name, want := range tc.settings {
				assert.Equal(t, want, got[name], "setting %s", name)
			}
		})
	}

	// A whole run: the summary reports the sources and the ignored keys.
	s, _, err := runJSON(t, t.Context(), "-properties", path, "-linger", "7ms", "-records", strconv.Itoa(testRecords), "-topic", "from-file")
	require.NoError(t, err)
	assert.True(t, s.Verified, "%q", s.Problems)
	assert.Equal(t, "zstd", s.Compression)
	assert.Equal(t, 7*time.Millisecond, s.Linger)
	assert.Equal(t, 32768, s.BatchSize)
	assert.Equal(t, "producer.properties", s.PropertiesFile)
	assert.Equal(t, []string{"buffer.memory", "delivery.timeout.ms"}, s.PropertiesUsed)
	assert.Equal(t, []string{"metrics.num.samples", "reconnect.backoff.ms"}, s.IgnoredProperties)

	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-properties", path, "-linger", "7ms", "-records", "300", "-topic", "from-file-text"}, &stdout, &bytes.Buffer{}))
	out := stdout.String()
	for _, want := range []string{
		"  config        brokers: " + c.Addrs()[0] + " (from producer.properties)\n",
		"                compression: zstd (from producer.properties)\n",
		"                linger: 7ms (flag -linger)\n",
		"                acks: all (default)\n",
		"                also from producer.properties: buffer.memory, delivery.timeout.ms\n",
		"  ignored       metrics.num.samples, reconnect.backoff.ms (in producer.properties: samsa has no such setting)\n",
	} {
		assert.Contains(t, out, want)
	}

	// Without a file, no config block.
	stdout.Reset()
	require.NoError(t, run(t.Context(), []string{"-brokers", c.Addrs()[0], "-records", "100", "-topic", "no-file"}, &stdout, &bytes.Buffer{}))
	assert.NotContains(t, stdout.String(), "config ")
}

// Idempotence from a file follows Java's rules: enable.idempotence, else
// off when acks is not all or retries=0; a flag still wins.
func TestPropertiesFileIdempotence(t *testing.T) {
	cases := []struct {
		name  string
		props string
		args  []string
		want  bool
		src   string
	}{
		{"acks=1 in the file", "acks=1\n", nil, false, "off: acks is not all"},
		{"enable.idempotence=false", "enable.idempotence=false\n", nil, false, "from producer.properties"},
		{"retries=0", "retries=0\n", nil, false, "off: producer.properties sets retries=0 or more than 5 in flight"},
		{"-acks all over the file's acks=1", "acks=1\n", []string{"-acks", "all"}, true, "default"},
		{"-idempotent=false over the file", "enable.idempotence=true\n", []string{"-idempotent=false"}, false, "flag -idempotent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeProps(t, "bootstrap.servers=k:9092\n"+tc.props)
			o, err := parseOptions(append([]string{"-properties", path}, tc.args...), &bytes.Buffer{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.idempotent)
			assert.Equal(t, !tc.want, o.config(o.brokers).DisableIdempotence)
			for _, s := range o.settings {
				if s.Name == "idempotent" {
					assert.Equal(t, tc.src, s.Source)
				}
			}
		})
	}
}
