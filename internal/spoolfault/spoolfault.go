// Package spoolfault lets tests outside package spool inject file-system
// failures into a spool, by directory: a test registers the directory
// before spool.Open, and the spool opened there checks the faults on each
// fsync and each write and read of a segment file, and calls the Hook (if set) at
// each named file operation (Op). Without a registration (always, outside
// tests) spool.Open pays one map lookup and uses the plain file system:
// nothing else changes, and no operation pays for the faults or the hook.
package spoolfault

import (
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Faults are the failures switched on for one directory.
type Faults struct {
	syncErr   atomic.Pointer[error]
	hook      atomic.Pointer[func(Op, string)]
	writeErr  atomic.Pointer[error]
	readErr   atomic.Pointer[error]
	readTimes atomic.Int64
	hold      atomic.Pointer[chan struct{}]
}

// SetReadErr makes the next times reads of a segment by Unacked, Entries
// or a Cursor (SegmentRead; not Open's scan) fail with err, nothing read;
// times 0: every read (err nil: reads succeed again).
func (f *Faults) SetReadErr(err error, times int) {
	if err == nil {
		f.readErr.Store(nil)
		return
	}
	f.readTimes.Store(int64(times))
	f.readErr.Store(&err)
}

// ReadErr is the error a SegmentRead read fails with now, or nil; it
// counts the read against SetReadErr's times.
func (f *Faults) ReadErr() error {
	e := f.readErr.Load()
	if e == nil {
		return nil
	}
	if f.readTimes.Load() > 0 && f.readTimes.Add(-1) == 0 {
		f.readErr.CompareAndSwap(e, nil)
	}
	return *e
}

// SetWriteErr makes every later write of a segment file fail with err,
// half of it written (nil: writes succeed again).
func (f *Faults) SetWriteErr(err error) {
	if err == nil {
		f.writeErr.Store(nil)
		return
	}
	f.writeErr.Store(&err)
}

// HoldWrites makes the writes of segment files wait until release is
// called (a slow disk: what the spool's writer holds is not in the file).
func (f *Faults) HoldWrites() (release func()) {
	ch := make(chan struct{})
	f.hold.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			f.hold.CompareAndSwap(&ch, nil)
			close(ch)
		})
	}
}

// BeforeWrite is called by the spool before each write of a segment file:
// it waits while HoldWrites holds them, and returns the error the write
// fails with, or nil.
func (f *Faults) BeforeWrite() error {
	if ch := f.hold.Load(); ch != nil {
		<-*ch
	}
	if e := f.writeErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Op names a file operation of a spool, at the point where a Hook sees it.
// A hook that kills the process (the crash tests) thereby kills the spool
// at that exact point.
type Op string

const (
	// SegmentWrite: midway through a write to a segment file (an append):
	// the first half of the bytes is written, the rest is not yet.
	SegmentWrite Op = "segment-write"
	// SegmentCreate: right after a new segment file was created, empty
	// (a roll, or Open starting its segment).
	SegmentCreate Op = "segment-create"
	// PositionWrite: midway through the write of the position file's
	// temporary copy (position.tmp): half of it written.
	PositionWrite Op = "position-write"
	// PositionRename: right before position.tmp is renamed over the
	// position file (written, maybe fsynced, not yet in place).
	PositionRename Op = "position-rename"
	// SegmentRemove: right after a segment file was removed (an
	// acknowledged segment deleted, or Open removing an empty one).
	SegmentRemove Op = "segment-remove"
	// SegmentScan: right before a read of Open's recovery scan of a
	// segment (the first part of a replay).
	SegmentScan Op = "segment-scan"
	// SegmentRead: right before a read of a segment by Unacked or Entries
	// (a replay sending the backlog again).
	SegmentRead Op = "segment-read"
)

// Ops is every Op, in a fixed order.
var Ops = []Op{SegmentWrite, SegmentCreate, PositionWrite, PositionRename, SegmentRemove, SegmentScan, SegmentRead}

// SetHook makes the spools of the directory call h at each Op, on the
// goroutine doing the operation, with the file's path (nil: no hook). h
// must be safe for concurrent use.
func (f *Faults) SetHook(h func(op Op, name string)) {
	if h == nil {
		f.hook.Store(nil)
		return
	}
	f.hook.Store(&h)
}

// Hook calls the hook SetHook set, if any.
func (f *Faults) Hook(op Op, name string) {
	if h := f.hook.Load(); h != nil {
		(*h)(op, name)
	}
}

// HasHook reports whether a hook is set.
func (f *Faults) HasHook() bool { return f.hook.Load() != nil }

// SetSyncErr makes every later fsync of the spool's files fail with err
// (nil: fsyncs succeed again).
func (f *Faults) SetSyncErr(err error) {
	if err == nil {
		f.syncErr.Store(nil)
		return
	}
	f.syncErr.Store(&err)
}

// SyncErr is the error an fsync fails with now, or nil.
func (f *Faults) SyncErr() error {
	if e := f.syncErr.Load(); e != nil {
		return *e
	}
	return nil
}

var (
	mu   sync.Mutex
	dirs = map[string]*Faults{}
)

// Register returns the Faults of dir (made on first use), which the spools
// opened there from now on obey; unregister forgets them.
func Register(dir string) (f *Faults, unregister func()) {
	key := filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	f = dirs[key]
	if f == nil {
		f = &Faults{}
		dirs[key] = f
	}
	return f, func() {
		mu.Lock()
		delete(dirs, key)
		mu.Unlock()
	}
}

// Lookup returns the Faults registered for dir, or nil.
func Lookup(dir string) *Faults {
	mu.Lock()
	defer mu.Unlock()
	if len(dirs) == 0 {
		return nil
	}
	return dirs[filepath.Clean(dir)]
}
