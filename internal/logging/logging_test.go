package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDefaultForwardsWarnAndAbove: the default logger sends Warn and Error
// to slog.Default() (the one set when the line is logged, with With's
// attributes), and never Info or Debug, even when that handler takes them.
func TestDefaultForwardsWarnAndAbove(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	l := Default().With("component", "samsa")
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))

	cases := []struct {
		level slog.Level
		want  bool
	}{
		{slog.LevelDebug, false},
		{slog.LevelInfo, false},
		{slog.LevelWarn, true},
		{slog.LevelError, true},
	}
	for _, tc := range cases {
		buf.Reset()
		l.Log(t.Context(), tc.level, "event")
		got := buf.String()
		if (got != "") != tc.want {
			t.Fatalf("%v: logged %q, want logged: %v", tc.level, got, tc.want)
		}
		if tc.want && !strings.Contains(got, "component=samsa") {
			t.Fatalf("%v: %q lost With's attribute", tc.level, got)
		}
	}
}

// TestRepeatWarnsOncePerInterval: a failure that lasts is at Warn when it
// starts and once per RepeatEvery, per key; Reset starts a new outage.
func TestRepeatWarnsOncePerInterval(t *testing.T) {
	var r Repeat
	t0 := time.Now()
	steps := []struct {
		key  string
		at   time.Duration
		want slog.Level
	}{
		{"a", 0, slog.LevelWarn},
		{"a", time.Second, slog.LevelDebug},
		{"b", time.Second, slog.LevelWarn}, // another broker
		{"a", RepeatEvery - time.Millisecond, slog.LevelDebug},
		{"a", RepeatEvery, slog.LevelWarn},
		{"a", RepeatEvery + time.Second, slog.LevelDebug},
	}
	for i, s := range steps {
		if got := r.Level(s.key, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d (%s at %v): %v, want %v", i, s.key, s.at, got, s.want)
		}
	}
	if !r.Reset("a") || r.Reset("a") {
		t.Fatal("Reset reports the outage once")
	}
	if got := r.Level("a", t0.Add(RepeatEvery+2*time.Second)); got != slog.LevelWarn {
		t.Fatalf("after Reset: %v, want Warn", got)
	}
}
