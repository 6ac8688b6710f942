package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsCodecFunc(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{"github.com/klauspost/compress/zstd.(*Encoder).EncodeAll", true},
		{"github.com/klauspost/compress/s2.encodeBlockAsm", true},
		{"github.com/pierrec/lz4/v4/internal/lz4block.(*Compressor).CompressBlock", true},
		{"compress/gzip.(*Writer).Write", true},
		{"compress/flate.(*compressor).deflate", true},
		{"github.com/golang/snappy.Encode", true},
		{"github.com/samsa-go/samsa/compression.(*encoder).Encode", false},
		{"github.com/twmb/franz-go/pkg/kgo.(*zstdCompressor).Compress", false},
		{"runtime.memmove", false},
		{"hash/crc32.ieeeCLMUL", false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, isCodecFunc(tc.name), tc.name)
	}
}

// testProfile is a CPU profile with three stacks: one inside zstd (a
// memmove the encoder called), one in the producer alone, one in the
// runtime.
func testProfile() *profile.Profile {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	enc, move, send, gc := fn(1, "github.com/klauspost/compress/zstd.(*Encoder).EncodeAll"), fn(2, "runtime.memmove"),
		fn(3, "github.com/samsa-go/samsa/producer.(*Producer).SendCallback"), fn(4, "runtime.gcBgMarkWorker")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lEnc, lMove, lSend, lGC := loc(1, enc), loc(2, move), loc(3, send), loc(4, gc)
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lMove, lEnc, lSend}, Value: []int64{6, 60_000_000}},
			{Location: []*profile.Location{lSend}, Value: []int64{3, 30_000_000}},
			{Location: []*profile.Location{lGC}, Value: []int64{1, 10_000_000}},
		},
		Location: []*profile.Location{lEnc, lMove, lSend, lGC},
		Function: []*profile.Function{enc, move, send, gc},
	}
}

func TestSplitProfile(t *testing.T) {
	c, err := splitProfile(testProfile())
	require.NoError(t, err)
	assert.Equal(t, codecSplit{Total: 100_000_000, Codec: 60_000_000}, c, "the cpu values, a codec frame anywhere on the stack")
	assert.InDelta(t, 0.6, c.share(), 1e-12)
	assert.Zero(t, codecSplit{}.share())
}

func TestReadCodecSplit(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, testProfile().Write(&b))
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	c, err := readCodecSplit(path)
	require.NoError(t, err)
	assert.InDelta(t, 0.6, c.share(), 1e-12)

	require.NoError(t, os.WriteFile(path, []byte("not a profile"), 0o644))
	_, err = readCodecSplit(path)
	assert.Error(t, err)
}
