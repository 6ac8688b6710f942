// Package spoolfault lets tests outside package spool inject file-system
// failures into a spool, by directory: a test registers the directory
// before spool.Open, and the spool opened there checks the faults on each
// fsync and each write of a segment file. Without a registration (always,
// outside tests) spool.Open pays one map lookup, and nothing else changes.
package spoolfault

import (
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Faults are the failures switched on for one directory.
type Faults struct {
	syncErr  atomic.Pointer[error]
	writeErr atomic.Pointer[error]
	hold     atomic.Pointer[chan struct{}]
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
