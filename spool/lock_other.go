//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package spool

import (
	"io"
	"os"
	"path/filepath"
)

// lockDir on a platform without flock(2) only creates dir/lock: two
// processes opening the same spool are not detected there (doc.go says so).
func lockDir(dir string) (io.Closer, error) {
	return os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
}
