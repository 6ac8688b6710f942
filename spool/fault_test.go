package spool

import (
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// faultFS is the real file system with failures switched on by tests.
type faultFS struct {
	osFS
	// syncErr fails every fsync of a file while set.
	syncErr atomic.Pointer[error]
	// noSpace makes writes write half their bytes and fail with ENOSPC
	// while set; with freeOnRemove, removing a segment clears it (the
	// deletion freed the disk).
	noSpace      atomic.Bool
	freeOnRemove atomic.Bool
	// syncDelay makes every fsync of a file take this long more (a slow
	// disk, so that group commit's groups form whatever the machine).
	syncDelay atomic.Int64
	syncs     atomic.Int64
	// writes counts the writes of segment files; writeErr fails them
	// while set; gate, while set, holds each one until it is closed (a
	// slow disk: the writer's groups form whatever the machine).
	writes   atomic.Int64
	writeErr atomic.Pointer[error]
	gate     atomic.Pointer[chan struct{}]
}

func (f *faultFS) Remove(name string) error {
	err := f.osFS.Remove(name)
	if err == nil && f.freeOnRemove.Load() && strings.HasSuffix(name, segSuffix) {
		f.noSpace.Store(false)
	}
	return err
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	fl, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: fl, fs: f, seg: strings.HasSuffix(name, segSuffix)}, nil
}

type faultFile struct {
	file
	fs  *faultFS
	seg bool // a segment file: writes, writeErr and gate apply
}

func (f *faultFile) Sync() error {
	f.fs.syncs.Add(1)
	time.Sleep(time.Duration(f.fs.syncDelay.Load()))
	if e := f.fs.syncErr.Load(); e != nil {
		return *e
	}
	return f.file.Sync()
}

func (f *faultFile) Write(b []byte) (int, error) {
	if f.seg {
		f.fs.writes.Add(1)
		if g := f.fs.gate.Load(); g != nil {
			<-*g
		}
		if e := f.fs.writeErr.Load(); e != nil {
			n, _ := f.file.Write(b[:len(b)/2])
			return n, *e
		}
	}
	if f.fs.noSpace.Load() {
		n, _ := f.file.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return f.file.Write(b)
}
