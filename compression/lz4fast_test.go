package compression

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// FuzzLZ4FastBlock checks the fast compressor on its own: every block it
// writes is lz4RefBlock's byte for byte, pierrec/lz4 decodes it back to
// the input, and a dst shorter than the bound gives 0, never a panic or a
// truncated block.
func FuzzLZ4FastBlock(f *testing.F) {
	f.Add([]byte("hello, kafka"), uint16(0))
	f.Add(bytes.Repeat([]byte("0123456789"), 2000), uint16(100))
	f.Add(make([]byte, 70000), uint16(0))
	f.Add([]byte("abcdabcdabcdabcdabcdabcd0123abcd0123"), uint16(3))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"), uint16(0))
	// Random digits: short matches among misses, so that the step grows
	// and falls back.
	rnd := rand.New(rand.NewPCG(1, 2))
	digits := make([]byte, 6000)
	for i := range digits {
		digits[i] = byte('0' + rnd.IntN(10))
	}
	f.Add(digits, uint16(1))
	var e lz4Fast
	f.Fuzz(func(t *testing.T, src []byte, short uint16) {
		src = bytes.Clone(src[:min(len(src), lz4Block)]) // no spare capacity to read past
		bound := lz4BlockBound(len(src))
		if short > 0 {
			if n := e.compressBlock(make([]byte, max(0, bound-int(short))), src); n != 0 {
				t.Fatalf("%d bytes: wrote %d bytes into %d, less than the bound %d", len(src), n, bound-int(short), bound)
			}
		}
		dst := make([]byte, bound)
		n := e.compressBlock(dst, src)
		want := make([]byte, bound)
		if m := lz4RefBlock(want, src); !bytes.Equal(dst[:n], want[:m]) {
			t.Fatalf("%d bytes: block of %d bytes differs from the reference's %d", len(src), n, m)
		}
		out := make([]byte, len(src))
		m, err := lz4.UncompressBlock(dst[:n], out)
		if err != nil || m != len(src) || !bytes.Equal(out, src) {
			t.Fatalf("%d bytes: block of %d decodes to %d bytes, err %v, equal %v", len(src), n, m, err, bytes.Equal(out[:m], src))
		}
	})
}

// lz4RefBlock is LZ4_compress_fast's algorithm as plainly as it can be
// written, the oracle for lz4Fast.compressBlock's output: it writes into
// dst, of at least lz4BlockBound(len(src)) bytes, the block the lz4 CLI
// and lz4-java write (TestLZ4AsTheReferenceCLIWritesIt checks it against
// the CLI), and returns its length.
func lz4RefBlock(dst, src []byte) int {
	var table [1 << 13]int
	hash := func(i int) int { return int((binary.LittleEndian.Uint32(src[i:]) * 2654435761) >> 19) }
	same := func(a, b int) bool { return binary.LittleEndian.Uint32(src[a:]) == binary.LittleEndian.Uint32(src[b:]) }
	var d, anchor int
	putLen := func(n int) {
		for ; n >= 255; n -= 255 {
			dst[d] = 255
			d++
		}
		dst[d] = byte(n)
		d++
	}
	if len(src) > 12 {
		last, end := len(src)-11, len(src)-5
		table[hash(0)] = 0
		ip := 1
		for ip < last {
			// Search, with the step growing by one every 64 probes
			// after the first.
			match, found := 0, false
			for step, probes := 1, 64; ip+step <= last; step, probes = probes>>6, probes+1 {
				h := hash(ip)
				match = table[h]
				table[h] = ip
				if same(match, ip) {
					found = true
					break
				}
				ip += step
			}
			if !found {
				break
			}
			for ip > anchor && match > 0 && src[ip-1] == src[match-1] {
				ip--
				match--
			}
			for {
				tok := d
				d++
				lit := ip - anchor
				dst[tok] = byte(min(lit, 15) << 4)
				if lit >= 15 {
					putLen(lit - 15)
				}
				d += copy(dst[d:], src[anchor:ip])
				binary.LittleEndian.PutUint16(dst[d:], uint16(ip-match))
				d += 2
				n := 0
				for ip+4+n < end && src[ip+4+n] == src[match+4+n] {
					n++
				}
				dst[tok] |= byte(min(n, 15))
				if n >= 15 {
					putLen(n - 15)
				}
				ip += 4 + n
				anchor = ip
				if ip >= last {
					break
				}
				table[hash(ip-2)] = ip - 2
				h := hash(ip)
				match = table[h]
				table[h] = ip
				if !same(match, ip) {
					ip++
					break
				}
			}
		}
	}
	lit := len(src) - anchor
	dst[d] = byte(min(lit, 15) << 4)
	d++
	if lit >= 15 {
		putLen(lit - 15)
	}
	return d + copy(dst[d:], src[anchor:])
}
