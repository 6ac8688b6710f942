package producer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/spool"
)

// TestSpoolMetrics: Metrics.Spool says what is on disk, how old the
// oldest unacknowledged record is, what was appended, fsynced and
// acknowledged, and, after a restart, what New replayed; Each reports
// the same values by their spool-* names. Without a spool it is nil and
// Each reports no spool-* value.
func TestSpoolMetrics(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 2))

	plain := newProducer(t, c, Config{})
	pm := plain.Metrics()
	require.Nil(t, pm.Spool)
	pm.Each(func(info *MetricInfo, _ Labels, _ float64) {
		assert.False(t, strings.HasPrefix(info.Name, "spool-"), "%s reported without a spool", info.Name)
	})

	dir := t.TempDir()
	a := spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Spool.Sync = spool.SyncAlways
		cfg.Spool.MaxBytes = 8 << 20
	})
	_, err := a.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	const n = 10
	var fs []*Future
	for i := range n {
		f := a.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint("v", i))})
		fs = append(fs, f)
	}
	for _, f := range fs {
		<-f.Persisted()
	}
	time.Sleep(30 * time.Millisecond)
	m := a.Metrics().Spool
	require.NotNil(t, m)
	assert.Equal(t, int64(n+1), m.AppendTotal)
	assert.Equal(t, int64(n), m.Records, "unacknowledged with the broker down")
	assert.Equal(t, int64(1), m.AckTotal)
	assert.GreaterOrEqual(t, m.OldestRecordAge, 30*time.Millisecond)
	assert.Positive(t, m.Bytes)
	assert.GreaterOrEqual(t, m.Segments, int64(1))
	assert.Equal(t, int64(8<<20), m.MaxBytes)
	assert.Positive(t, m.FsyncTotal, "Sync always fsyncs")
	assert.Positive(t, m.FsyncTimeTotal)
	assert.Positive(t, m.FsyncLatencyAvg)
	assert.GreaterOrEqual(t, m.FsyncLatencyMax, m.FsyncLatencyAvg)
	assert.GreaterOrEqual(t, m.FsyncLatencyP99, m.FsyncLatencyP50)
	assert.False(t, m.Failed)
	assert.Zero(t, m.ReplayTotal)

	full := a.Metrics()
	got := map[string]float64{}
	full.Each(func(info *MetricInfo, l Labels, v float64) {
		if strings.HasPrefix(info.Name, "spool-") {
			assert.Equal(t, ScopeProducer, info.Scope)
			got[info.Name] = v
		}
	})
	assert.Len(t, got, len(spoolMetricTable))
	assert.Equal(t, float64(full.Spool.Records), got["spool-records"])
	assert.Equal(t, float64(full.Spool.Bytes), got["spool-bytes"])
	assert.Equal(t, 0.0, got["spool-failed"])

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = a.Close(ctx) // the records stay in the spool
	require.NoError(t, c.RestartBroker(0))

	b := spoolProducer(t, c, dir, nil)
	require.Eventually(t, func() bool {
		m := b.Metrics().Spool
		return m.ReplayTotal == n && m.AckTotal == n && m.Records == 0 && m.OldestRecordAge == 0
	}, 20*time.Second, 10*time.Millisecond, "the replay: %+v", b.Metrics().Spool)
}

// TestSpoolUsageLogsCrossings: one Warn when the spool reaches 80 % of
// MaxBytes, nothing more until it is back below 70 % (an Info), then a
// Warn again at 80 %.
func TestSpoolUsageLogsCrossings(t *testing.T) {
	type step struct {
		bytes int64
		want  string // "", "WARN" or "INFO"
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"below", []step{{0, ""}, {500, ""}, {799, ""}}},
		{"up, stays, down", []step{{100, ""}, {800, "WARN"}, {990, ""}, {790, ""}, {810, ""}, {700, ""}, {699, "INFO"}, {650, ""}, {750, ""}, {1000, "WARN"}, {0, "INFO"}}},
		{"a jump past both", []step{{999, "WARN"}, {10, "INFO"}, {999, "WARN"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &captureHandler{}
			u := newSpoolUsage(slog.New(h), &SpoolConfig{Dir: "spooldir"})
			u.max.Store(1000)
			for i, s := range tc.steps {
				before := len(h.logs())
				u.observe(s.bytes)
				logs := h.logs()[before:]
				if s.want == "" {
					require.Emptyf(t, logs, "step %d (%d bytes)", i, s.bytes)
					continue
				}
				require.Lenf(t, logs, 1, "step %d (%d bytes)", i, s.bytes)
				assert.Equal(t, s.want, logs[0].level.String())
				assert.Equal(t, fmt.Sprint(s.bytes), logs[0].attrs["bytes"])
				assert.Equal(t, "1000", logs[0].attrs["max_bytes"])
				assert.Equal(t, "spooldir", logs[0].attrs["dir"])
			}
		})
	}
}

