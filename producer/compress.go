package producer

import "sync"

// Compressing is the IO goroutine's heaviest work: with zstd it takes most
// of a producer's CPU, and one goroutine compressing every batch bounds the
// throughput to one core's encoding speed. So before building each request
// the IO goroutine hands the batches the request will most likely carry (the
// first sealed batch of each of the broker's ready partitions, up to a
// request's worth) to a fixed set of helper goroutines, compresses alongside
// them, and waits until all are done: fork and join, with no state shared
// beyond the batches, which nobody else touches while they are sealed and
// not yet sent. The helpers start with the producer and end with the IO
// goroutine; none is started without compression or with
// Config.CompressionConcurrency 1.

// compressors is the IO goroutine's pool of compression helpers.
type compressors struct {
	jobs    chan *batch
	pending sync.WaitGroup // the current round's batches
	helpers sync.WaitGroup // the helper goroutines
	ratio   float64        // IO goroutine: recent uncompressed/compressed size
}

// maxCompressRound bounds the batches of one round (the jobs channel's
// capacity).
const maxCompressRound = 256

// newCompressors starts n-1 helpers for s (the IO goroutine is the n-th).
func newCompressors(s *sink, n int) *compressors {
	c := &compressors{jobs: make(chan *batch, maxCompressRound), ratio: 1}
	for range n - 1 {
		c.helpers.Go(func() {
			var scratch []byte
			for b := range c.jobs {
				scratch, _ = s.finishInto(b, scratch)
				c.pending.Done()
			}
		})
	}
	return c
}

// stop ends the helpers once the IO goroutine is done with them.
func (c *compressors) stop() {
	close(c.jobs)
	c.helpers.Wait()
}

// precompress finishes, in parallel, the batches that the next request to
// br is most likely to carry: the first sealed batch of each of its ready
// partitions, up to a request's worth (MaxRequestSize after compression, by
// the ratio of the last rounds). A batch whose compression fails is left as
// it was: nextBatch finishes it again and fails it there.
func (s *sink) precompress(br *ioBroker) {
	c := s.compress
	if c == nil || len(br.ready) < 2 {
		return // nextBatch compresses a lone batch itself
	}
	round := s.round[:0]
	budget := int(float64(s.cfg.MaxRequestSize) * c.ratio)
	for _, ip := range br.ready {
		if budget <= 0 || len(round) == maxCompressRound {
			break
		}
		if ip.readyOn != br.id || ip.leader != br.id || len(ip.retry) > 0 {
			continue
		}
		if b := ip.acc.PeekSealed(); b != nil && b.IO.raw == nil {
			round = append(round, b)
			budget -= b.Builder.Len()
		}
	}
	if len(round) > 1 {
		c.pending.Add(len(round))
		for _, b := range round {
			c.jobs <- b // never blocks: the round fits in the channel
		}
	help:
		for {
			select {
			case b := <-c.jobs:
				s.scratch, _ = s.finishInto(b, s.scratch)
				c.pending.Done()
			default:
				break help
			}
		}
		c.pending.Wait()
		var plain, packed int
		for _, b := range round {
			plain, packed = plain+b.IO.uncompressed, packed+len(b.IO.raw)
		}
		if packed > 0 {
			// Smoothed, and within [1, 16]: a request's worth of
			// batches is never estimated at more than 16 requests.
			c.ratio = min(max((3*c.ratio+float64(plain)/float64(packed))/4, 1), 16)
		}
	}
	clear(round)
	s.round = round[:0]
}
