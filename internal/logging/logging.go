// Package logging holds what samsa's packages share about logs: the logger
// of a Config without one (Default: slog's default logger at Warn and
// above), and Repeat, which keeps a failure that recurs from being logged
// at Warn more than once a minute.
package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Default returns the logger used when a Config has none: every record at
// Warn or above goes to the handler of slog.Default() (the one set when the
// record is logged), and nothing below Warn, whatever that handler enables.
// A user silences it with a discarding logger (slog.New(slog.DiscardHandler)).
func Default() *slog.Logger { return slog.New(warnHandler{}) }

// warnHandler forwards records at Warn and above to slog.Default()'s
// handler, with the attributes and groups given to WithAttrs and WithGroup
// applied in order.
type warnHandler struct {
	ops []func(slog.Handler) slog.Handler
}

func (h warnHandler) handler() slog.Handler {
	out := slog.Default().Handler()
	for _, op := range h.ops {
		out = op(out)
	}
	return out
}

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h warnHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(o slog.Handler) slog.Handler { return o.WithAttrs(attrs) })
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return h.with(func(o slog.Handler) slog.Handler { return o.WithGroup(name) })
}

func (h warnHandler) with(op func(slog.Handler) slog.Handler) slog.Handler {
	return warnHandler{ops: append(h.ops[:len(h.ops):len(h.ops)], op)}
}

// maxKeys is how many keys a Repeat keeps before it forgets those last
// logged over RepeatEvery ago (a process-wide Repeat sees every broker
// address it ever connected to).
const maxKeys = 256

// RepeatEvery is how often a failure that lasts is logged at Warn again.
const RepeatEvery = time.Minute

// Repeat picks the level of a failure that may recur (a dial, a metadata
// fetch, a broken connection), per key (a broker's address): Warn the first
// time, and again at most once per RepeatEvery while it lasts; Debug in
// between. Reset ends an outage: the next failure is logged at Warn at
// once. The zero value is ready; it is safe for concurrent use.
type Repeat struct {
	mu   sync.Mutex
	last map[string]time.Time // key → when it was last logged at Warn
}

// Level returns the level to log a failure of key at now: slog.LevelWarn or
// slog.LevelDebug.
func (r *Repeat) Level(key string, now time.Time) slog.Level {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[key]; ok && now.Sub(t) < RepeatEvery {
		return slog.LevelDebug
	}
	if r.last == nil {
		r.last = make(map[string]time.Time)
	}
	if len(r.last) >= maxKeys {
		for k, t := range r.last {
			if now.Sub(t) >= RepeatEvery {
				delete(r.last, k)
			}
		}
	}
	r.last[key] = now
	return slog.LevelWarn
}

// Reset forgets key's outage, and reports whether there was one.
func (r *Repeat) Reset(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.last[key]
	delete(r.last, key)
	return ok
}
