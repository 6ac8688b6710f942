// Package testutil holds small helpers shared by the tests of several
// packages.
package testutil

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a logger or a progress goroutine may
// write to while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// LinesWith returns the lines written so far that contain substr, each
// with its line end.
func (s *SyncBuffer) LinesWith(substr string) []string {
	var lines []string
	for line := range strings.Lines(s.String()) {
		if strings.Contains(line, substr) {
			lines = append(lines, line)
		}
	}
	return lines
}
