package compression_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os/exec"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/samsa-go/samsa/compression"
)

// The files under testdata/vectors were made by other implementations (GNU
// gzip, the lz4 and zstd reference CLIs, Google's C++ snappy); see
// testdata/gen_vectors.py for how.
func TestDecodeReferenceVectors(t *testing.T) {
	cases := []struct {
		file, plain string
		t           compression.Type
	}{
		{"tiny.txt.gz", "tiny.txt", compression.Gzip},
		{"records.json.gz", "records.json", compression.Gzip},
		{"records.json.multi.gz", "records.json", compression.Gzip}, // two members
		{"tiny.txt.lz4", "tiny.txt", compression.LZ4},
		{"records.json.lz4", "records.json", compression.LZ4},             // 4 MiB blocks, content checksum
		{"records.json.dep-b4-bx.lz4", "records.json", compression.LZ4},   // dependent 64 KiB blocks, block checksums, content size, HC
		{"records.json.multi.lz4", "records.json", compression.LZ4},       // two frames
		{"tiny.txt.zst", "tiny.txt", compression.Zstd},                    // content size, checksum
		{"records.json.zst", "records.json", compression.Zstd},            // content size, checksum
		{"records.json.stream.zst", "records.json", compression.Zstd},     // no content size, 2 MiB window
		{"records.json.nocheck-19.zst", "records.json", compression.Zstd}, // level 19, no checksum
		{"records.json.multi.zst", "records.json", compression.Zstd},      // two frames
		{"tiny.txt.snappy", "tiny.txt", compression.Snappy},               // raw block
		{"records.json.snappy", "records.json", compression.Snappy},       // raw block
		{"tiny.txt.xerial", "tiny.txt", compression.Snappy},
		{"records.json.xerial", "records.json", compression.Snappy},    // 32 KiB chunks, as snappy-java
		{"records.json.xerial-4k", "records.json", compression.Snappy}, // other chunk size
	}
	for _, tc := range cases {
		want := readVector(t, tc.plain)
		out, err := compression.AppendDecompress(tc.t, nil, readVector(t, tc.file), len(want))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !bytes.Equal(out, want) {
			t.Errorf("%s: decoded %d bytes that differ from %s", tc.file, len(out), tc.plain)
		}
	}
}

func TestXerialHeaderAsSnappyJavaWritesIt(t *testing.T) {
	z := mustCompress(t, compression.Snappy, []byte("x"))
	want := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(z, want) {
		t.Fatalf("header % x, want % x", z[:min(len(z), 16)], want)
	}
	// Same bytes as the independent vector: a one-chunk frame of "hello, kafka".
	ref := readVector(t, "tiny.txt.xerial")
	if got := mustCompress(t, compression.Snappy, readVector(t, "tiny.txt")); !bytes.Equal(got, ref) {
		t.Errorf("xerial frame of tiny.txt:\n got % x\nwant % x", got, ref)
	}
}

