package spool

import (
	"io"
	"io/fs"
	"os"
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
// package registered for the directory (internal/spoolfault).
type hookedFS struct {
	osFS
	faults *spoolfault.Faults
}

func (h hookedFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := h.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return hookedFile{file: f, faults: h.faults, seg: strings.HasSuffix(name, segSuffix)}, nil
}

type hookedFile struct {
	file
	faults *spoolfault.Faults
	seg    bool // a segment file: the write faults apply
}

func (f hookedFile) Write(b []byte) (int, error) {
	if f.seg {
		if err := f.faults.BeforeWrite(); err != nil {
			n, _ := f.file.Write(b[:len(b)/2])
			return n, err
		}
	}
	return f.file.Write(b)
}

func (f hookedFile) Sync() error {
	if err := f.faults.SyncErr(); err != nil {
		return err
	}
	return f.file.Sync()
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
