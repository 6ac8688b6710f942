package producer

import (
	"math/rand/v2"
	"sync/atomic"
)

// stickyPartitioner is the uniform sticky partitioner of KIP-794 for one
// topic: it places records that their Partitioner left to it
// (UnknownPartition). All records go to one partition, the sticky one, until
// at least batchSize bytes were appended to it; then it switches to another
// partition chosen at random. With a load function, the choice is adaptive,
// as the Java client's partitioner.adaptive.partitioning.enable=true: the
// weight of a partition is (max queue + 1 - its queue), so a partition with a
// shorter queue (a faster broker) is chosen more often, and partitions
// without a leader, or whose leader was not ready for longer than
// partitioner.availability.timeout.ms, are skipped. With uniform set
// (partitioner.adaptive.partitioning.enable=false) queues weigh nothing:
// the next partition is drawn uniformly among those with a leader, as
// Java's nextPartition without load stats. Counting bytes rather than batches is what
// makes it uniform: a slow broker does not get more records because its
// batches fill up sooner (the flaw of KIP-480's sticky partitioner).
//
// It is safe for concurrent use without a lock: the sticky partition and the
// bytes appended to it live in one atomic word. partition and appended do
// not allocate.
//
// The load function, when not nil, returns the queue length of partition p
// (the number of batches queued for it; any unit works if it is the same for
// all partitions), -1 if p has no leader, or -2 if its leader is not ready
// (accumulator.Partition.Load). It is
// called from Send's goroutine and must be cheap and safe for concurrent
// use.
//
// Use from the Send path:
//
//	p := sp.partition(n, load)     // then append the record to p
//	sp.appended(p, size, n, load)  // size: the bytes the record took
type stickyPartitioner struct {
	// state holds the sticky partition in its high 32 bits (as uint32;
	// noSticky when none is chosen yet) and the bytes appended to it since
	// it was chosen in its low 32 bits.
	state     atomic.Uint64
	batchSize uint64
	uniform   bool // adaptive partitioning off: queues weigh nothing
}

const noSticky = uint64(0xffffffff) // int32(-1) in the high half

func packSticky(p int32, produced uint64) uint64 { return uint64(uint32(p))<<32 | produced }

func newStickyPartitioner(batchSize int, uniform bool) *stickyPartitioner {
	if batchSize < 1 {
		batchSize = 1
	}
	sp := &stickyPartitioner{batchSize: uint64(min(batchSize, 1<<30)), uniform: uniform}
	sp.state.Store(noSticky << 32)
	return sp
}

// partition returns the sticky partition, choosing one when there is none
// yet, when it is out of range (numPartitions changed), or when load says it
// has no leader and another partition has one. It returns UnknownPartition
// only when numPartitions < 1.
func (sp *stickyPartitioner) partition(numPartitions int32, load func(p int32) int) int32 {
	if numPartitions < 1 {
		return UnknownPartition
	}
	for {
		st := sp.state.Load()
		cur := int32(st >> 32)
		if cur >= 0 && cur < numPartitions {
			if load == nil || load(cur) >= 0 {
				return cur
			}
			next, ok := sp.next(numPartitions, load)
			if !ok && (load(cur) == -2 || load(next) != -2) {
				// None is available: stay, unless cur has no leader
				// and next has one (not ready).
				return cur
			}
			if sp.state.CompareAndSwap(st, packSticky(next, 0)) {
				return next
			}
			continue
		}
		next, _ := sp.next(numPartitions, load)
		if sp.state.CompareAndSwap(st, packSticky(next, 0)) {
			return next
		}
	}
}

// appended records that bytes were appended to partition p, and switches to
// the next partition once the sticky partition took at least batchSize
// bytes. Bytes appended to a partition that is no longer the sticky one (a
// concurrent Send switched first) are not counted.
func (sp *stickyPartitioner) appended(p int32, bytes int, numPartitions int32, load func(p int32) int) {
	if bytes <= 0 || p < 0 {
		return
	}
	add := min(uint64(bytes), sp.batchSize)
	for {
		st := sp.state.Load()
		if int32(st>>32) != p {
			return
		}
		produced := st&0xffffffff + add
		var nst uint64
		if produced < sp.batchSize {
			nst = packSticky(p, produced)
		} else {
			next, _ := sp.next(numPartitions, load)
			nst = packSticky(next, 0)
		}
		if sp.state.CompareAndSwap(st, nst) {
			return
		}
	}
}

// next picks a partition at random among the available ones (load >= 0):
// uniformly without load or with uniform set, else weighted by (max queue +
// 1 - queue). When none is available it draws among the partitions with a
// leader that is not ready (-2), as Java's partitioner does once every
// partition was excluded, and ok is false; when no partition has a leader
// at all, uniformly over all partitions. It makes two passes over the
// partitions, draws one random number and allocates nothing: the first
// pass sums the weights, the second finds the partition where the running
// sum passes the draw.
func (sp *stickyPartitioner) next(numPartitions int32, load func(p int32) int) (p int32, ok bool) {
	if numPartitions < 1 {
		return UnknownPartition, false
	}
	if load == nil {
		return rand.Int32N(numPartitions), true
	}
	maxQueue, sumQueue, available, unready := -1, 0, 0, 0
	for i := range numPartitions {
		q := load(i)
		if q < 0 {
			if q == -2 {
				unready++
			}
			continue
		}
		if sp.uniform {
			q = 0
		}
		available++
		sumQueue += q
		maxQueue = max(maxQueue, q)
	}
	if available == 0 {
		if unready > 0 {
			return sp.nth(numPartitions, load, -2, rand.IntN(unready)), false
		}
		return rand.Int32N(numPartitions), false
	}
	if maxQueue == 0 {
		// All queues empty (or uniform): every available partition weighs 1.
		return sp.nth(numPartitions, load, 0, rand.IntN(available)), true
	}
	// Sum of (maxQueue + 1 - q) over the available partitions.
	total := uint64(available)*uint64(maxQueue+1) - uint64(sumQueue)
	draw := rand.Uint64N(total)
	var running uint64
	last := int32(-1)
	for i := range numPartitions {
		q := load(i)
		if q < 0 {
			continue
		}
		last = i
		if q <= maxQueue {
			running += uint64(maxQueue - q + 1)
		} else {
			running++ // the queue grew since the first pass
		}
		if running > draw {
			return i, true
		}
	}
	// The queues shrank, or leaders vanished, between the passes.
	if last >= 0 {
		return last, true
	}
	return rand.Int32N(numPartitions), false
}

// nth returns the n-th partition (0-based) whose load is in class: 0 for
// the available ones (load >= 0), -2 for those whose leader is not ready.
// Loads that changed since they were counted leave the last match, or a
// uniform draw.
func (sp *stickyPartitioner) nth(numPartitions int32, load func(p int32) int, class, n int) int32 {
	last := int32(-1)
	for i := range numPartitions {
		q := load(i)
		if (class == 0 && q >= 0) || (class != 0 && q == class) {
			if n == 0 {
				return i
			}
			n--
			last = i
		}
	}
	if last >= 0 {
		return last
	}
	return rand.Int32N(numPartitions)
}
