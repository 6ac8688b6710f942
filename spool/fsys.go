package spool

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/samsa-go/samsa/internal/spoolfault"
)

// fileSystem is every file operation the spool makes, so that tests can
// inject failures (EIO on fsync, ENOSPC on write). osFS is the real one.
type fileSystem interface {
	OpenFile(name string, flag int, perm fs.FileMode) (file, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	MkdirAll(name string, perm fs.FileMode) error
}

// file is an open file of a fileSystem.
type file interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// hookedFS is the real file system with the failures a test outside the
// package registered for the directory (internal/spoolfault): fsync, write
// and read errors, and a hook called at each named operation.
type hookedFS struct {
	osFS
	faults *spoolfault.Faults
}

func (h hookedFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := h.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	seg := strings.HasSuffix(name, segSuffix)
	if seg && flag&os.O_CREATE != 0 {
		h.faults.Hook(spoolfault.SegmentCreate, name)
	}
	read := spoolfault.SegmentRead
	if flag&os.O_RDWR != 0 {
		read = spoolfault.SegmentScan // only Open's scan opens a segment read-write
	}
	return hookedFile{file: f, faults: h.faults, name: name, seg: seg, read: read,
		pos: filepath.Base(name) == positionFile+".tmp"}, nil
}

func (h hookedFS) Remove(name string) error {
	err := h.osFS.Remove(name)
	if err == nil && strings.HasSuffix(name, segSuffix) {
		h.faults.Hook(spoolfault.SegmentRemove, name)
	}
	return err
}

func (h hookedFS) Rename(oldname, newname string) error {
	if filepath.Base(newname) == positionFile {
		h.faults.Hook(spoolfault.PositionRename, oldname)
	}
	return h.osFS.Rename(oldname, newname)
}

type hookedFile struct {
	file
	faults *spoolfault.Faults
	name   string
	seg    bool          // a segment file: the write faults apply
	read   spoolfault.Op // a segment's reads: SegmentScan or SegmentRead
	pos    bool          // the position file's temporary copy
}

func (f hookedFile) Sync() error {
	if err := f.faults.SyncErr(); err != nil {
		return err
	}
	return f.file.Sync()
}

// Write writes p in two halves, the hook called between them, so that a
// hook that kills the process leaves a torn write.
//
// A segment write first waits while spoolfault's HoldWrites holds them,
// and fails with SetWriteErr's error, half of it written.
func (f hookedFile) Write(p []byte) (int, error) {
	var op spoolfault.Op
	switch {
	case f.seg:
		if err := f.faults.BeforeWrite(); err != nil {
			n, _ := f.file.Write(p[:len(p)/2])
			return n, err
		}
		op = spoolfault.SegmentWrite
	case f.pos:
		op = spoolfault.PositionWrite
	default:
		return f.file.Write(p)
	}
	if len(p) < 2 || !f.faults.HasHook() {
		return f.file.Write(p)
	}
	n, err := f.file.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	f.faults.Hook(op, f.name)
	m, err := f.file.Write(p[n:])
	return n + m, err
}

func (f hookedFile) ReadAt(p []byte, off int64) (int, error) {
	if f.seg {
		f.faults.Hook(f.read, f.name)
		if f.read == spoolfault.SegmentRead {
			if err := f.faults.ReadErr(); err != nil {
				return 0, err
			}
		}
	}
	return f.file.ReadAt(p, off)
}

func (f hookedFile) Read(p []byte) (int, error) {
	if f.seg {
		f.faults.Hook(f.read, f.name)
	}
	return f.file.Read(p)
}

// syncDir makes the directory's entries (a created, renamed or removed
// file) durable.
func syncDir(fsys fileSystem, dir string) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileAtomic replaces name with data: a temporary file written and
// fsynced, renamed over name, and the directory fsynced (without doSync,
// only the write and the rename: the page cache keeps them across a
// process crash).
func writeFileAtomic(fsys fileSystem, dir, name string, data []byte, doSync bool) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && doSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	if doSync {
		return syncDir(fsys, dir)
	}
	return nil
}

// readFile reads a whole small file through fsys.
func readFile(fsys fileSystem, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<20))
}