func TestLZ4FrameFlagsKafkaReads(t *testing.T) {
	// Kafka's Lz4BlockInputStream rejects dependent blocks and checks a
	// content checksum in its own way. FLG: version 01, independent
	// blocks, no block checksum, no content size, no content checksum.
	// BD: the smallest block size that holds the input, 4 MiB at most;
	// HC: the descriptor checksum.
	cases := []struct {
		size   int
		bd, hc byte
		blocks int
	}{
		{0, 0x40, 0x82, 0},
		{64 << 10, 0x40, 0x82, 1},
		{64<<10 + 1, 0x50, 0xfb, 1},
		{200 << 10, 0x50, 0xfb, 1},
		{1 << 20, 0x60, 0x51, 1},
		{1<<20 + 1, 0x70, 0x73, 1},
		{4<<20 + 1, 0x70, 0x73, 2},
	}
	for _, level := range []int{0, 9} {
		c := mustCompressor(t, compression.LZ4, level)
		for _, tc := range cases {
			z, err := c.AppendCompress(nil, records(tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if len(z) < 11 || !bytes.Equal(z[:4], []byte{0x04, 0x22, 0x4d, 0x18}) {
				t.Fatalf("not an LZ4 frame: % x", z[:min(len(z), 7)])
			}
			if flg, bd, hc := z[4], z[5], z[6]; flg != 0x60 || bd != tc.bd || hc != tc.hc {
				t.Errorf("level %d, %d bytes: FLG %#x BD %#x HC %#x, want 0x60 %#x %#x", level, tc.size, flg, bd, hc, tc.bd, tc.hc)
			}
			// Walk the blocks: each a 4-byte size (high bit: stored),
			// then the end mark and nothing after it.
			blocks, at := 0, 7
			for ; at+4 <= len(z); blocks++ {
				n := int(binary.LittleEndian.Uint32(z[at:]) &^ (1 << 31))
				at += 4
				if n == 0 {
					break
				}
				at += n
			}
			if blocks != tc.blocks || at != len(z) {
				t.Errorf("level %d, %d bytes: %d blocks ending at %d of %d, want %d blocks then the end", level, tc.size, blocks, at, len(z), tc.blocks)
			}
		}
	}
}

func TestLZ4OutputReadByPierrecAndUs(t *testing.T) {
	sizes := []int{0, 1, 12, 13, 100, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20, 4<<20 + 1}
	inputs := map[string]func(int) []byte{
		"records": records,
		"w2":      w2Batch,
		"random":  random,
		"zeros":   func(n int) []byte { return make([]byte, n) },
		// Incompressible but for one long repeat in the middle.
		"mixed": func(n int) []byte {
			b := random(n)
			copy(b[n/2:], b[n/4:n/2])
			return b
		},
	}
	for _, level := range []int{0, 1, 9} {
		c := mustCompressor(t, compression.LZ4, level)
		for name, gen := range inputs {
			for _, n := range sizes {
				src := gen(n)
				z, err := c.AppendCompress([]byte("prefix"), src)
				if err != nil {
					t.Fatalf("level %d %s %d: %v", level, name, n, err)
				}
				if !bytes.HasPrefix(z, []byte("prefix")) {
					t.Fatalf("level %d %s %d: dst prefix lost", level, name, n)
				}
				z = z[len("prefix"):]
				// Stored blocks cost 4 bytes each, the frame 11.
				if bound := len(src) + 4*(len(src)/(4<<20)+1) + 11; len(z) > bound {
					t.Errorf("level %d %s %d: %d bytes, more than %d", level, name, n, len(z), bound)
				}
				got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(z)))
				if err != nil || !bytes.Equal(got, src) {
					t.Errorf("level %d %s %d: pierrec/lz4 Reader: err %v, equal %v", level, name, n, err, bytes.Equal(got, src))
				}
				got, err = compression.AppendDecompress(compression.LZ4, nil, z, len(src))
				if err != nil || !bytes.Equal(got, src) {
					t.Errorf("level %d %s %d: AppendDecompress: err %v, equal %v", level, name, n, err, bytes.Equal(got, src))
				}
			}
		}
	}
}

// TestReferenceToolsReadOurOutput pipes our output through the reference
// implementations when they are installed (see testdata/gen_vectors.py);
// otherwise it skips.
func TestReferenceToolsReadOurOutput(t *testing.T) {
	src := records(150 << 10)
	cases := []struct {
		t    compression.Type
		tool []string
	}{
		{compression.Gzip, []string{"gzip", "-d", "-c"}},
		{compression.LZ4, []string{"lz4", "-d", "-c"}},
		{compression.Zstd, []string{"zstd", "-d", "-c"}},
		// Xerial framing, decoded chunk by chunk by C++ snappy.
		{compression.Snappy, []string{"/usr/bin/python3", "-c", `
import snappy, struct, sys
b = sys.stdin.buffer.read()
assert b[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", b[:16]
i, out = 16, []
while i < len(b):
    (n,) = struct.unpack(">i", b[i:i+4])
    out.append(snappy.uncompress(b[i+4:i+4+n]))
    i += 4 + n
sys.stdout.buffer.write(b"".join(out))
`}},
	}
	for _, tc := range cases {
		if _, err := exec.LookPath(tc.tool[0]); err != nil {
			t.Logf("%s: %s not installed, skipped", tc.t, tc.tool[0])
			continue
		}
		if tc.t == compression.Snappy && exec.Command(tc.tool[0], "-c", "import snappy").Run() != nil {
			t.Logf("snappy: python3-snappy not installed, skipped")
			continue
		}
		for _, level := range []int{0, 1, 9} {
			if tc.t == compression.Snappy && level != 0 {
				continue
			}
			c := mustCompressor(t, tc.t, level)
			z, err := c.AppendCompress(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(tc.tool[0], tc.tool[1:]...)
			cmd.Stdin = bytes.NewReader(z)
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("%s level %d: %s: %v", tc.t, level, tc.tool[0], err)
				continue
			}
			if !bytes.Equal(out, src) {
				t.Errorf("%s level %d: %s decoded %d bytes that differ from the input", tc.t, level, tc.tool[0], len(out))
			}
		}
	}
}
