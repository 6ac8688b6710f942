package compression

import (
	"bytes"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// FuzzLZ4FastBlock checks the fast compressor on its own: pierrec/lz4
// decodes every block it writes back to the input, and a dst too small for
// the block gives 0 (the block is then stored), never a panic or a
// truncated block.
func FuzzLZ4FastBlock(f *testing.F) {
	f.Add([]byte("hello, kafka"), uint16(0))
	f.Add(bytes.Repeat([]byte("0123456789"), 2000), uint16(100))
	f.Add(make([]byte, 70000), uint16(0))
	f.Add([]byte("abcdabcdabcdabcdabcdabcd0123abcd0123"), uint16(3))
	var e lz4Fast
	f.Fuzz(func(t *testing.T, src []byte, short uint16) {
		src = src[:min(len(src), lz4Block)]
		bound := lz4.CompressBlockBound(len(src))
		dst := make([]byte, max(0, bound-int(short)))
		n := e.compressBlock(dst, src)
		if n == 0 {
			if len(dst) >= bound {
				t.Fatalf("%d bytes did not fit in %d, the bound", len(src), len(dst))
			}
			return
		}
		out := make([]byte, len(src))
		m, err := lz4.UncompressBlock(dst[:n], out)
		if err != nil || m != len(src) || !bytes.Equal(out, src) {
			t.Fatalf("%d bytes: block of %d decodes to %d bytes, err %v, equal %v", len(src), n, m, err, bytes.Equal(out[:m], src))
		}
	})
}