// TestSpoolUsageWarnOnARealSpool: a spool filling with the broker down
// logs one Warn (its bytes and MaxBytes, never a record's contents) once
// past 80 %, and an Info once delivery frees it.
func TestSpoolUsageWarnOnARealSpool(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	h := &captureHandler{}
	const maxBytes = 64 << 10
	p := spoolProducer(t, c, t.TempDir(), func(cfg *Config) {
		cfg.Logger = slog.New(h)
		cfg.Spool.MaxBytes, cfg.Spool.SegmentBytes = maxBytes, 8<<10
		cfg.Spool.SyncInterval = 10 * time.Millisecond
	})
	_, err := p.Send(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.StopBroker(0))
	spoolLines := func(level slog.Level) []capturedLog {
		var out []capturedLog
		for _, l := range h.logs() {
			if l.level == level && strings.Contains(l.msg, "spool") && strings.Contains(l.msg, "MaxBytes") {
				out = append(out, l)
			}
		}
		return out
	}
	value := []byte(strings.Repeat("secret-", 140)) // about 1 KiB
	var fs []*Future
	for p.Metrics().Spool.Bytes < maxBytes*85/100 {
		if b := p.Metrics().Spool.Bytes; b < maxBytes*80/100 {
			require.Empty(t, spoolLines(slog.LevelWarn), "a Warn below 80 %%: %d bytes", b)
		}
		fs = append(fs, p.Send(context.Background(), &Record{Topic: "t", Value: value}))
	}
	warns := spoolLines(slog.LevelWarn)
	require.Len(t, warns, 1)
	assert.Equal(t, fmt.Sprint(maxBytes), warns[0].attrs["max_bytes"])
	assert.NotEmpty(t, warns[0].attrs["bytes"])
	require.Empty(t, spoolLines(slog.LevelInfo))

	require.NoError(t, c.RestartBroker(0))
	waitAll(t, fs)
	require.Eventually(t, func() bool { return len(spoolLines(slog.LevelInfo)) == 1 }, 20*time.Second, 10*time.Millisecond)
	assert.Len(t, spoolLines(slog.LevelWarn), 1)
	for _, l := range h.logs() {
		assert.NotContains(t, l.msg, "secret")
		for k, v := range l.attrs {
			assert.NotContains(t, v, "secret", "attribute %s", k)
		}
	}
}

// TestSpoolUsageWarnsAtNew: a backlog above 80 % of MaxBytes found by New
// is warned about before New returns.
func TestSpoolUsageWarnsAtNew(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	dir := t.TempDir()
	const maxBytes = 64 << 10
	sp, err := spool.Open(spool.Options{Dir: dir, MaxBytes: maxBytes, SegmentBytes: 8 << 10})
	require.NoError(t, err)
	for sp.Usage() < maxBytes*85/100 {
		_, err := sp.Write(context.Background(), &spool.Record{Topic: "t", Partition: 0, Value: make([]byte, 1000)})
		require.NoError(t, err)
	}
	require.NoError(t, sp.Close())
	h := &captureHandler{}
	spoolProducer(t, c, dir, func(cfg *Config) {
		cfg.Logger = slog.New(h)
		cfg.Spool.MaxBytes, cfg.Spool.SegmentBytes = maxBytes, 8<<10
	})
	var warns int
	for _, l := range h.logs() {
		if l.level == slog.LevelWarn && strings.Contains(l.msg, "80% of its MaxBytes") {
			warns++
		}
	}
	require.Equal(t, 1, warns, "logs: %v", h.logs())
}

// BenchmarkSpoolUsageObserve: what each spooled Send pays for the usage
// Warn when no threshold is crossed (spool.Options.OnUsage).
func BenchmarkSpoolUsageObserve(b *testing.B) {
	u := newSpoolUsage(slog.New(slog.DiscardHandler), &SpoolConfig{Dir: "d"})
	u.max.Store(1 << 30)
	hook := u.hook()
	var n int64
	for b.Loop() {
		n += 1024
		hook(n & (1<<29 - 1))
	}
}

// TestSpoolUsageFollowsTheLastBytes: a call that read 85 % and stores the
// state after another call saw 60 % and returned must not leave the
// watcher "above 80 %" at 60 %: it reads the bytes again and logs the
// Info, after the Warn. Before, the state stayed stale (an idle producer
// never got the Info).
func TestSpoolUsageFollowsTheLastBytes(t *testing.T) {
	h := &captureHandler{}
	u := newSpoolUsage(slog.New(h), &SpoolConfig{Dir: "spooldir"})
	u.max.Store(1000)
	var cur atomic.Int64
	cur.Store(850)
	u.testUsage = cur.Load
	var once sync.Once
	u.afterRead = func() {
		once.Do(func() {
			// Between the crossing's read and its store: the spool
			// shrinks, and that call sees no crossing yet.
			cur.Store(600)
			u.observe(600)
		})
	}
	u.observe(850)
	var levels []string
	for _, l := range h.logs() {
		levels = append(levels, l.level.String())
	}
	require.Equal(t, []string{"WARN", "INFO"}, levels)
	require.False(t, u.high.Load(), "state above 80 % at 60 %")
}
