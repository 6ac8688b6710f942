// Package spool is a durable, bounded log of producer records: what a
// producer accepted survives a crash of the process (SIGKILL included), a
// restart and an outage of any length, and is replayed until the broker
// acknowledges it. It uses the standard library only. The producer's
// Config.Spool sits on top of it (DESIGN.md, "Spool"); it can also be
// used alone.
//
// # Persisted and delivered
//
// A record is persisted when Append returns its sequence: it is in the
// log under the sync policy (below). Write returns the sequence as soon
// as the record is in the spool's write buffer, before it is in the file
// (see "Write buffer"); Persisted then says which sequences are
// persisted, Written which are in the file, Flush waits for the file and
// Sync also fsyncs (shared with concurrent appenders). A crash of the
// process loses what was only in the buffer: it was never reported
// persisted. A record is delivered
// when the broker acknowledged it; the producer then calls Ack with its
// sequence (an Ack after Close began, or after the spool failed, reports
// false: the record stays for
// the next Open). Acks
// come in any order (partitions progress independently): the spool keeps
// the contiguous acknowledged position (every sequence below it
// acknowledged) and the set acknowledged above it, writes both to a small
// position file (atomically: a temporary file written and fsynced,
// renamed, the directory fsynced) every SyncInterval, and deletes a
// segment file once every sequence in it is below the contiguous
// position. Nothing else deletes a record: no timeout expires one.
//
// After a crash, Open finds every persisted record that was not
// acknowledged, and Unacked yields them in sequence order. The promise is
// at least once: an acknowledgement not yet in the position file when the
// process died is lost, and its record is replayed (the set of acks above
// the contiguous position is persisted too, so only the last interval's
// acks are at risk; a position file above 64 KiB, acks scattered over
// half a million sequences or more, is rewritten for acks at most once a
// second, so then the last second's). HeaderKey, EncodeHeader and Deduper let a consumer
// drop such copies; the producer's exactly-once mode
// (producer.SpoolConfig.ExactlyOnce) avoids them instead, by committing
// its records in Kafka transactions with the next sequence as progress,
// and acknowledging to the spool only after the commit: after a crash it
// acknowledges the unacknowledged records below the committed progress
// without sending them. Entries reads any range of unacknowledged
// sequences back while the spool is in use, a Cursor reads records by
// sequence from the live log, and Recovery().Backlog says which
// partitions have records to replay.
//
// # Sequences
//
// Append gives each record the next sequence (a uint64, from 0 in a new
// directory). A sequence is never given twice by a spool (an ID), even
// after a power loss took records whose Append had returned (and which
// the producer may have sent): the position file reserves sequences 2^20
// ahead of use, durably before they are given out, and after a crash the
// sequences jump to the reserved bound. After a clean Close they go on
// without a gap. Open takes a sequence above 2^64 - 2^21 (in a segment's
// name, an entry or the position file) for damage: a segment so named is
// left in place, unread, and counted in Recovery.DamagedRegions and
// SkippedBytes; such a position file is damaged (Recovery.PositionLost).
//
// # Write buffer
//
// Write encodes the record into an in-memory buffer under the spool's
// lock and returns; the spool's writer goroutine writes what accumulated
// with one write(2) as soon as it can (while one write runs, the next
// Writes fill the buffer: the groups form by themselves), splitting it
// only where a segment rolls, and moves Written. The buffer is bounded:
// a Write waits while it holds writeBufBytes (1 MiB; an entry larger than
// that enters an empty buffer alone), so the records not yet in the file
// take at most 2 MiB (or twice the largest entry), the buffer plus the
// group being written. MaxBytes counts the buffered bytes. Written and
// Persisted are never ahead of the file: a process killed right after
// they returned keeps every sequence below them. Acks may come for
// buffered sequences (a producer sends a record before it is in the
// file); they count, and the position file may say so before the record
// is in the file: after a crash such a record is neither in the log nor
// replayed, and it was delivered.
//
// # Sync policies
//
//   - SyncInterval (the default): Append returns once the record is
//     written to the segment file (the page cache); the spool fsyncs every
//     SyncInterval (100 ms by default). A crash of the process loses
//     nothing persisted; a power loss or kernel crash loses at most the
//     last interval's records.
//   - SyncNone: never fsyncs the log. A crash of the process loses
//     nothing persisted; a power loss may lose anything not yet written
//     back by the kernel. The position file is fsynced only when it
//     reserves sequences (once per 2^19 appends), so that the sequences
//     are never given twice under this policy either.
//   - SyncAlways: Append returns only once an fsync covers the record, so
//     a power loss loses nothing persisted. Appenders that arrive while an
//     fsync runs wait for it and share the next one (group commit): the
//     cost is one fsync per group, not per record.
//
// Whatever the policy, a segment is fsynced when it rolls (but under
// SyncNone) and at Close.
//
// # Failures
//
// A failed write or fsync of the log, and a failed fsync of the position
// file, stop the spool (fail-stop): after a failed fsync the kernel may
// have dropped the pages it could not write, and retrying it would report
// success for data that is gone. Every later Write and Append fails with
// ErrFailed, which wraps the cause (errors.Is(err, syscall.EIO)), and so
// do Flush, Sync and Close; Metrics().Failed has it. Nothing is reported
// persisted that was not: no record of a failed grouped write (nor any
// buffered after it) is ever in Written or Persisted, and under
// SyncAlways an Append whose fsync failed returns the error. Reopening
// the directory recovers what the log holds.
//
// A full disk (ENOSPC) is not a failure: the writer truncates a partial
// write back, keeps the group and retries (when segments are deleted, or
// every 50 ms; if everything in the file is acknowledged it rolls first,
// so that the active segment can be deleted); meanwhile Writes wait for
// space, as they wait at MaxBytes, until their context ends, and then
// fail with ErrFull wrapping syscall.ENOSPC. An Append whose record was
// already buffered when the disk filled returns its sequence with that
// error: the record is written once there is room. Flush and Sync say
// ErrFull wrapping ENOSPC while the disk is full; Close does not wait for
// space: it returns that error, and the records still buffered are lost
// (never persisted). A position file that cannot be written for lack of space
// is retried at the next interval, and acknowledged segments are deleted
// meanwhile. Open does not fail on a full disk either (a producer
// restarted on one must drain its backlog): Unacked and Ack work, and a
// Write that needs sequences reserved waits for space like the others.
//
// # Errors, and where they surface
//
//   - ErrLocked: Open, when another Spool (in this process or another) has
//     the directory open. The lock is flock(2) on Linux, macOS and the
//     BSDs, released by the kernel when the process dies; on other
//     systems there is no lock, and two processes must not share a
//     directory.
//   - ErrFull: Append and Write, when the record did not fit under
//     MaxBytes (or on the disk) before its context ended; it wraps the
//     context's error (and syscall.ENOSPC for a full disk). The producer
//     reports it as producer.ErrBufferExhausted. Flush, Sync and Close,
//     while the disk is full (wrapping ENOSPC).
//   - ErrTooLarge: Append, for a record whose entry exceeds 64 MiB or
//     MaxBytes.
//   - ErrClosed: Append after Close, or waiting for space when Close came;
//     Flush and Sync once Close began.
//   - ErrFailed: Write, Append, Flush, Sync and Close after a failed write
//     or fsync (above).
//   - Open's other errors are invalid Options or I/O errors on the
//     directory, wrapped with the file's name, and a directory (or
//     anything but a regular file or a symlink) where the spool keeps its
//     id or position file or their temporary ".tmp" copies: Open says
//     which and leaves it (the spool deletes nothing it did not write).
//     Damaged files are not errors (below).
//   - Unacked yields an error only for an I/O error reading a segment.
//   - Cursor.Read: ErrNotWritten for a sequence at or above Written
//     (still in the write buffer: Flush, then read again), ErrClosed after Close, an I/O error reading the
//     segment; a record the log no longer holds (acknowledged and
//     deleted, lost to damage) is not an error (ok false).
//   - ErrBadHeader: DecodeHeader and Deduper.Duplicate, for a header value
//     that is not 24 bytes.
//
// # Recovery
//
// Each entry carries its length and a CRC32C (format.go has the layout).
// Open reads every segment: a tail with no valid entry after its first
// bad byte (a write the crash cut) is truncated from the last segment and
// counted in Recovery.TruncatedBytes (such a tail of an earlier segment
// too, its records counted lost in SkippedRecords); damage inside a segment is skipped
// by scanning for the next valid entry (bounded: every offset is tried
// once, and past damage a candidate longer than the largest entry seen,
// and than 4 KiB, costs a CRC only within a budget of 64 MiB plus four
// times the segment's size, so crafted data cannot make Open quadratic),
// counted in Recovery.DamagedRegions and SkippedBytes, and the
// sequences missing across it in SkippedRecords (those records are lost).
// A damaged or missing position file replays every record in the log
// (Recovery.PositionLost), and the sequences jump 2^20 (a reservation's
// reach) past the highest the log shows given (its segments' names and
// entries), so that none is given twice. Open never panics on any directory content and
// reads through a bounded window: a 1 GiB backlog is not loaded.
//
// # Memory
//
// A Spool holds the write buffer (above: at most 2 MiB, or twice the
// largest entry, with a spare of the same size kept for reuse), a read
// window per Unacked iteration and per Cursor (and a Cursor's open
// segment file) and one at Open (1 MiB, or one entry if
// larger), the acknowledged set (a bit per sequence between the
// contiguous acknowledged position and the newest acknowledged sequence,
// in a map of 64-bit words: under 1 MiB for a 1 GiB backlog of 1 KiB
// records; and a pair per range acknowledged in bulk), and a timestamp
// per 256 unacknowledged records. Writing the position file takes a copy
// of the words (16 bytes a word) and the file's bytes (about 9 bytes a
// word), for the time of the write; the words are copied under the
// spool's lock, encoded and written without it, so Append and Ack do
// not wait for the file.
//
// # Goroutines
//
// Open starts two goroutines, ended by Close. The writer writes the
// buffer to the segment files and rolls them. The maintenance goroutine,
// every SyncInterval (and when an Ack makes a segment deletable), fsyncs
// under SyncInterval, writes the position file if acks came, and deletes
// acknowledged segments. Close writes what the buffer still holds itself.
// Write runs on its caller and does no I/O but for a position write that
// reserves sequences (once per 2^19 Writes); Append waits for the writer
// (and, under SyncAlways, fsyncs for its group); Ack never does I/O.
package spool
