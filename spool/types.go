package spool

import (
	"encoding/hex"
	"errors"
	"time"
)

// Record is what Append writes: a producer record after its partitioner
// (Partition -1 when the partition is not known yet, as for a topic whose
// metadata has not arrived).
type Record struct {
	Topic     string
	Partition int32
	// Timestamp is kept to the millisecond (its location is not kept);
	// the zero time stays zero.
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Entry is a record read back from the spool, with its sequence.
type Entry struct {
	Seq uint64
	Record
}

// ID identifies a spool: 16 random bytes made when its directory is first
// opened and kept in its "id" file. Sequences are unique per ID.
type ID [16]byte

// String is the ID in hexadecimal.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// SyncPolicy says when the spool fsyncs its log.
type SyncPolicy int

const (
	// SyncInterval (the default, the zero value) fsyncs every
	// Options.SyncInterval: Append returns once the record is written to
	// the file (it survives a crash of the process), and a power loss
	// loses at most the last interval.
	SyncInterval SyncPolicy = iota
	// SyncNone never fsyncs the log: Append returns once the record is
	// in the page cache, which survives a crash of the process but not
	// of the machine. The position file is fsynced only when it reserves
	// sequences (once per 2^19 appends), so that none is given twice.
	SyncNone
	// SyncAlways returns from Append only once an fsync covers the
	// record; appenders that arrive while an fsync runs share the next
	// one (group commit).
	SyncAlways
)

// String is the policy's name, as ParseSyncPolicy reads it.
func (p SyncPolicy) String() string {
	switch p {
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	case SyncAlways:
		return "always"
	}
	return "SyncPolicy(?)"
}

// ParseSyncPolicy reads "none", "interval" or "always" (the future
// property samsa.spool.sync).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "interval", "":
		return SyncInterval, nil
	case "none":
		return SyncNone, nil
	case "always":
		return SyncAlways, nil
	}
	return 0, errors.New("spool: unknown sync policy " + `"` + s + `"` + ` (want none, interval or always)`)
}

// Defaults of Options.
const (
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultSegmentBytes = 64 << 20
	DefaultMaxBytes     = 1 << 30
)

// Options configures Open. The zero value of a field means its default.
type Options struct {
	// Dir is the spool's directory, created if missing. Required.
	Dir string
	// Sync is the sync policy; default SyncInterval.
	Sync SyncPolicy
	// SyncInterval is SyncInterval's period, and how often the
	// acknowledged position is written and acknowledged segments deleted
	// under every policy; default 100 ms.
	SyncInterval time.Duration
	// SegmentBytes is the size at which the log rolls to a new segment
	// file; default 64 MiB, or MaxBytes/4 if that is smaller.
	SegmentBytes int64
	// MaxBytes bounds the segments on disk: Append waits for acknowledged
	// segments to be deleted, up to its context, then fails with ErrFull.
	// Default 1 GiB.
	MaxBytes int64
	// OnUsage, if set, is called with the bytes of the segment files
	// after a Write grew them and after a deletion of acknowledged
	// segments shrank them, on the goroutine that did it (the writer's,
	// including a Write that ran the maintenance itself; the spool's own;
	// Close's; Open's for the segments recovery deletes), with no lock of
	// the spool held: it may call the spool (Write included). It should
	// be cheap: the spool's goroutine waits for it. Calls from concurrent writers may arrive out of
	// order: Usage returns the current value. Default nil.
	OnUsage func(bytes int64)

	// fs replaces the file system (tests inject failures).
	fs fileSystem
}

// The spool's errors. Each says where it surfaces; every error from the
// file system is wrapped, so errors.Is finds the cause (syscall.EIO,
// syscall.ENOSPC) too.
var (
	// ErrLocked is returned by Open when another Spool, in this process
	// or another, has the directory open.
	ErrLocked = errors.New("spool: directory in use by another spool")
	// ErrClosed is returned by Append after Close, and by an Append
	// waiting for space when Close is called.
	ErrClosed = errors.New("spool: closed")
	// ErrFull is returned by Append when the record did not fit under
	// MaxBytes (or the disk had no space: then it also wraps
	// syscall.ENOSPC) before its context ended; it wraps the context's
	// error. The producer reports it as ErrBufferExhausted.
	ErrFull = errors.New("spool: full")
	// ErrTooLarge is returned by Append for a record whose entry is larger
	// than 64 MiB or than MaxBytes: it could never be written.
	ErrTooLarge = errors.New("spool: record too large")
	// ErrFailed is wrapped, with the cause, by every Append (and Close)
	// after a write or fsync of the log or of the position file failed:
	// the spool stops (fail-stop), since after a failed fsync the kernel
	// may have dropped the pages it could not write. Records whose Append
	// returned before the failure are in the log (an fsync failure under
	// SyncInterval or SyncNone excepted: those were written, not synced);
	// reopening the directory recovers them.
	ErrFailed = errors.New("spool: stopped by an I/O error")
)
