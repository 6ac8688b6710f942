package compression

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// TestLZ4TableReuse checks that a used table, including one whose base is
// about to wrap, gives the same blocks as a fresh one: entries left by
// earlier blocks never turn into matches.
func TestLZ4TableReuse(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	words := []string{"alpha", "beta", "gamma", "delta", `"id":`, ",", "\n"}
	input := func(n int) []byte {
		var b []byte
		for len(b) < n {
			b = append(b, words[rnd.IntN(len(words))]...)
			b = append(b, byte('0'+rnd.IntN(10)))
		}
		return b[:n]
	}
	var used lz4Table
	for _, base := range []uint32{0, 1<<32 - 3<<20, 1<<32 - lz4Window - 100} {
		used.base = base
		for i, n := range []int{13, 100, 70 << 10, 1 << 20, 200, 4 << 20} {
			src := input(n)
			var fresh lz4Table
			want := make([]byte, n+lz4Slack)
			got := make([]byte, n+lz4Slack)
			wn, gn := fresh.compress(want, src), used.compress(got, src)
			if !bytes.Equal(got[:gn], want[:wn]) {
				t.Fatalf("base %#x, block %d (%d bytes): %d bytes from a used table differ from %d from a fresh one", base, i, n, gn, wn)
			}
			if wn == 0 {
				continue
			}
			out := make([]byte, n)
			if m, err := lz4.UncompressBlock(got[:gn], out); err != nil || m != n || !bytes.Equal(out, src) {
				t.Fatalf("base %#x, block %d (%d bytes): UncompressBlock: %d bytes, err %v", base, i, n, m, err)
			}
		}
	}
}

// FuzzLZ4Block checks that every block the fast compressor writes decodes,
// with pierrec/lz4, to its input, from a table used by the inputs before.
func FuzzLZ4Block(f *testing.F) {
	f.Add([]byte("hello, kafka; hello, kafka; hello, kafka"))
	f.Add(bytes.Repeat([]byte{0}, 1000))
	f.Add(bytes.Repeat([]byte(`"id":123,"id":124,`), 100))
	f.Add([]byte(`00000010id":121id":12000002000000000`)) // once compressed to its own length
	var tab lz4Table
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > lz4MaxBlock {
			return
		}
		dst := make([]byte, len(src)+lz4Slack)
		n := tab.compress(dst, src)
		if n == 0 {
			return // stored as is
		}
		if n >= len(src) {
			t.Fatalf("%d bytes compressed to %d, not fewer", len(src), n)
		}
		out := make([]byte, len(src))
		if m, err := lz4.UncompressBlock(dst[:n], out); err != nil || m != len(src) || !bytes.Equal(out, src) {
			t.Fatalf("UncompressBlock: %d of %d bytes, err %v", m, len(src), err)
		}
	})
}
