package harness

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/pprof/profile"
)

// codecPrefixes are the function-name prefixes of the compression code
// samsa and kgo run: klauspost/compress (zstd, s2, snappy, flate, gzip),
// pierrec/lz4, samsa's own LZ4 fast block compressor, the standard
// library's gzip and flate, and golang/snappy.
var codecPrefixes = []string{
	"github.com/samsa-go/samsa/compression.(*lz4Fast).",
	"github.com/samsa-go/samsa/compression.lz4",
	"github.com/klauspost/compress/",
	"github.com/pierrec/lz4/",
	"compress/gzip.",
	"compress/flate.",
	"github.com/golang/snappy.",
}

// isCodecFunc reports whether a profile's function name is codec code.
func isCodecFunc(name string) bool {
	for _, p := range codecPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// codecSplit is a CPU profile's samples split between the codec and the
// rest.
type codecSplit struct {
	// Total and Codec are CPU time in the profile's samples: all of them,
	// and those with a codec function anywhere in the stack (so the
	// codec's own allocations and copies count as codec).
	Total, Codec int64
}

// share is the codec's fraction of the samples, 0 without samples.
func (c codecSplit) share() float64 {
	if c.Total <= 0 {
		return 0
	}
	return float64(c.Codec) / float64(c.Total)
}

// readCodecSplit reads a CPU profile (runtime/pprof) and splits it.
func readCodecSplit(path string) (codecSplit, error) {
	f, err := os.Open(path)
	if err != nil {
		return codecSplit{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return codecSplit{}, fmt.Errorf("%s: %w", path, err)
	}
	return splitProfile(p)
}

// splitProfile splits p's cpu samples (the sample type "cpu", in
// nanoseconds; else the last sample type).
func splitProfile(p *profile.Profile) (codecSplit, error) {
	idx := len(p.SampleType) - 1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return codecSplit{}, fmt.Errorf("profile has no sample types")
	}
	var c codecSplit
	for _, s := range p.Sample {
		v := s.Value[idx]
		c.Total += v
		if sampleInCodec(s) {
			c.Codec += v
		}
	}
	return c, nil
}

func sampleInCodec(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && isCodecFunc(l.Function.Name) {
				return true
			}
		}
	}
	return false
}
