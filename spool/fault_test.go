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
	return &faultFile{file: fl, fs: f}, nil
}

type faultFile struct {
	file
	fs *faultFS
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
	if f.fs.noSpace.Load() {
		n, _ := f.file.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return f.file.Write(b)
}
